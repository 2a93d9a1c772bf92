// Package create is `kubectl trainjob create`: a TrainJob from flags, from a file or copied from another
// (--from), checked against the cluster (its runtime must exist) before anything is created, optionally
// waited for; `kubectl trainjob rerun`, which is create --from with a name chosen for the copy; and
// `kubectl trainjob optimize`, an OptimizationJob whose trials' template is what create's flags describe. They
// share one package because rerun and optimize are create with more arguments, not commands that need a
// helper of create's.
package create

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/scheme"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/completion"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/kueue"
)

const createLong = `Create a TrainJob from flags or from a file.

From flags, NAME and --runtime are required. --runtime NAME is a ClusterTrainingRuntime
(the API's default kind); trainingruntime/NAME is a TrainingRuntime of the namespace.
Arguments after -- become the trainer's command. --gpus-per-node and --resources-per-node
set requests and limits alike, as the Kubeflow SDK does.

With --from TEMPLATE the TrainJob is a copy of the TrainJob TEMPLATE of the namespace as its
creator wrote it, with its labels (see kubectl trainjob rerun --help); the flags given change the
copy.

--gpu-type puts the trainer's pods on nodes of one GPU model: a nodeSelector of the label
nvidia.com/gpu.product (NVIDIA's GPU feature discovery) on the trainer's replicated job,
through a runtimePatch of spec.runtimePatches (Kubeflow Trainer v2.3 has no
podTemplateOverrides). Its values are completed from the cluster's nodes.

--topology LEVEL asks Kueue's topology-aware scheduling to run all the trainer's pods within
one domain of LEVEL (one rack, one block), and waits in the queue until one has room;
LEVEL:preferred lets Kueue go a level up, and spread the pods at last, rather than wait.
LEVEL is a level of the cluster's Kueue Topology: its node label, or the label's last word
(rack for cloud.provider.com/topology-rack). It needs --queue; it is set as Kueue reads it
for a TrainJob: the annotation kueue.x-k8s.io/podset-required-topology (or
podset-preferred-topology) on the trainer's pod template, through the same runtimePatch.

--gpu-claim[=DEVICECLASS] claims the --gpus-per-node GPUs through Dynamic Resource
Allocation (KEP-2782) instead of the nvidia.com/gpu extended resource: create makes a
ResourceClaimTemplate NAME-gpu of that many devices of DEVICECLASS (default gpu.nvidia.com,
NVIDIA's DRA driver), from which each trainer pod gets a claim of its own, names it in the
runtimePatch's resourceClaims and tolerates the GPU nodes' taint nvidia.com/gpu. The template is
created first and belongs to the TrainJob: it is deleted with it.

The runtime must exist: nothing is created otherwise. Before sending, create checks
whether the TrainJob's pods fit the cluster's nodes (as kubectl trainjob fit does): when
they fit nowhere, even on nodes emptied of other pods, it warns and sends the TrainJob
anyway, as the cluster may grow. --dry-run=server prints what fits now after the API
server accepted the TrainJob.

With --wait the command returns when the TrainJob ends: exit 0 when it is Complete, 2 when
it Failed, 3 when --timeout passes first. --follow waits too and prints a line at every
change of stage. A TrainJob that fits nowhere is waited for all the same (nodes may join):
the warning says so first.`

const createExample = `  # Four nodes of eight GPUs on the torch-distributed runtime
  kubectl trainjob create llama --runtime torch-distributed --nodes 4 --gpus-per-node 8 \
    --image pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime -- torchrun train.py --epochs 3

  # On the cluster's A100 nodes only
  kubectl trainjob create llama --runtime torch-distributed --nodes 2 --gpus-per-node 8 \
    --gpu-type NVIDIA-A100-SXM4-80GB -- torchrun train.py

  # The same GPUs claimed through DRA: a ResourceClaimTemplate of 8 devices of gpu.nvidia.com
  kubectl trainjob create llama --runtime torch-distributed --nodes 2 --gpus-per-node 8 --gpu-claim -- torchrun train.py

  # Ask the API server, create nothing, and say whether it fits now
  kubectl trainjob create llama --runtime torch-distributed --nodes 4 --gpus-per-node 8 --dry-run=server

  # Queued in Kueue, all the trainer's pods in one rack (it waits until a rack has room)
  kubectl trainjob create llama --runtime torch-distributed --nodes 2 --gpus-per-node 8 \
    --queue gpu-tas --topology rack -- torchrun train.py

  # A namespaced TrainingRuntime, queued in Kueue, suspended
  kubectl trainjob create exp-7 --runtime trainingruntime/my-torch --queue team-a --suspend

  # From a file, then follow the stages until it ends
  kubectl trainjob create -f trainjob.yaml --follow

  # Print the object without creating it
  kubectl trainjob create llama --runtime torch-distributed --dry-run=client -o yaml

  # A copy of the TrainJob llama on eight nodes
  kubectl trainjob create llama-8 --from llama --nodes 8`

