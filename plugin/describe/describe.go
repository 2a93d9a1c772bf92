// Package describe is `kubectl trainjob describe-pipeline`: the four phases
// of the Pipeline Framework, the plugins at each extension point in the
// order they run for one TrainJob and runtime, and what each contributed —
// computed by the same framework code the operator runs.
package describe

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/dryrun"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/stage"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
)

const long = `Show how the operator builds a TrainJob: the phases of its pipeline, each extension point, the
plugins that run there in the order they run, and what each changed (env vars, volumes, mounts, counts,
the objects built). It runs the operator's own pipeline, for its configuration (--config,
--feature-gates).

It works offline, from a TrainJob and its runtime in files (-f, --runtime-file); for a runtime of the
cluster and a TrainJob that changes nothing of it (--runtime); and for a TrainJob of the cluster (NAME),
built from the operator's snapshot of its runtime, with where the TrainJob is now.`

const example = `  # How the operator builds a live TrainJob, and where it is now
  kubectl trainjob describe-pipeline my-job

  # What a runtime's pipeline does, for a default TrainJob
  kubectl trainjob describe-pipeline --runtime torch-distributed

  # Offline, from files
  kubectl trainjob describe-pipeline -f trainjob.yaml --runtime-file runtime.yaml`

// Options are the flags of describe-pipeline.
type Options struct {
	Name         string
	Runtime      string
	RuntimeKind  string
	Files        []string
	RuntimeFiles []string
	Output       string
	// Pipeline is the binary's pipeline, with the operator's configuration of --config and --feature-gates.
	Pipeline cmdutil.Pipeline

	Streams   cmdutil.Streams
	namespace string
	client    client.Client
	decoder   runtime.Decoder
}

var _ cmdutil.Command = (*Options)(nil)

// NewCmd builds `describe-pipeline`, showing the pipeline of the in-tree
// plugins and outOfTree (app.WithPlugin) as the operator of the same binary
// runs it.
func NewCmd(outOfTree pipeline.Registry) func(cmdutil.Factory, cmdutil.Streams) *cobra.Command {
	return func(f cmdutil.Factory, streams cmdutil.Streams) *cobra.Command {
		return newCmd(f, &Options{Streams: streams, Pipeline: cmdutil.Pipeline{OutOfTree: outOfTree}})
	}
}

func newCmd(f cmdutil.Factory, o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "describe-pipeline [NAME | --runtime RUNTIME | -f FILE]",
		Aliases: []string{"pipeline"},
		Short:   "Show the phases, extension points and plugins that build a TrainJob, and what each contributed",
		Long:    long,
		Example: example,
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.RunCommand(f, o, cmd, args)
		},
	}
	cmd.Flags().StringVar(&o.Runtime, "runtime", "", "Describe the pipeline of this runtime (in the cluster) for a TrainJob with no overrides")
	cmd.Flags().StringVar(&o.RuntimeKind, "runtime-kind", trainer.ClusterTrainingRuntimeKind, "Kind of --runtime: ClusterTrainingRuntime or TrainingRuntime")
	cmd.Flags().StringSliceVarP(&o.Files, "filename", "f", nil, "TrainJob file (offline); - reads standard input")
	cmd.Flags().StringSliceVar(&o.RuntimeFiles, "runtime-file", nil, "Runtime file(s) for -f (offline)")
	cmd.Flags().StringVarP(&o.Output, "output", "o", "", "Output format: empty for text, json or yaml")
	o.Pipeline.AddFlags(cmd.Flags())
	return cmd
}

// Complete resolves the namespace and, for a live TrainJob or runtime, the client.
func (o *Options) Complete(f cmdutil.Factory, _ *cobra.Command, args []string) error {
	if len(args) == 1 {
		o.Name = args[0]
	}
	ns, _, err := f.Namespace()
	if err != nil || ns == "" {
		ns = "default"
	}
	o.namespace = ns
	if len(o.Files) == 0 {
		c, err := f.Client()
		if err != nil {
			return err
		}
		o.client = c
		o.decoder = serializer.NewCodecFactory(f.Scheme()).UniversalDeserializer()
	}
	return nil
}

