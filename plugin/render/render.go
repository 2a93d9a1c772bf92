// Package render is `kubectl trainjob render`: every object the operator's
// Build phase would apply for a TrainJob, computed offline, exactly as the
// operator writes it (pipeline.AsApplied: labels and annotations included),
// with the operator's configuration (--config, --feature-gates).
package render

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/dryrun"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/scheme"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
)

const example = `  # The JobSet and everything else the operator would create for a TrainJob
  kubectl trainjob render -f trainjob.yaml --runtime torch-distributed.yaml

  # Both in one file, as JSON, from standard input
  cat job-and-runtime.yaml | kubectl trainjob render -f - -o json

  # Show the generated MPI SSH keys instead of redacting them (new ones each run)
  kubectl trainjob render -f mpi-job.yaml --runtime deepspeed.yaml --show-secrets

  # With the operator's configuration and feature gates; the TrainJobStatus
  # plugin reads the CA from the webhook certificate Secret given with -f
  kubectl trainjob render -f trainjob.yaml -f webhook-cert.yaml --runtime runtime.yaml \
    --config config.yaml --feature-gates TrainJobStatus=true`

// Options are the flags of render.
type Options struct {
	Files        []string
	RuntimeFiles []string
	Output       string
	ShowSecrets  bool
	Namespace    string
	// Pipeline is the binary's pipeline, with the operator's configuration of --config and --feature-gates.
	Pipeline cmdutil.Pipeline

	Streams cmdutil.Streams
}

var _ cmdutil.Command = (*Options)(nil)

// NewCmd builds `render`, running the in-tree plugins and outOfTree
// (app.WithPlugin) as the operator of the same binary does.
func NewCmd(outOfTree pipeline.Registry) func(cmdutil.Factory, cmdutil.Streams) *cobra.Command {
	return func(f cmdutil.Factory, streams cmdutil.Streams) *cobra.Command {
		return newCmd(f, &Options{Streams: streams, Pipeline: cmdutil.Pipeline{OutOfTree: outOfTree}})
	}
}

func newCmd(f cmdutil.Factory, o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "render -f TRAINJOB_FILE [--runtime RUNTIME_FILE]",
		Short: "Print the objects the operator would create for a TrainJob, without a cluster",
		Long: `Render runs the operator's pipeline (admission checks, then the Build phase) on a
TrainJob and its runtime read from files, and prints every object the operator
would apply: the JobSet, PodGroups, ConfigMaps and Secrets, with the labels and
annotations the operator writes. No cluster is used: objects of other kinds in
the files (the webhook certificate Secret, PriorityClasses, ...) are the cluster
the plugins see, and nothing else exists. The pipeline is the operator's for
its configuration (--config, --feature-gates). Files may hold several YAML
documents; TrainJobs and runtimes may share a file. Secret data is redacted
unless --show-secrets is given; the keys the operator generates (MPI's SSH key,
Flux's CURVE certificate) are random and live only in their Secrets, so render
prints new ones at every run unless the Secret is in the files.`,
		Example: example,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.RunCommand(f, o, cmd, args)
		},
	}
	cmd.Flags().StringSliceVarP(&o.Files, "filename", "f", nil, "TrainJob file(s); - reads standard input. Runtimes in these files are used too")
	cmd.Flags().StringSliceVar(&o.RuntimeFiles, "runtime", nil, "TrainingRuntime or ClusterTrainingRuntime file(s)")
	cmd.Flags().StringVarP(&o.Output, "output", "o", "yaml", "Output format: yaml or json")
	cmd.Flags().BoolVar(&o.ShowSecrets, "show-secrets", false, "Print Secret data instead of redacting it")
	o.Pipeline.AddFlags(cmd.Flags())
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"yaml", "json"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// Complete resolves the namespace: --namespace, else the kubeconfig's, else default.
func (o *Options) Complete(f cmdutil.Factory, _ *cobra.Command, _ []string) error {
	o.Namespace = "default"
	if ns := f.NamespaceFlag(); ns != "" {
		o.Namespace = ns
	} else if ns, _, err := f.Namespace(); err == nil && ns != "" {
		o.Namespace = ns
	}
	return nil
}

// Validate checks the flags.
func (o *Options) Validate() error {
	if len(o.Files) == 0 {
		return fmt.Errorf("no TrainJob given: pass -f FILE (or -f - for standard input)")
	}
	if o.Output != "yaml" && o.Output != "json" {
		return fmt.Errorf("invalid --output %q: use yaml or json", o.Output)
	}
	return nil
}

// Run renders every TrainJob of the files.
func (o *Options) Run(ctx context.Context) error {
	schema, err := dryrun.NewSchema()
	if err != nil {
		return err
	}
	loader := &dryrun.Loader{Schema: schema, Namespace: o.Namespace, Stdin: o.Streams.In}
	in := &dryrun.Inputs{}
	if err := loader.Load(ctx, in, append(append([]string{}, o.Files...), o.RuntimeFiles...)...); err != nil {
		return err
	}
	if len(in.TrainJobs) == 0 {
		return fmt.Errorf("no TrainJob in %s: pass the TrainJob file with -f", strings.Join(o.Files, ", "))
	}
	fw, err := o.Pipeline.Framework(ctx, in)
	if err != nil {
		return err
	}
	s := scheme.New()
	var all []map[string]any
	for _, tj := range in.TrainJobs {
		res, err := dryrun.Render(ctx, fw, tj, in.Runtimes, pipeline.BuildOptions{})
		if err != nil {
			return fmt.Errorf("%s: TrainJob %q: %w", in.Sources[tj], tj.Name, err)
		}
		for _, w := range res.Warnings {
			fmt.Fprintf(o.Streams.ErrOut, "Warning: %s\n", w)
		}
		applied := make([]client.Object, len(res.Objects))
		for k, obj := range res.Objects {
			if applied[k], _, err = pipeline.AsApplied(s, obj, tj.Name); err != nil {
				return err
			}
		}
		objs, err := dryrun.ToUnstructured(applied, o.ShowSecrets)
		if err != nil {
			return err
		}
		all = append(all, objs...)
	}
	if o.Output == "json" {
		return dryrun.WriteJSON(o.Streams.Out, all)
	}
	return dryrun.WriteYAML(o.Streams.Out, all)
}
