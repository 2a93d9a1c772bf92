// Package install is `kubectl trainjob install`: it applies the operator — config/default's CRDs, RBAC,
// webhooks, Deployment and ClusterTrainingRuntimes, embedded in the binary — with server-side apply, waits
// until the Deployment is Available and the webhook answers, and with --uninstall deletes all of it again.
// It never applies anything but the embedded manifests (rewritten for --namespace and --image).
package install

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/restmapper"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/dryrun"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/version"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/printers"
)

// FieldManager owns every field install applies.
const FieldManager = "kubectl-trainjob"

const example = `  # Install the operator into kubectl-trainjob-system and wait until it serves its webhook
  kubectl trainjob install

  # Into another namespace, with an image from your registry
  kubectl trainjob install -n training-system --image registry.example.com/kubectl-trainjob:v0.1.0

  # Print what would be applied, or check it against the cluster without changing anything
  kubectl trainjob install -o yaml
  kubectl trainjob install --dry-run=server

  # Remove the operator and its CRDs: it lists the TrainJobs and runtimes that would go with them and asks first
  kubectl trainjob install --uninstall

  # Remove the operator, keep the CRDs, every TrainJob and every runtime a user created or changed
  kubectl trainjob install --uninstall --keep-crds`

// Options are the flags of install.
type Options struct {
	Image          string
	DryRun         string
	Output         string
	Uninstall      bool
	Yes            bool
	KeepCRDs       bool
	Wait           bool
	WaitForWebhook bool
	Timeout        time.Duration
	ForceConflicts bool

	// Namespace is the operator's: -n, else DefaultNamespace (never the kubeconfig's current namespace).
	Namespace string
	// Objects are the manifests to apply, rewritten for Namespace and Image.
	Objects []*unstructured.Unstructured
	// StdinIsTerminal tells whether --uninstall can ask; tests set it.
	StdinIsTerminal func() bool
	// PollInterval is how often the waits look; tests may shorten it.
	PollInterval time.Duration

	Streams cmdutil.Streams
	factory cmdutil.Factory
	clients *clients
}

var _ cmdutil.Command = (*Options)(nil)

// NewCmdInstall is `kubectl trainjob install`.
func NewCmdInstall(f cmdutil.Factory, streams cmdutil.Streams) *cobra.Command {
	return NewCmdInstallWithOptions(f, NewOptions(streams))
}

// NewOptions returns the defaults: wait up to five minutes for the Deployment and the webhook.
func NewOptions(streams cmdutil.Streams) *Options {
	return &Options{
		DryRun:          "none",
		Wait:            true,
		WaitForWebhook:  true,
		Timeout:         5 * time.Minute,
		ForceConflicts:  true,
		PollInterval:    time.Second,
		StdinIsTerminal: func() bool { return printers.IsTerminal(streams.In) },
		Streams:         streams,
	}
}