// Dry-run strategies, as kubectl spells them.
const (
	dryRunNone   = "none"
	dryRunClient = "client"
	dryRunServer = "server"
)

// CreateOptions are the options of `kubectl trainjob create`.
type CreateOptions struct {
	Filename string
	DryRun   string
	Wait     bool
	Follow   bool
	Timeout  time.Duration

	PrintFlags *genericclioptions.PrintFlags
	// Clock gives "now" to the summaries --wait and --follow read.
	Clock clock.PassiveClock
	// Terminal tells whether Out is a terminal, where --wait and --follow keep a live line; nil detects it.
	Terminal *bool
	// Pipeline is the binary's pipeline: the fit check builds the TrainJob's pods as the operator of the same
	// binary does.
	Pipeline cmdutil.Pipeline

	// From is --from: the TrainJob of the namespace the new one is a copy of.
	From string
	// from is the TrainJob From names, once read.
	from *trainer.TrainJob

	spec spec
	// rerun marks the options of rerun: the copy is named for the user unless NEW is given, and says what it
	// is a rerun of. sets are its --set FLAG=VALUE.
	rerun          bool
	sets           []string
	namespaceGiven bool
	color          bool
	printer        printers.ResourcePrinter
	client         client.WithWatch
	kueue          *kueue.Client
	stdin          io.Reader

	cmdutil.Streams
}

var _ cmdutil.Command = (*CreateOptions)(nil)

// NewCreateOptions returns the defaults of the flags.
func NewCreateOptions(streams cmdutil.Streams) *CreateOptions {
	return &CreateOptions{
		Streams:    streams,
		DryRun:     dryRunNone,
		PrintFlags: genericclioptions.NewPrintFlags("created"),
		Clock:      clock.RealClock{},
	}
}

// NewCmdCreate is `kubectl trainjob create` with the in-tree pipeline plugins.
func NewCmdCreate(f cmdutil.Factory, streams cmdutil.Streams) *cobra.Command {
	return NewCmdCreateWithOptions(f, NewCreateOptions(streams))
}

// NewCmd is `kubectl trainjob create` of a binary whose pipeline adds outOfTree (app.WithPlugin).
func NewCmd(outOfTree pipeline.Registry) func(cmdutil.Factory, cmdutil.Streams) *cobra.Command {
	return func(f cmdutil.Factory, streams cmdutil.Streams) *cobra.Command {
		o := NewCreateOptions(streams)
		o.Pipeline.OutOfTree = outOfTree
		return NewCmdCreateWithOptions(f, o)
	}
}

// NewCmdCreateWithOptions is `kubectl trainjob create` with preset options (a pinned clock in tests).
func NewCmdCreateWithOptions(f cmdutil.Factory, o *CreateOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:                   "create NAME --runtime RUNTIME [flags] [-- COMMAND [ARG...]] | create -f FILE | create NAME --from TEMPLATE [flags]",
		DisableFlagsInUseLine: true,
		Aliases:               []string{"submit"},
		Short:                 "Create a TrainJob from flags, from a file or as a copy of another",
		Long:                  createLong,
		Example:               createExample,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.RunCommand(f, o, cmd, args)
		},
	}
	o.addObjectFlags(f, cmd, trainer.TrainJobKind)
	cmd.Flags().StringVar(&o.From, "from", "", "Copy the TrainJob TEMPLATE of the namespace as its creator wrote it (see rerun); the other flags change the copy")
	o.addRunFlags(cmd)
	_ = cmd.RegisterFlagCompletionFunc("from", completion.TrainJobNames(f))
	return cmd
}

