// Package version is `kubectl trainjob version`: the version of this binary and, when the cluster can be
// reached, of the operator running there (read from its Deployment).
package version

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/version"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
)

// Where the operator's Deployment is found: the namespace config/ installs it in, the labels it carries
// (config/manager/deployment.yaml) and the name of its container.
const (
	OperatorNamespace = "kubectl-trainjob-system"
	NameLabel         = "app.kubernetes.io/name"
	OperatorName      = "kubectl-trainjob"
	ComponentLabel    = "app.kubernetes.io/component"
	OperatorComponent = "operator"
	VersionLabel      = "app.kubernetes.io/version"
	OperatorContainer = "operator"
)

// operatorLabels select the operator's Deployment.
var operatorLabels = map[string]string{NameLabel: OperatorName, ComponentLabel: OperatorComponent}

// Info is what -o json|yaml prints.
type Info struct {
	ClientVersion   ClientVersion    `json:"clientVersion"`
	OperatorVersion *OperatorVersion `json:"operatorVersion,omitempty"`
}

// ClientVersion is this binary's build.
type ClientVersion struct {
	Version   string `json:"version"`
	GitCommit string `json:"gitCommit"`
}

// OperatorVersion is the operator found in the cluster, or why none was.
type OperatorVersion struct {
	Found         bool   `json:"found"`
	Version       string `json:"version,omitempty"`
	Image         string `json:"image,omitempty"`
	Deployment    string `json:"deployment,omitempty"`
	Replicas      int32  `json:"replicas,omitempty"`
	ReadyReplicas int32  `json:"readyReplicas,omitempty"`
	// Reason says why the operator's version is not known.
	Reason string `json:"reason,omitempty"`
}

// VersionOptions are the options of `kubectl trainjob version`.
type VersionOptions struct {
	ClientOnly        bool
	Output            string
	OperatorNamespace string

	client    client.Client
	clientErr error
	cmdutil.Streams
}

var _ cmdutil.Command = (*VersionOptions)(nil)

// NewVersionOptions returns the defaults of the flags.
func NewVersionOptions(streams cmdutil.Streams) *VersionOptions {
	return &VersionOptions{Streams: streams, OperatorNamespace: OperatorNamespace}
}

// NewCmdVersion is `kubectl trainjob version`.
func NewCmdVersion(f cmdutil.Factory, streams cmdutil.Streams) *cobra.Command {
	o := NewVersionOptions(streams)
	cmd := &cobra.Command{
		Use:   "version [--client] [-o json|yaml]",
		Short: "Print the version of the plugin and of the operator in the cluster",
		Long: `Print the version of this binary and, unless --client is given, of the operator running in
the cluster: the ` + VersionLabel + ` label (else the image tag) of the Deployment
labelled ` + NameLabel + `=` + OperatorName + `,` + ComponentLabel + `=` + OperatorComponent + ` in namespace
` + OperatorNamespace + ` (see --operator-namespace).
An operator that cannot be found or read is reported, not an error.`,
		Example: `  # The plugin's version and the operator's
  kubectl trainjob version

  # The plugin's alone, without a cluster, as JSON
  kubectl trainjob version --client -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.RunCommand(f, o, cmd, args)
		},
	}
	cmd.Flags().BoolVar(&o.ClientOnly, "client", false, "Print the client version only, without contacting the cluster")
	cmd.Flags().StringVarP(&o.Output, "output", "o", "", "Output format: json or yaml")
	cmd.Flags().StringVar(&o.OperatorNamespace, "operator-namespace", o.OperatorNamespace, "Namespace the operator is installed in")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"json", "yaml"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// Complete makes the client, unless only the client version is wanted. A missing cluster is not an error
// here: the operator's line says so.
func (o *VersionOptions) Complete(f cmdutil.Factory, _ *cobra.Command, _ []string) error {
	if !o.ClientOnly {
		o.client, o.clientErr = f.Client()
	}
	return nil
}

// Validate rejects an unknown output format.
func (o *VersionOptions) Validate() error {
	switch o.Output {
	case "", "json", "yaml":
		return nil
	}
	return fmt.Errorf("invalid -o %q: use json or yaml", o.Output)
}

// Run prints the versions.
func (o *VersionOptions) Run(ctx context.Context) error {
	info := Info{ClientVersion: ClientVersion{Version: version.Version, GitCommit: version.GitCommit}}
	if !o.ClientOnly {
		op := o.operator(ctx)
		info.OperatorVersion = &op
	}
	switch o.Output {
	case "json":
		data, err := json.MarshalIndent(info, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(o.Out, "%s\n", data)
		return err
	case "yaml":
		data, err := yaml.Marshal(info)
		if err != nil {
			return err
		}
		_, err = o.Out.Write(data)
		return err
	}
	return printText(o.Out, info)
}

func printText(w io.Writer, info Info) error {
	fmt.Fprintf(w, "Client Version: %s (commit %s)\n", info.ClientVersion.Version, info.ClientVersion.GitCommit)
	op := info.OperatorVersion
	switch {
	case op == nil:
		return nil
	case op.Found:
		_, err := fmt.Fprintf(w, "Operator Version: %s (deployment %s, image %s, %d/%d ready)\n", op.Version, op.Deployment, op.Image, op.ReadyReplicas, op.Replicas)
		return err
	}
	_, err := fmt.Fprintf(w, "Operator Version: %s\n", op.Reason)
	return err
}

// operator finds the operator's Deployment and reads its version.
func (o *VersionOptions) operator(ctx context.Context) OperatorVersion {
	if o.clientErr != nil {
		return OperatorVersion{Reason: "unknown: " + o.clientErr.Error()}
	}
	var deployments appsv1.DeploymentList
	err := o.client.List(ctx, &deployments, client.InNamespace(o.OperatorNamespace), client.MatchingLabels(operatorLabels))
	switch {
	case apierrors.IsForbidden(err):
		return OperatorVersion{Reason: fmt.Sprintf("unknown: you may not list deployments in namespace %s", o.OperatorNamespace)}
	case err != nil:
		return OperatorVersion{Reason: "unknown: " + err.Error()}
	case len(deployments.Items) == 0:
		return OperatorVersion{Reason: fmt.Sprintf("not found (no deployment labelled %s in namespace %s)", labels.Set(operatorLabels), o.OperatorNamespace)}
	}
	d := deployments.Items[0] // sorted by name by the API server
	v := OperatorVersion{
		Found:         true,
		Deployment:    d.Namespace + "/" + d.Name,
		Replicas:      d.Status.Replicas,
		ReadyReplicas: d.Status.ReadyReplicas,
		Version:       d.Labels[VersionLabel],
	}
	for i, c := range d.Spec.Template.Spec.Containers {
		if i == 0 || c.Name == OperatorContainer {
			v.Image = c.Image
		}
	}
	if v.Version == "" {
		v.Version = imageTag(v.Image)
	}
	return v
}

// imageTag is the tag of an image reference, "unknown" without one (a digest is not a version).
func imageTag(image string) string {
	name := image
	if i := strings.LastIndex(name, "/"); i >= 0 {
		name = name[i+1:]
	}
	name, _, _ = strings.Cut(name, "@")
	if _, tag, ok := strings.Cut(name, ":"); ok && tag != "" {
		return tag
	}
	return "unknown"
}
