// Package fit is `kubectl trainjob fit`: whether a TrainJob fits the cluster now — how many of its pods, on
// which nodes — and what keeps the rest out, in sentences a user acts on; create uses it to warn of a TrainJob
// that fits nowhere and to end a server dry run.
//
// The pods are built as the operator builds them, by the one pipeline of render and describe-pipeline
// (dryrun.Render), and placed as the scheduler's filters would place them, with the scheduler's own
// predicates (k8s.io/component-helpers: node affinity, taints and tolerations; resource requests as the
// scheduler sums them): cordoned nodes, nodeSelector and required node affinity, NoSchedule and NoExecute
// taints, and what a node can allocate less what the pods already bound there request. Pods that request an
// extended resource (nvidia.com/gpu) get the tolerations the API server's admission plugin
// ExtendedResourceToleration gives them.
//
// Placement is a greedy first fit, not the scheduler: the pods of every replicated job (initializers,
// launcher, trainer) are placed together, as if all ran at once (the trainer in fact starts after the
// initializers have ended), replicated job after replicated job in the JobSet's order, each pod on the first
// node by name that takes it. The scheduler scores nodes and may find room a first fit misses; fit never
// says a TrainJob fits where no node would take a pod. It reads the cluster and writes nothing.
package fit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/dryrun"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/completion"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/kueue"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/printers"
)

const long = `Say whether a TrainJob fits the cluster now: how many of its pods fit, on which
nodes, and what keeps the rest out.

fit builds the TrainJob's pods as the operator would, with the pipeline of render and
describe-pipeline: a TrainJob of the cluster (NAME) from its runtime snapshot, or one
from a file (-f) on the runtime in the files or else the cluster's. It then places them
on the cluster's nodes as the scheduler's filters would: what each node can allocate
less what the pods already there request, its taints against the pods' tolerations,
the pods' nodeSelector and required node affinity, cordoned nodes. Pods that request
nvidia.com/gpu (any extended resource) are taken to tolerate taints of that name, as
the API server's admission plugin ExtendedResourceToleration makes them.

The pods of every replicated job (initializers, launcher, trainer) are placed together,
as if all ran at once, in the JobSet's order, each on the first node by name that takes
it (a greedy first fit; the scheduler may find room it misses).

Exit codes: 0 every pod fits now; 4 not now, but every pod would on the nodes emptied
of other pods (it waits for room); 5 not even then (the cluster must grow or change);
1 error.`

const example = `  # Will the TrainJob of this file fit now, and where?
  kubectl trainjob fit -f trainjob.yaml

  # A TrainJob that waits: what keeps its pods out?
  kubectl trainjob fit llama

  # The same as data
  kubectl trainjob fit llama -o json | jq '.replicatedJobs[].blocked'`

// Options are the flags and resolved inputs of fit.
type Options struct {
	Name   string
	Files  []string
	Output string
	// Pipeline is the binary's pipeline, with the operator's configuration of --config and --feature-gates.
	Pipeline cmdutil.Pipeline

	Streams   cmdutil.Streams
	namespace string
	client    client.Client
	decoder   runtime.Decoder
}

var _ cmdutil.Command = (*Options)(nil)

// NewCmd builds `fit`, building TrainJobs with the in-tree plugins and outOfTree (app.WithPlugin), as the
// operator of the same binary does.
func NewCmd(outOfTree pipeline.Registry) func(cmdutil.Factory, cmdutil.Streams) *cobra.Command {
	return func(f cmdutil.Factory, streams cmdutil.Streams) *cobra.Command {
		o := &Options{Streams: streams, Pipeline: cmdutil.Pipeline{OutOfTree: outOfTree}}
		cmd := &cobra.Command{
			Use:               "fit NAME | fit -f FILE",
			Short:             "Say whether a TrainJob fits the cluster now, where, and what keeps the rest out",
			Long:              long,
			Example:           example,
			Args:              cobra.MaximumNArgs(1),
			ValidArgsFunction: completion.TrainJobNames(f),
			RunE: func(cmd *cobra.Command, args []string) error {
				return cmdutil.RunCommand(f, o, cmd, args)
			},
		}
		cmd.Flags().StringSliceVarP(&o.Files, "filename", "f", nil, "File with the TrainJob (and, if it is not the cluster's, its runtime); - reads standard input")
		cmd.Flags().StringVarP(&o.Output, "output", "o", "", "Output format: json or yaml (the same as a document). Default: the text")
		o.Pipeline.AddFlags(cmd.Flags())
		_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"json", "yaml"}, cobra.ShellCompDirectiveNoFileComp))
		_ = cmd.MarkFlagFilename("filename", "yaml", "yml", "json")
		return cmd
	}
}