// addObjectFlags adds, with their completions, the flags of the object a command makes from flags or from -f
// FILE (one of kind), which create and optimize share: the TrainJob's (of optimize, the trials') and the file.
func (o *CreateOptions) addObjectFlags(f cmdutil.Factory, cmd *cobra.Command, kind string) {
	fl := cmd.Flags()
	o.spec.addFlags(fl)
	fl.StringVarP(&o.Filename, "filename", "f", "", "File with one "+kind+", or - for stdin")
	_ = cmd.RegisterFlagCompletionFunc("runtime", completion.RuntimeNames(f))
	_ = cmd.RegisterFlagCompletionFunc("gpu-type", completion.GPUProducts(f))
	_ = cmd.RegisterFlagCompletionFunc("topology", cobra.NoFileCompletions)
	_ = cmd.RegisterFlagCompletionFunc("gpu-claim", cobra.NoFileCompletions)
	_ = cmd.MarkFlagFilename("filename", "yaml", "yml", "json")
}

// addRunFlags adds the flags of how the TrainJob is sent and followed, which create and rerun share.
func (o *CreateOptions) addRunFlags(cmd *cobra.Command) {
	o.addSendFlags(cmd)
	fl := cmd.Flags()
	fl.BoolVar(&o.Wait, "wait", false, "Wait until the TrainJob is Complete (exit 0) or Failed (exit 2); on a terminal a live line shows the stage or the trainer's progress bar, elsewhere a line per progress report")
	fl.BoolVar(&o.Follow, "follow", false, "Wait, printing a line at every transition (stage, condition, Event, progress report, first failure)")
	fl.DurationVar(&o.Timeout, "timeout", 0, "With --wait or --follow: give up after this long (exit 3); 0 waits for ever")
}

// addSendFlags adds the flags of how the object is sent and printed, which create, rerun and optimize share.
func (o *CreateOptions) addSendFlags(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&o.DryRun, "dry-run", o.DryRun, `"none", "client" (print the object, send nothing) or "server" (the API server checks it, nothing is stored)`)
	fl.Lookup("dry-run").NoOptDefVal = dryRunClient
	o.PrintFlags.AddFlags(cmd)
	_ = cmd.RegisterFlagCompletionFunc("dry-run", cobra.FixedCompletions([]string{dryRunNone, dryRunClient, dryRunServer}, cobra.ShellCompDirectiveNoFileComp))
}

// Complete resolves the namespace, the client, NAME and the trainer command after --; of rerun, NAME, NEW and
// --set (completeRerun).
func (o *CreateOptions) Complete(f cmdutil.Factory, cmd *cobra.Command, args []string) error {
	if o.rerun {
		return o.completeRerun(f, cmd, args)
	}
	args, err := o.completeCommand(cmd, args)
	if err != nil {
		return err
	}
	switch {
	case len(args) > 1:
		return fmt.Errorf("too many arguments %q: give one NAME (the trainer's command goes after --)", args)
	case len(args) == 1:
		o.spec.name = args[0]
	case o.From != "":
		return fmt.Errorf("give a NAME for the copy of %s, or let rerun choose one: kubectl trainjob rerun %s", o.From, o.From)
	case o.Filename == "":
		return errors.New("give a NAME and --runtime, or -f FILE; see kubectl trainjob create --help")
	}
	o.spec.complete(cmd.Flags())
	if o.Filename != "" {
		if o.From != "" {
			return errors.New("--from cannot be combined with -f: copy a TrainJob of the cluster, or create one from a file")
		}
		if err := o.fileAlone(cmd.Flags()); err != nil {
			return err
		}
	}
	return o.completeRun(f)
}