// NewCmdInstallWithOptions is `kubectl trainjob install` with preset options (tests).
func NewCmdInstallWithOptions(f cmdutil.Factory, o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "install [-n NAMESPACE] [--image IMAGE] [--dry-run=client|server] [-o yaml|json] | --uninstall",
		Short: "Install the operator (CRDs, webhooks, Deployment, runtimes) into the cluster, or remove it",
		Long: `Install applies the operator this binary runs as — its CRDs, RBAC, webhook configurations,
Deployment and the shipped ClusterTrainingRuntimes, embedded in the binary (config/default) —
with server-side apply (field manager kubectl-trainjob), then waits until the Deployment is
Available and the webhook answers. Progress goes to standard error. Running it again upgrades.

-n/--namespace moves the operator out of kubectl-trainjob-system (the kubeconfig's current
namespace is not used); the CRDs, ClusterRole and webhook configurations are cluster-wide, so a
cluster has one operator. A namespace that exists already is used as it is and never deleted.
--image replaces the operator's image (default: the release of this binary's version).

--uninstall deletes every object install applies, in reverse order, CRDs last. Deleting the
CRDs deletes every TrainJob, TrainingRuntime and ClusterTrainingRuntime in the cluster (and the
JobSets and pods of the TrainJobs): when there are any besides the shipped runtimes as install
applied them, it lists them all and asks first, or needs --yes. --keep-crds keeps the CRDs, all
TrainJobs and TrainingRuntimes, and each shipped ClusterTrainingRuntime changed in the cluster
(another field manager than kubectl-trainjob owns a field of it).

--wait-for-webhook=false skips the webhook check, for clusters whose API server cannot reach
pods (simulated clusters); --wait=false returns once everything is applied.`,
		Example: example,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.RunCommand(f, o, cmd, args)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.Image, "image", o.Image, "Operator image (default: "+OperatorImageRepository+":<this binary's version>, or :latest for a development build)")
	fl.StringVar(&o.DryRun, "dry-run", o.DryRun, `"none", "client" (print what would be applied or deleted) or "server" (send it with dryRun=All)`)
	fl.Lookup("dry-run").NoOptDefVal = "client"
	fl.StringVarP(&o.Output, "output", "o", o.Output, "Print the manifests as yaml or json instead of applying them (with --dry-run=server: what the server returns)")
	fl.BoolVar(&o.Uninstall, "uninstall", o.Uninstall, "Delete everything install applies")
	fl.BoolVarP(&o.Yes, "yes", "y", o.Yes, "With --uninstall: delete the CRDs without asking even when TrainJobs or runtimes would go with them")
	fl.BoolVar(&o.KeepCRDs, "keep-crds", o.KeepCRDs, "With --uninstall: keep the CRDs, every TrainJob and TrainingRuntime, and the ClusterTrainingRuntimes changed in the cluster")
	fl.BoolVar(&o.Wait, "wait", o.Wait, "Wait until the operator is ready (with --uninstall: until everything is gone)")
	fl.BoolVar(&o.WaitForWebhook, "wait-for-webhook", o.WaitForWebhook, "With --wait: also wait until the webhook admits a dry-run TrainJob")
	fl.DurationVar(&o.Timeout, "timeout", o.Timeout, "How long to wait (exit code 3 when it runs out)")
	fl.BoolVar(&o.ForceConflicts, "force-conflicts", o.ForceConflicts, "Take over fields another field manager set (server-side apply --force-conflicts)")
	_ = cmd.RegisterFlagCompletionFunc("dry-run", cobra.FixedCompletions([]string{"none", "client", "server"}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"yaml", "json"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// Complete resolves the namespace and image and rewrites the manifests for them.
func (o *Options) Complete(f cmdutil.Factory, _ *cobra.Command, _ []string) error {
	o.factory = f
	o.Namespace = DefaultNamespace
	if ns := o.factory.NamespaceFlag(); ns != "" {
		o.Namespace = ns
	}
	if errs := validation.IsDNS1123Label(o.Namespace); len(errs) > 0 {
		return fmt.Errorf("invalid namespace %q: %s", o.Namespace, strings.Join(errs, "; "))
	}
	objs, err := Manifests()
	if err != nil {
		return fmt.Errorf("read the embedded manifests: %w", err)
	}
	if err := SetNamespace(objs, DefaultNamespace, o.Namespace); err != nil {
		return err
	}
	if o.Image == "" {
		o.Image = DefaultImage(objs, version.Version)
	}
	if err := SetImage(objs, o.Image); err != nil {
		return err
	}
	o.Objects = objs
	return nil
}

// Validate checks the flags.
func (o *Options) Validate() error {
	switch o.DryRun {
	case "none", "client", "server":
	default:
		return fmt.Errorf(`invalid --dry-run %q: use "none", "client" or "server"`, o.DryRun)
	}
	switch o.Output {
	case "", "yaml", "json":
	default:
		return fmt.Errorf("invalid --output %q: use yaml or json", o.Output)
	}
	if o.Uninstall && o.Output != "" {
		return errors.New("--output prints what install applies; it does not go with --uninstall")
	}
	if !o.Uninstall && (o.Yes || o.KeepCRDs) {
		return errors.New("--yes and --keep-crds go with --uninstall")
	}
	if o.Timeout <= 0 {
		return fmt.Errorf("invalid --timeout %s: it must be positive", o.Timeout)
	}
	return nil
}

// Run installs or uninstalls.
func (o *Options) Run(ctx context.Context) error {
	if o.Output != "" && o.DryRun != "server" {
		return o.print(objectMaps(o.Objects))
	}
	if o.DryRun != "client" {
		c, err := newClients(o.factory)
		if err != nil {
			return err
		}
		o.clients = c
	}
	if o.Uninstall {
		return o.uninstall(ctx)
	}
	return o.install(ctx)
}

func (o *Options) print(objs []map[string]any) error {
	if o.Output == "json" {
		return dryrun.WriteJSON(o.Streams.Out, objs)
	}
	return dryrun.WriteYAML(o.Streams.Out, objs)
}

func objectMaps(objs []*unstructured.Unstructured) []map[string]any {
	out := make([]map[string]any, len(objs))
	for i, u := range objs {
		out[i] = u.Object
	}
	return out
}

// clients are what install talks to the cluster with.
type clients struct {
	dynamic   dynamic.Interface
	metadata  metadata.Interface
	clientset kubernetes.Interface
	mapper    *restmapper.DeferredDiscoveryRESTMapper
}

func newClients(f cmdutil.Factory) (*clients, error) {
	cfg, err := f.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &clients{dynamic: dyn, metadata: meta, clientset: cs, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))}, nil
}

// ref is how kubectl names an object in what it prints: kind.group/name.
func ref(u *unstructured.Unstructured) string {
	gvk := u.GroupVersionKind()
	kind := strings.ToLower(gvk.Kind)
	if gvk.Group != "" {
		kind += "." + gvk.Group
	}
	return kind + "/" + u.GetName()
}

// dryRunSuffix is what kubectl appends to a line of a dry run.
func (o *Options) dryRunSuffix() string {
	switch o.DryRun {
	case "client":
		return " (dry run)"
	case "server":
		return " (server dry run)"
	}
	return ""
}

func (o *Options) progress(format string, args ...any) {
	fmt.Fprintf(o.Streams.ErrOut, format+"\n", args...)
}