// Complete resolves NAME, the namespace and the client.
func (o *Options) Complete(f cmdutil.Factory, _ *cobra.Command, args []string) error {
	if len(args) == 1 {
		o.Name = args[0]
	}
	var err error
	if o.namespace, o.client, err = cmdutil.NamespaceAndClient(f, nil); err != nil {
		return err
	}
	o.decoder = serializer.NewCodecFactory(f.Scheme()).UniversalDeserializer()
	return nil
}

// Validate checks that exactly one TrainJob is named, and the output format.
func (o *Options) Validate() error {
	switch {
	case o.Name == "" && len(o.Files) == 0:
		return errors.New("give a TrainJob: its NAME, or -f FILE; see kubectl trainjob fit --help")
	case o.Name != "" && len(o.Files) > 0:
		return errors.New("give NAME or -f FILE, not both: NAME is a TrainJob of the cluster, -f one to create")
	}
	switch o.Output {
	case "", "json", "yaml":
		return nil
	}
	return fmt.Errorf("invalid --output %q: use json or yaml, or leave it out for the text", o.Output)
}

// Run builds the TrainJob, places its pods, prints what fits and turns the verdict into the exit code.
func (o *Options) Run(ctx context.Context) error {
	in, live, err := o.inputs(ctx)
	if err != nil {
		return err
	}
	tj := in.TrainJobs[0]
	fw, err := o.Pipeline.Framework(ctx, in)
	if err != nil {
		return err
	}
	opts := ReadOptions{Pods: true}
	if live {
		opts.Own = tj
	}
	f, warnings, err := Check(ctx, o.client, fw, tj, in.Runtimes, opts)
	for _, w := range warnings {
		fmt.Fprintf(o.Streams.ErrOut, "Warning: %s\n", w)
	}
	if err != nil {
		return err
	}
	if err := o.print(f); err != nil {
		return err
	}
	switch f.Verdict {
	case NotNow:
		return cmdutil.WithExitCode(cmdutil.ExitNotNow, fmt.Errorf("TrainJob %s does not fit now", tj.Name))
	case Nowhere:
		return cmdutil.WithExitCode(cmdutil.ExitNowhere, fmt.Errorf("TrainJob %s fits nowhere in this cluster", tj.Name))
	}
	return nil
}

// inputs are the TrainJob and its runtime: a TrainJob of the cluster with the runtime it is built from, or
// the one TrainJob of the files with the runtime of the files or else the cluster's. live tells which.
func (o *Options) inputs(ctx context.Context) (in *dryrun.Inputs, live bool, err error) {
	if o.Name != "" {
		tj, err := cmdutil.GetTrainJob(ctx, o.client, o.namespace, o.Name)
		if err != nil {
			return nil, false, err
		}
		rt, err := cmdutil.LiveRuntime(ctx, o.client, o.decoder, tj)
		if err != nil {
			return nil, false, err
		}
		return &dryrun.Inputs{TrainJobs: []*trainer.TrainJob{tj}, Runtimes: []*pipeline.Runtime{rt}}, true, nil
	}
	in, err = fileInputs(ctx, o.client, o.namespace, o.Streams.In, o.Files)
	return in, false, err
}

// fileInputs are the one TrainJob of files (- reads stdin) in namespace unless it names its own, with the
// runtime of the files or else the cluster's.
func fileInputs(ctx context.Context, c client.Reader, namespace string, stdin io.Reader, files []string) (*dryrun.Inputs, error) {
	in, err := dryrun.LoadOneTrainJob(ctx, namespace, stdin, files)
	if err != nil {
		return nil, err
	}
	if _, err := dryrun.FindRuntime(in.TrainJobs[0], in.Runtimes); err != nil {
		rt, err := cmdutil.Runtime(ctx, c, in.TrainJobs[0])
		if err != nil {
			return nil, err
		}
		in.Runtimes = append(in.Runtimes, rt)
	}
	return in, nil
}