// completeCommand takes the trainer's command after -- from args, and returns the arguments before it.
func (o *CreateOptions) completeCommand(cmd *cobra.Command, args []string) ([]string, error) {
	if dash := cmd.ArgsLenAtDash(); dash >= 0 {
		o.spec.command, args = args[dash:], args[:dash]
		if len(o.spec.command) == 0 {
			return nil, errors.New("nothing after --: give the trainer's command, e.g. -- torchrun train.py")
		}
	}
	return args, nil
}

// fileAlone refuses, with -f, the flags that say what the object is (create's and more) and a command.
func (o *CreateOptions) fileAlone(fl *pflag.FlagSet, more ...string) error {
	for _, name := range append(specFlagNames(), more...) {
		if fl.Changed(name) {
			return fmt.Errorf("--%s cannot be combined with -f: set it in the file", name)
		}
	}
	if o.spec.command != nil {
		return errors.New("a command after -- cannot be combined with -f: set the trainer's command in the file")
	}
	return nil
}

// completeRun resolves what sending and following the TrainJob need: the namespace, the printer, the
// clients, colour and standard input.
func (o *CreateOptions) completeRun(f cmdutil.Factory) error {
	var err error
	if o.spec.namespace, o.namespaceGiven, err = f.Namespace(); err != nil {
		return err
	}
	o.stdin = o.In
	o.color = f.UseColor(o.Out)
	switch o.DryRun {
	case dryRunClient:
		err = o.PrintFlags.Complete("%s (dry run)")
	case dryRunServer:
		err = o.PrintFlags.Complete("%s (server dry run)")
	}
	if err != nil {
		return err
	}
	if o.printer, err = o.PrintFlags.WithTypeSetter(f.Scheme()).ToPrinter(); err != nil {
		return err
	}
	if o.client, err = f.Client(); err != nil {
		return err
	}
	o.kueue, err = kueue.NewClient(f)
	return err
}

// Validate rejects flags that contradict each other. The TrainJob's own fields are checked when it is built.
func (o *CreateOptions) Validate() error {
	switch o.DryRun {
	case dryRunNone, dryRunClient, dryRunServer:
	default:
		return fmt.Errorf("invalid --dry-run %q: use none, client or server", o.DryRun)
	}
	waits := o.Wait || o.Follow
	if waits && o.DryRun != dryRunNone {
		return errors.New("--wait and --follow need a TrainJob that is created: drop --dry-run")
	}
	if o.Timeout != 0 && !waits {
		return errors.New("--timeout applies to --wait and --follow: add one of them")
	}
	if o.Timeout < 0 {
		return fmt.Errorf("invalid --timeout %s: use a positive duration like 30m", o.Timeout)
	}
	if out := ptr.Deref(o.PrintFlags.OutputFormat, ""); o.Follow && out != "" && out != "name" {
		return fmt.Errorf("--follow prints a line per stage: it cannot be combined with -o %s (use --wait)", out)
	}
	return nil
}

// Run builds the TrainJob, checks its runtime and whether it fits, creates it and waits when asked.
func (o *CreateOptions) Run(ctx context.Context) error {
	tj, err := o.send(ctx)
	if err != nil {
		return err
	}
	if o.Wait || o.Follow {
		return o.wait(ctx, tj.Namespace, tj.Name)
	}
	return nil
}

// send builds the TrainJob, checks its runtime and whether it fits, creates it and prints it.
func (o *CreateOptions) send(ctx context.Context) (*trainer.TrainJob, error) {
	tj, err := o.trainJob(ctx)
	if err != nil {
		return nil, err
	}
	rt, err := o.checkRuntime(ctx, tj)
	if err != nil {
		return nil, err
	}
	if o.spec.gpuType != "" {
		selectGPUType(tj, rt, o.spec.gpuType)
	}
	if o.spec.topology != "" {
		if err := o.placeByTopology(ctx, tj, rt); err != nil {
			return nil, err
		}
	}
	var tmpl *resourcev1.ResourceClaimTemplate
	if o.spec.gpuClaim != "" {
		if tmpl, err = o.claimGPUs(ctx, tj, rt, o.spec.gpuClaim, o.spec.claimedGPUs); err != nil {
			return nil, err
		}
	} else if o.from != nil {
		if tmpl, err = o.copyClaimTemplate(ctx, tj); err != nil {
			return nil, err
		}
	}
	if o.DryRun == dryRunNone {
		o.warnIfNowhere(ctx, tj, rt, tmpl)
	}
	if err := o.create(ctx, tj, tmpl); err != nil {
		return nil, err
	}
	if tmpl != nil {
		if err := o.printer.PrintObj(tmpl, o.Out); err != nil {
			return nil, err
		}
	}
	if err := o.printer.PrintObj(tj, o.Out); err != nil {
		return nil, err
	}
	if o.DryRun == dryRunServer {
		return tj, o.printFit(ctx, tj, rt, tmpl)
	}
	return tj, nil
}