// Validate checks that exactly one source is given.
func (o *Options) Validate() error {
	sources := 0
	for _, set := range []bool{o.Name != "", o.Runtime != "", len(o.Files) > 0} {
		if set {
			sources++
		}
	}
	if sources != 1 {
		return fmt.Errorf("give exactly one of: a TrainJob NAME, --runtime RUNTIME, or -f FILE (with --runtime-file)")
	}
	if o.RuntimeKind != trainer.ClusterTrainingRuntimeKind && o.RuntimeKind != trainer.TrainingRuntimeKind {
		return fmt.Errorf("invalid --runtime-kind %q: use ClusterTrainingRuntime or TrainingRuntime", o.RuntimeKind)
	}
	switch o.Output {
	case "", "json", "yaml":
		return nil
	}
	return fmt.Errorf("invalid --output %q: use json or yaml, or leave it empty for text", o.Output)
}

// Run describes the pipeline.
func (o *Options) Run(ctx context.Context) error {
	d, err := o.describe(ctx)
	if err != nil {
		return err
	}
	switch o.Output {
	case "json":
		enc := json.NewEncoder(o.Streams.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(d)
	case "yaml":
		data, err := yaml.Marshal(d)
		if err != nil {
			return err
		}
		_, err = o.Streams.Out.Write(data)
		return err
	}
	return d.WriteText(o.Streams.Out)
}

// describe describes the pipeline of the TrainJob NAME, of --runtime or of the files.
func (o *Options) describe(ctx context.Context) (*Description, error) {
	if o.Name != "" {
		return Live(ctx, o.client, o.decoder, &o.Pipeline, o.namespace, o.Name)
	}
	in, err := o.inputs(ctx)
	if err != nil {
		return nil, err
	}
	// Objects of other kinds in the files are the cluster the plugins see; for a live runtime, the plugins see
	// nothing else, as render does.
	fw, err := o.Pipeline.Framework(ctx, in)
	if err != nil {
		return nil, err
	}
	return Describe(ctx, fw, in.TrainJobs[0], in.Runtimes)
}

// Live describes the pipeline of TrainJob namespace/name of the cluster, read with c, as p builds it from the
// runtime it runs from (its snapshot, else the runtime it references), and where it is now. The dashboard
// shows it too.
func Live(ctx context.Context, c client.Reader, decoder runtime.Decoder, p *cmdutil.Pipeline, namespace, name string) (*Description, error) {
	tj, err := cmdutil.GetTrainJob(ctx, c, namespace, name)
	if err != nil {
		return nil, err
	}
	rt, err := cmdutil.LiveRuntime(ctx, c, decoder, tj)
	if err != nil {
		return nil, err
	}
	in := &dryrun.Inputs{TrainJobs: []*trainer.TrainJob{tj}, Runtimes: []*pipeline.Runtime{rt}}
	fw, err := p.Framework(ctx, in)
	if err != nil {
		return nil, err
	}
	d, err := Describe(ctx, fw, tj, in.Runtimes)
	if err != nil {
		return nil, err
	}
	d.Now = &Now{Stage: stage.Of(tj)}
	for _, c := range tj.Status.Conditions {
		if c.Status == "True" {
			d.Now.Conditions = append(d.Now.Conditions, c.Type+" ("+c.Reason+")")
		}
	}
	return d, nil
}

// inputs returns the TrainJob to describe (the only one of TrainJobs) of the files or of --runtime, the
// runtimes to resolve it, and, from files, the objects of other kinds.
func (o *Options) inputs(ctx context.Context) (*dryrun.Inputs, error) {
	if len(o.Files) > 0 {
		return dryrun.LoadOneTrainJob(ctx, o.namespace, o.Streams.In, o.Files, o.RuntimeFiles...)
	}
	tj := &trainer.TrainJob{}
	tj.Name, tj.Namespace = "example", o.namespace
	tj.Spec.RuntimeRef = trainer.RuntimeRef{Name: o.Runtime, APIGroup: ptr.To(trainer.GroupVersion.Group), Kind: ptr.To(o.RuntimeKind)}
	rt, err := cmdutil.LiveRuntime(ctx, o.client, o.decoder, tj)
	if err != nil {
		return nil, err
	}
	return &dryrun.Inputs{TrainJobs: []*trainer.TrainJob{tj}, Runtimes: []*pipeline.Runtime{rt}}, nil
}

// Now is where a live TrainJob is.
type Now struct {
	Stage      stage.Stage `json:"stage"`
	Conditions []string    `json:"conditions,omitempty"`
}