// File says whether the one TrainJob of the YAML or JSON of r (and its runtime, if r holds it, else the
// cluster's) fits now, as fit -f does, built with p's pipeline; it returns the pipeline's warnings too.
func File(ctx context.Context, c client.Reader, p *cmdutil.Pipeline, namespace string, r io.Reader) (*Fit, []string, error) {
	in, err := fileInputs(ctx, c, namespace, r, []string{"-"})
	if err != nil {
		return nil, nil, err
	}
	fw, err := p.Framework(ctx, in)
	if err != nil {
		return nil, nil, err
	}
	return Check(ctx, c, fw, in.TrainJobs[0], in.Runtimes, ReadOptions{Pods: true})
}

// Check builds tj with fw on the runtime it references among runtimes, reads what its pods claim through DRA
// and the cluster, and places tj's pods. It returns the pipeline's warnings too.
func Check(ctx context.Context, c client.Reader, fw *pipeline.Framework, tj *trainer.TrainJob, runtimes []*pipeline.Runtime, opts ReadOptions) (*Fit, []string, error) {
	sets, warnings, err := PodSets(ctx, fw, tj, runtimes)
	if err != nil {
		return nil, warnings, err
	}
	cl, err := ReadFor(ctx, c, sets, opts)
	if err != nil {
		return nil, nil, err
	}
	return Compute(tj.Namespace, tj.Name, sets, cl), warnings, nil
}

// ReadFor reads what the pods of sets claim through DRA (ReadClaims, through c) and the cluster (ReadCluster),
// with the nodes' DRA devices of the DeviceClasses the pods claim.
func ReadFor(ctx context.Context, c client.Reader, sets []PodSet, opts ReadOptions) (*Cluster, error) {
	if err := ReadClaims(ctx, c, sets); err != nil {
		return nil, err
	}
	opts.DeviceClasses = deviceClasses(sets)
	return ReadCluster(ctx, c, opts)
}

func (o *Options) print(f *Fit) error {
	if o.Output != "" {
		return printers.Document(o.Streams.Out, o.Output, f)
	}
	return f.WriteText(o.Streams.Out)
}

// WriteText writes the verdict, a table of the replicated jobs, why the pods that do not fit do not, and the
// notes; of a cluster without nodes, the verdict alone.
func (f *Fit) WriteText(w io.Writer) error {
	if _, err := fmt.Fprintf(w, "%s.\n", printers.Escape(f.Message)); err != nil || f.Nodes == 0 {
		return err
	}
	if _, err := fmt.Fprintln(w); err != nil {
		return err
	}
	t := printers.NewTable(w, "", "REPLICATED JOB", "PODS", "FIT NOW", "REQUESTS PER POD", "NODES")
	for _, j := range f.ReplicatedJobs {
		t.Row(j.Name, strconv.Itoa(j.Pods), strconv.Itoa(j.FitNow), RequestsString(j.RequestsPerPod), strings.Join(placedNodes(j.Placements), ", "))
	}
	if err := t.Flush(); err != nil {
		return err
	}
	var b strings.Builder
	if t := f.Topology; t != nil {
		kind := "preferred"
		if t.Required {
			kind = "required"
		}
		fmt.Fprintf(&b, "\nOne %s (%s, %s): %s.\n", kueue.LevelName(t.Level), t.Level, kind, printers.Escape(t.Message))
	}
	f.writeBlocked(&b, "\n")
	for _, n := range f.Notes {
		fmt.Fprintf(&b, "\nNote: %s.\n", printers.Escape(n))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteBlocked writes, for each replicated job whose pods do not all fit, why: on nodes emptied of other pods
// when even there they do not, else now.
func (f *Fit) WriteBlocked(w io.Writer) error {
	var b strings.Builder
	f.writeBlocked(&b, "")
	_, err := io.WriteString(w, b.String())
	return err
}

// writeBlocked writes WriteBlocked's lines, each replicated job's after sep.
func (f *Fit) writeBlocked(b *strings.Builder, sep string) {
	for _, j := range f.ReplicatedJobs {
		if len(j.Blocked) == 0 {
			continue
		}
		if j.FitEmpty < j.Pods {
			n := j.Pods - j.FitEmpty
			fmt.Fprintf(b, "%s%s: %s %s nowhere, even on nodes emptied of other pods:\n", sep, printers.Escape(j.Name), podsOf(j.RequestsPerPod, n), plural(n, "fits", "fit"))
		} else {
			n := j.Pods - j.FitNow
			fmt.Fprintf(b, "%s%s: %s %s not fit now:\n", sep, printers.Escape(j.Name), podsOf(j.RequestsPerPod, n), plural(n, "does", "do"))
		}
		for _, bl := range j.Blocked {
			fmt.Fprintf(b, "  %s\n", printers.Escape(bl.Message))
		}
	}
}