// create sends the TrainJob tj, after its ResourceClaimTemplate tmpl when it has one (nil: none), which it
// then owns; nothing with --dry-run=client. A TrainJob refused leaves no template behind.
func (o *CreateOptions) create(ctx context.Context, tj *trainer.TrainJob, tmpl *resourcev1.ResourceClaimTemplate) error {
	var opts []client.CreateOption
	switch o.DryRun {
	case dryRunClient:
		return nil
	case dryRunServer:
		opts = append(opts, client.DryRunAll)
	}
	if tmpl != nil {
		if err := o.createClaimTemplate(ctx, tmpl, opts...); err != nil {
			return err
		}
	}
	if err := o.client.Create(ctx, tj, opts...); err != nil {
		if tmpl != nil && o.DryRun == dryRunNone {
			_ = o.client.Delete(ctx, tmpl, client.Preconditions{UID: &tmpl.UID})
		}
		return createError(err, "trainjob", tj.Namespace, tj.Name)
	}
	if tmpl != nil && o.DryRun == dryRunNone {
		o.ownClaimTemplate(ctx, tmpl, tj)
	}
	return nil
}

// trainJob is the TrainJob of the flags, of the file, or the copy of --from changed by the flags.
func (o *CreateOptions) trainJob(ctx context.Context) (*trainer.TrainJob, error) {
	switch {
	case o.From != "":
		return o.copyOf(ctx)
	case o.Filename == "":
		return o.spec.trainJob()
	}
	data, err := o.read()
	if err != nil {
		return nil, err
	}
	return decodeTrainJob(data, o.Filename, o.spec.name, o.spec.namespace, o.namespaceGiven)
}

func (o *CreateOptions) read() ([]byte, error) {
	if o.Filename == "-" {
		return io.ReadAll(o.stdin)
	}
	data, err := os.ReadFile(o.Filename)
	if err != nil {
		return nil, fmt.Errorf("cannot read -f %s: %w", o.Filename, errors.Unwrap(err))
	}
	return data, nil
}

// decodeTrainJob decodes one TrainJob, strictly (a misspelt field is an error), and gives it name and
// namespace as kubectl would.
func decodeTrainJob(data []byte, filename, name, namespace string, namespaceGiven bool) (*trainer.TrainJob, error) {
	tj := &trainer.TrainJob{}
	if err := decodeOne(data, filename, tj, name, namespace, namespaceGiven); err != nil {
		return nil, err
	}
	if tj.Spec.RuntimeRef.Name == "" {
		return nil, fmt.Errorf("the TrainJob in %s has no spec.runtimeRef.name; list runtimes with: kubectl trainjob runtimes", filename)
	}
	return tj, nil
}

// decodeOne decodes the one object of data into obj, strictly (a misspelt field is an error), and gives it
// name and namespace as kubectl would.
func decodeOne(data []byte, filename string, obj client.Object, name, namespace string, namespaceGiven bool) error {
	s := scheme.New()
	gvks, _, err := s.ObjectKinds(obj)
	if err != nil {
		return err
	}
	kind := gvks[0].Kind
	docs := 0
	for doc := range strings.SplitSeq("\n"+string(data), "\n---") {
		if strings.TrimSpace(stripComments(doc)) != "" {
			docs++
		}
	}
	if docs != 1 {
		return fmt.Errorf("%s holds %d objects: give a file with exactly one %s", filename, docs, kind)
	}
	codecs := serializer.NewCodecFactory(s, serializer.EnableStrict)
	decoded, gvk, err := codecs.UniversalDeserializer().Decode(data, nil, obj)
	if err != nil {
		return fmt.Errorf("cannot decode %s: %v", filename, err)
	}
	if decoded != obj {
		return fmt.Errorf("%s holds a %s: give a file with one %s (%s)", filename, gvk.Kind, kind, trainer.GroupVersion)
	}
	if name != "" {
		obj.SetName(name)
	}
	if obj.GetName() == "" && obj.GetGenerateName() == "" {
		return fmt.Errorf("the %s in %s has no metadata.name: set it, or give NAME", kind, filename)
	}
	switch {
	case obj.GetNamespace() == "":
		obj.SetNamespace(namespace)
	case namespaceGiven && obj.GetNamespace() != namespace:
		return fmt.Errorf("the namespace of the %s in %s (%q) does not match --namespace %q: drop one of them", kind, filename, obj.GetNamespace(), namespace)
	}
	return nil
}

func stripComments(doc string) string {
	var b strings.Builder
	for line := range strings.Lines(doc) {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			b.WriteString(line)
		}
	}
	return b.String()
}

// checkRuntime makes sure the TrainJob's runtime exists, and returns it. A user who may not read
// ClusterTrainingRuntimes gets a warning, no runtime, and the TrainJob is created: the operator will say if
// the runtime is missing.
func (o *CreateOptions) checkRuntime(ctx context.Context, tj *trainer.TrainJob) (*pipeline.Runtime, error) {
	ref := tj.Spec.RuntimeRef
	kind := ptr.Deref(ref.Kind, trainer.ClusterTrainingRuntimeKind)
	var rt client.Object
	var err error
	switch kind {
	case trainer.ClusterTrainingRuntimeKind:
		rt = &trainer.ClusterTrainingRuntime{}
		err = o.client.Get(ctx, client.ObjectKey{Name: ref.Name}, rt)
	case trainer.TrainingRuntimeKind:
		rt = &trainer.TrainingRuntime{}
		err = o.client.Get(ctx, client.ObjectKey{Namespace: tj.Namespace, Name: ref.Name}, rt)
	default:
		return nil, fmt.Errorf("unknown runtimeRef.kind %q: use %s or %s", kind, trainer.ClusterTrainingRuntimeKind, trainer.TrainingRuntimeKind)
	}
	switch {
	case err == nil:
		return pipeline.RuntimeOf(rt)
	case apierrors.IsForbidden(err):
		fmt.Fprintf(o.ErrOut, "warning: you may not read %s %q, so whether it exists is not checked\n", strings.ToLower(kind), ref.Name)
		return nil, nil
	case !apierrors.IsNotFound(err):
		return nil, err
	}
	msg := fmt.Sprintf("%s %q not found", strings.ToLower(kind), ref.Name)
	if kind == trainer.TrainingRuntimeKind {
		msg += fmt.Sprintf(" in namespace %q", tj.Namespace)
	} else if o.client.Get(ctx, client.ObjectKey{Namespace: tj.Namespace, Name: ref.Name}, &trainer.TrainingRuntime{}) == nil {
		msg += fmt.Sprintf(" (namespace %q has a trainingruntime of that name: use --runtime %s%s)", tj.Namespace, completion.RuntimeKindPrefix, ref.Name)
	}
	return nil, errors.New(msg + "; list runtimes with: kubectl trainjob runtimes")
}

// createError turns a refused create of the object kind/name into one line.
func createError(err error, kind, namespace, name string) error {
	switch {
	case apierrors.IsAlreadyExists(err):
		target := name
		if kind != "trainjob" {
			target = kind + "/" + name
		}
		return fmt.Errorf("%s %q already exists in namespace %q: choose another name, or delete it with: kubectl trainjob delete %s", kind, name, namespace, target)
	case apierrors.IsInvalid(err), apierrors.IsForbidden(err):
		var status apierrors.APIStatus
		if errors.As(err, &status) {
			return errors.New(status.Status().Message)
		}
	case apierrors.IsNotFound(err):
		return fmt.Errorf("namespace %q not found: create it, or choose another with -n", namespace)
	}
	return err
}
