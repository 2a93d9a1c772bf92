// Package list is `kubectl trainjob list` (aliases ls, get): TrainJobs as kubectl get shows resources, with
// the stage each one is in.
//
// Requests: one LIST of TrainJobs per page, one GET per runtime the table needs, and, only when some listed
// TrainJob is in a Kueue LocalQueue (plugin/kueue) and the table or --stage needs its Workload, one discovery
// request for Kueue's API group and, where it is served, one LIST of the Workloads of the namespace (of every
// namespace with -A). With --optimizations: one LIST of OptimizationJobs per page and, for the table, one LIST of
// the TrainJobs of the namespace (their trials; of every namespace with -A).
package list

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/liggitt/tabwriter"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	cliprinters "k8s.io/cli-runtime/pkg/printers"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/dryrun"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/stage"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/completion"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/kueue"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/printers"
)

const example = `  # TrainJobs of the current namespace, with their stage
  kubectl trainjob list

  # Every namespace, only those training or failed, with more columns
  kubectl trainjob list -A --stage Training,Failed -o wide

  # Watch them change (rows are appended, as kubectl get -w does)
  kubectl trainjob list -w

  # Names only, for scripts
  kubectl trainjob list -l team=nlp -o name

  # Hyperparameter searches (kubectl trainjob optimize), with their trials and best objective
  kubectl trainjob list --optimizations`

// ListOptions are the flags and resolved inputs of `list`.
type ListOptions struct {
	Streams    cmdutil.Streams
	PrintFlags *genericclioptions.PrintFlags

	AllNamespaces bool
	LabelSelector string
	FieldSelector string
	Stages        []string
	NoHeaders     bool
	Watch         bool
	ChunkSize     int64
	Optimizations bool

	// Clock gives "now" for AGE; tests pin it.
	Clock     clock.PassiveClock
	Namespace string
	Client    client.WithWatch
	// Kueue reads the Workloads of TrainJobs in a Kueue LocalQueue; nil reads none.
	Kueue *kueue.Client
	// Pipeline sizes the TrainJobs (GPUS) as the binary's operator builds them.
	Pipeline cmdutil.Pipeline

	stages  map[stage.Stage]bool
	printer cliprinters.ResourcePrinter // nil: the table
	wide    bool
}

var _ cmdutil.Command = (*ListOptions)(nil)

// NewListOptions returns options writing to streams.
func NewListOptions(streams cmdutil.Streams) *ListOptions {
	return &ListOptions{
		Streams:    streams,
		PrintFlags: genericclioptions.NewPrintFlags(""),
		ChunkSize:  500,
		Clock:      clock.RealClock{},
	}
}

// NewCmdList is `kubectl trainjob list` with the in-tree pipeline plugins.
func NewCmdList(f cmdutil.Factory, streams cmdutil.Streams) *cobra.Command {
	return NewCmdListWithOptions(f, NewListOptions(streams))
}

// NewCmd is `kubectl trainjob list` of a binary whose pipeline adds outOfTree (app.WithPlugin).
func NewCmd(outOfTree pipeline.Registry) func(cmdutil.Factory, cmdutil.Streams) *cobra.Command {
	return func(f cmdutil.Factory, streams cmdutil.Streams) *cobra.Command {
		o := NewListOptions(streams)
		o.Pipeline.OutOfTree = outOfTree
		return NewCmdListWithOptions(f, o)
	}
}

// NewCmdListWithOptions is `kubectl trainjob list` with preset options (a pinned clock in tests).
func NewCmdListWithOptions(f cmdutil.Factory, o *ListOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls", "get"},
		Short:   "List TrainJobs with their stage, runtime, nodes, GPUs and progress",
		Long: `List TrainJobs as kubectl get does, with the stage each one is in (Pending, Queued, Suspended,
Initializing, Training, Complete, Failed), its runtime, its number of nodes and of GPUs, and its
progress when the trainer reports one.

A TrainJob in a Kueue LocalQueue (label kueue.x-k8s.io/queue-name) that Kueue holds suspended until
its ClusterQueue admits it is Queued; -o wide shows its LocalQueue (QUEUE) and why Kueue has not
admitted it (REASON, from its Workload). One stopped through its Workload is Suspended.

With --optimizations it lists OptimizationJobs instead (kubectl trainjob optimize), in a table of
their own as kubectl get shows one kind: STATUS (Complete or Failed, else Running once a trial
exists, Pending before), TRIALS created of numTrials, how many are COMPLETE, RUNNING and FAILED,
and BEST, the best trial's last report of the objective metric (the trial status.result names,
else the Complete trial with the best report); -o wide adds the OBJECTIVE, the BEST TRIAL and
the REASON of Created=False or of the terminal condition. Without it, list shows the trials
among the TrainJobs (each trial is one), not the OptimizationJobs.

NODES is spec.trainer.numNodes, else the runtime's mlPolicy.numNodes when the runtime can be read.
GPUS is the number of GPUs the TrainJob's pods ask for, as the operator builds them (render shows
the same pods); when the runtime cannot be read, NODES times the GPUs of spec.trainer.resourcesPerNode.
A dash means unknown.`,
		Example: example,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("list takes no TrainJob names: see one with `kubectl trainjob status %s`, or filter with --field-selector metadata.name=%s", args[0], args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.RunCommand(f, o, cmd, args)
		},
	}
	o.PrintFlags.AddFlags(cmd)
	cmd.Flags().Lookup("output").Usage = "Output format: wide, " + strings.Join(o.PrintFlags.AllowedFormats(), ", ") + ". Default: a table."
	cmd.Flags().BoolVarP(&o.AllNamespaces, "all-namespaces", "A", o.AllNamespaces, "List TrainJobs of every namespace.")
	cmd.Flags().StringVarP(&o.LabelSelector, "selector", "l", o.LabelSelector, "Label selector (e.g. -l team=nlp,tier!=dev).")
	cmd.Flags().StringVar(&o.FieldSelector, "field-selector", o.FieldSelector, "Field selector (TrainJobs support metadata.name and metadata.namespace).")
	cmd.Flags().StringSliceVar(&o.Stages, "stage", o.Stages, "Only TrainJobs in these stages: "+stageNames()+" (repeat or comma-separate).")
	cmd.Flags().BoolVar(&o.NoHeaders, "no-headers", o.NoHeaders, "Print the table without its header.")
	cmd.Flags().BoolVarP(&o.Watch, "watch", "w", o.Watch, "After listing, watch for changes and append a row for each.")
	cmd.Flags().BoolVar(&o.Optimizations, "optimizations", o.Optimizations, "List OptimizationJobs (hyperparameter searches) instead of TrainJobs.")
	cmd.Flags().Int64Var(&o.ChunkSize, "chunk-size", o.ChunkSize, "Read the list in pages of this many TrainJobs (0: all at once).")
	_ = cmd.RegisterFlagCompletionFunc("stage", cobra.FixedCompletions(stage.NamesOf(stage.WithQueued), cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(append([]string{"wide"}, o.PrintFlags.AllowedFormats()...), cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func stageNames() string { return strings.Join(stage.NamesOf(stage.WithQueued), ", ") }

// Complete resolves the namespace, the client and the printer.
func (o *ListOptions) Complete(f cmdutil.Factory, _ *cobra.Command, _ []string) error {
	var err error
	if o.Namespace, o.Client, err = cmdutil.NamespaceAndClient(f, o.Client); err != nil {
		return err
	}
	if o.AllNamespaces {
		o.Namespace = ""
	}
	if o.Kueue == nil {
		if o.Kueue, err = kueue.NewClient(f); err != nil {
			return err
		}
	}
	o.stages = map[stage.Stage]bool{}
	for _, name := range o.Stages {
		st, ok := stage.ParseOf(stage.WithQueued, name)
		if !ok {
			return fmt.Errorf("unknown stage %q: use one of %s", name, stageNames())
		}
		o.stages[st] = true
	}
	switch format := ptr.Deref(o.PrintFlags.OutputFormat, ""); format {
	case "", "wide":
		o.wide = format == "wide"
	default:
		if o.printer, err = o.PrintFlags.WithTypeSetter(f.Scheme()).ToPrinter(); err != nil {
			return fmt.Errorf("%w (or wide)", err)
		}
	}
	return nil
}

// Validate checks the selectors and the page size before anything is read.
func (o *ListOptions) Validate() error {
	if _, err := labels.Parse(o.LabelSelector); err != nil {
		return fmt.Errorf("invalid label selector %q: %w", o.LabelSelector, err)
	}
	if _, err := fields.ParseSelector(o.FieldSelector); err != nil {
		return fmt.Errorf("invalid field selector %q: %w", o.FieldSelector, err)
	}
	if o.ChunkSize < 0 {
		return fmt.Errorf("--chunk-size must be 0 or more, not %d", o.ChunkSize)
	}
	if o.Optimizations && len(o.Stages) > 0 {
		return fmt.Errorf("--stage chooses TrainJobs, and --optimizations lists OptimizationJobs: to see the trials of a stage, drop --optimizations")
	}
	if o.Optimizations && o.Watch {
		return fmt.Errorf("-w watches TrainJobs, and --optimizations lists OptimizationJobs: run list --optimizations again, or watch the trials with list -w")
	}
	return nil
}

// Run lists, prints, and with -w watches.
func (o *ListOptions) Run(ctx context.Context) error {
	if o.Optimizations {
		return o.runOptimizations(ctx)
	}
	fw, err := o.Pipeline.Framework(ctx, &dryrun.Inputs{})
	if err != nil {
		return err
	}
	nodes := newRuntimeDefaults(o.Client, fw)
	items, resourceVersion, err := o.list(ctx, nodes)
	if err != nil {
		return err
	}
	q, err := o.readQueues(ctx, items)
	if err != nil {
		return err
	}
	items = slices.DeleteFunc(items, func(tj trainer.TrainJob) bool { return !o.keep(q, &tj) })
	w := cliprinters.GetNewTabWriter(o.Streams.Out)
	var table cliprinters.ResourcePrinter
	if o.printer == nil {
		table = cliprinters.NewTablePrinter(cliprinters.PrintOptions{NoHeaders: o.NoHeaders, Wide: o.wide, WithNamespace: o.AllNamespaces})
	}
	if len(items) == 0 {
		o.noneFound()
	} else if err := o.print(ctx, w, table, nodes, q, items, true); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if o.wide {
		o.warnSickGPUs(ctx, items)
	}
	if !o.Watch {
		return nil
	}
	return o.watch(ctx, w, table, nodes, q, resourceVersion)
}

// noneFound says so on stderr, as kubectl does.
func (o *ListOptions) noneFound() {
	if o.AllNamespaces {
		fmt.Fprintln(o.Streams.ErrOut, "No resources found")
		return
	}
	fmt.Fprintf(o.Streams.ErrOut, "No resources found in %s namespace.\n", o.Namespace)
}

// keep tells whether tj is in one of the stages asked for.
func (o *ListOptions) keep(q *queues, tj *trainer.TrainJob) bool {
	return len(o.stages) == 0 || o.stages[q.stageOf(tj)]
}

// mayKeep tells whether tj may be in one of the stages asked for, before its Workload is read: a TrainJob
// whose Workload makes it Queued is Suspended without it.
func (o *ListOptions) mayKeep(tj *trainer.TrainJob) bool {
	st := stage.Of(tj)
	return len(o.stages) == 0 || o.stages[st] || o.stages[stage.Queued] && st == stage.Suspended && kueue.Queued(tj)
}

// needsWorkloads tells whether what is printed of items depends on Kueue's Workloads: some TrainJob is in a
// LocalQueue, and the table shows its stage or --stage chooses by it (a Suspended one may be Queued).
func (o *ListOptions) needsWorkloads(items []trainer.TrainJob) bool {
	byStage := o.stages[stage.Queued] || o.stages[stage.Suspended]
	return slices.ContainsFunc(items, func(tj trainer.TrainJob) bool {
		return kueue.Queued(&tj) && (o.printer == nil || byStage && stage.Of(&tj) == stage.Suspended)
	})
}

// readQueues reads the Workloads of the namespace (or of every namespace) in one request, when what is
// printed of items depends on them and Kueue's API is served.
func (o *ListOptions) readQueues(ctx context.Context, items []trainer.TrainJob) (*queues, error) {
	if !o.needsWorkloads(items) {
		return nil, nil
	}
	return readQueues(ctx, o.Kueue, o.Namespace, items)
}

// readQueues reads with kc the Workloads of namespace ("": of every namespace) in one request, when Kueue's
// API is served, for items. Kueue not installed, or Workloads the user may not read, leave the TrainJobs'
// stages as the TrainJobs alone say (nil).
func readQueues(ctx context.Context, kc *kueue.Client, namespace string, items []trainer.TrainJob) (*queues, error) {
	q := newQueues(ctx, kc)
	if q == nil {
		return nil, nil
	}
	wls, err := kc.Workloads(ctx, namespace)
	if apierrors.IsForbidden(err) || apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list Kueue's Workloads: %w", err)
	}
	for i := range items {
		if wl := kueue.Of(&items[i], wls); wl != nil {
			q.workloads[items[i].UID] = wl
		}
	}
	return q, nil
}

// newQueues is an empty queues when Kueue's API is served by kc, else nil.
func newQueues(ctx context.Context, kc *kueue.Client) *queues {
	if kc == nil {
		return nil
	}
	if served, err := kc.Served(ctx); !served || err != nil {
		return nil
	}
	return &queues{kueue: kc, workloads: map[types.UID]*kueue.Workload{}}
}

// queues is what Kueue says of the listed TrainJobs: their Workloads. A nil *queues knows nothing: stages are
// the TrainJobs' own.
type queues struct {
	kueue     *kueue.Client
	workloads map[types.UID]*kueue.Workload
	// positions are where Queued TrainJobs are in their queues (readPositions), by UID.
	positions map[types.UID]string
}

// stageOf is tj's stage, Queued when its Workload says so.
func (q *queues) stageOf(tj *trainer.TrainJob) stage.Stage {
	if q == nil || !kueue.Queued(tj) {
		return stage.Of(tj)
	}
	return stage.InQueue(tj, q.workloads[tj.UID].Stage())
}

// refresh reads the Workload of a TrainJob that changed while watched, when it is in a LocalQueue and
// suspended: Kueue suspends it when it evicts its Workload, or when someone stops it, and only the Workload
// tells which.
func (q *queues) refresh(ctx context.Context, tj *trainer.TrainJob) {
	if q == nil || !kueue.Queued(tj) || stage.Of(tj) != stage.Suspended {
		return
	}
	if wl, err := q.kueue.WorkloadOf(ctx, tj); err == nil {
		q.workloads[tj.UID] = wl
	}
}

func (o *ListOptions) listOptions() []client.ListOption {
	return append([]client.ListOption{client.InNamespace(o.Namespace)}, o.selectors()...)
}

// selectors are --selector and --field-selector as list options.
func (o *ListOptions) selectors() []client.ListOption {
	opts := []client.ListOption{}
	if o.LabelSelector != "" {
		sel, _ := labels.Parse(o.LabelSelector)
		opts = append(opts, client.MatchingLabelsSelector{Selector: sel})
	}
	if o.FieldSelector != "" {
		sel, _ := fields.ParseSelector(o.FieldSelector)
		opts = append(opts, client.MatchingFieldsSelector{Selector: sel})
	}
	return opts
}

// list reads every page and returns the items of the stages asked for and the list's resourceVersion (where a
// watch starts). The table's runtimes are read while the next page is.
func (o *ListOptions) list(ctx context.Context, nodes *runtimeDefaults) ([]trainer.TrainJob, string, error) {
	var items []trainer.TrainJob
	resourceVersion := ""
	err := eachPage(ctx, o, func(l *trainer.TrainJobList) {
		page := slices.DeleteFunc(l.Items, func(tj trainer.TrainJob) bool { return !o.mayKeep(&tj) })
		if o.printer == nil {
			nodes.prefetch(ctx, page)
		}
		items = append(items, page...)
		resourceVersion = l.ResourceVersion
	})
	if err != nil {
		return nil, "", o.describeListError(err)
	}
	return items, resourceVersion, nil
}

// eachPage LISTs what the flags select page by page (--chunk-size items a page) and hands each page, a new list,
// to page as it is read.
func eachPage[T any, L interface {
	*T
	client.ObjectList
}](ctx context.Context, o *ListOptions, page func(L)) error {
	cont := ""
	for {
		opts := o.listOptions()
		if o.ChunkSize > 0 {
			opts = append(opts, client.Limit(o.ChunkSize), client.Continue(cont))
		}
		l := L(new(T))
		if err := o.Client.List(ctx, l, opts...); err != nil {
			return err
		}
		page(l)
		if cont = l.GetContinue(); cont == "" {
			return nil
		}
	}
}

func (o *ListOptions) describeListError(err error) error {
	if o.FieldSelector != "" && apierrors.IsBadRequest(err) {
		return fmt.Errorf("%s (TrainJobs can be selected by metadata.name and metadata.namespace; use --stage for stages, -l for labels)", cmdutil.APIMessage(err))
	}
	if o.AllNamespaces && apierrors.IsForbidden(err) {
		return fmt.Errorf("%s (-A needs the right to list TrainJobs in every namespace: drop -A to list one)", cmdutil.APIMessage(err))
	}
	return cmdutil.DescribeError(err, o.Namespace, "")
}

// print writes items: each through the -o printer, or as rows of one table.
func (o *ListOptions) print(ctx context.Context, w *tabwriter.Writer, table cliprinters.ResourcePrinter, nodes *runtimeDefaults, q *queues, items []trainer.TrainJob, asList bool) error {
	if o.printer != nil {
		objs := make([]client.Object, len(items))
		for i := range items {
			objs[i] = &items[i]
		}
		return o.printObjects(objs, trainer.TrainJobKind, asList)
	}
	return table.PrintObj(o.table(ctx, nodes, q, items), w)
}

// printObjects prints objs, of kind, through the -o printer: as one List when asList (but for -o name), else
// one by one.
func (o *ListOptions) printObjects(objs []client.Object, kind string, asList bool) error {
	for _, obj := range objs {
		obj.GetObjectKind().SetGroupVersionKind(trainer.GroupVersion.WithKind(kind))
	}
	if asList && !o.namePrinter() {
		l := &corev1.List{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "List"}}
		for _, obj := range objs {
			l.Items = append(l.Items, runtime.RawExtension{Object: obj})
		}
		return o.printer.PrintObj(l, o.Streams.Out)
	}
	for _, obj := range objs {
		if err := o.printer.PrintObj(obj, o.Streams.Out); err != nil {
			return err
		}
	}
	return nil
}

func (o *ListOptions) namePrinter() bool { return ptr.Deref(o.PrintFlags.OutputFormat, "") == "name" }

// Columns of the table, in the order of their cells; those of priority 1 are -o wide's. PROGRESS and ETA are
// shown only when some TrainJob reports progress (status.trainerStatus), or with -w, where one may begin to.
var columns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name"},
	{Name: "Stage", Type: "string", Description: "Where the TrainJob is in its pipeline"},
	{Name: "Runtime", Type: "string"},
	{Name: "Nodes", Type: "string"},
	{Name: "GPUs", Type: "string"},
	{Name: "Progress", Type: "string", Description: "The trainer's progressPercentage"},
	{Name: "Age", Type: "string"},
	{Name: "Queue", Type: "string", Priority: 1, Description: "The Kueue LocalQueue (label kueue.x-k8s.io/queue-name)"},
	{Name: "ETA", Type: "string", Priority: 1, Description: "The trainer's estimatedRemainingSeconds"},
	{Name: "Duration", Type: "string", Priority: 1},
	// Last: a Queued TrainJob's reason is a sentence of Kueue's.
	{Name: "Reason", Type: "string", Priority: 1},
}

const (
	progressColumn = 5
	etaColumn      = 8
)

// layout is the order of the columns shown: the indexes of columns. ETA is read with PROGRESS, so the default
// table shows it beside PROGRESS (and `list -w` updates both on every report); -o wide keeps it among its time
// columns (QUEUE, ETA, DURATION), where it has always been and scripts read it.
func (o *ListOptions) layout(progress bool) []int {
	all := []int{0, 1, 2, 3, 4, progressColumn, 6, 7, etaColumn, 9, 10}
	switch {
	case !progress:
		return slices.DeleteFunc(all, func(i int) bool { return i == progressColumn })
	case o.wide:
		return all
	}
	all = slices.DeleteFunc(all, func(i int) bool { return i == etaColumn })
	return slices.Insert(all, progressColumn+1, etaColumn)
}

func (o *ListOptions) table(ctx context.Context, nodes *runtimeDefaults, q *queues, items []trainer.TrainJob) *metav1.Table {
	now := o.Clock.Now()
	progress := o.Watch || slices.ContainsFunc(items, func(tj trainer.TrainJob) bool { return tj.Status.TrainerStatus != nil })
	layout := o.layout(progress)
	t := &metav1.Table{}
	for _, i := range layout {
		def := columns[i]
		if i == etaColumn && progress && !o.wide {
			def.Priority = 0
		}
		t.ColumnDefinitions = append(t.ColumnDefinitions, def)
	}
	for i := range items {
		tj := &items[i]
		n, gpus := nodes.of(ctx, tj)
		st := q.stageOf(tj)
		all := []any{tj.Name, string(st), runtimeOf(tj), n, gpus, progressOf(tj),
			printers.Age(tj.CreationTimestamp, now), queueOf(tj), etaOf(tj), durationOf(tj, now), q.reasonOf(tj, st)}
		cells := make([]any, len(layout))
		for k, c := range layout {
			cells[k] = all[c]
		}
		t.Rows = append(t.Rows, metav1.TableRow{Cells: cells, Object: runtime.RawExtension{Object: tj}})
	}
	return t
}

// runtimeOf names the runtime as create --runtime takes it: a ClusterTrainingRuntime by its name, a
// TrainingRuntime as trainingruntime/NAME.
func runtimeOf(tj *trainer.TrainJob) string {
	if ptr.Deref(tj.Spec.RuntimeRef.Kind, trainer.ClusterTrainingRuntimeKind) == trainer.TrainingRuntimeKind {
		return completion.RuntimeKindPrefix + tj.Spec.RuntimeRef.Name
	}
	return tj.Spec.RuntimeRef.Name
}

func progressOf(tj *trainer.TrainJob) string {
	if ts := tj.Status.TrainerStatus; ts != nil && ts.ProgressPercentage != nil {
		return strconv.Itoa(int(*ts.ProgressPercentage)) + "%"
	}
	return printers.None
}

func etaOf(tj *trainer.TrainJob) string {
	if ts := tj.Status.TrainerStatus; ts != nil && ts.EstimatedRemainingSeconds != nil && !stage.Of(tj).Terminal() {
		return printers.Duration(time.Duration(*ts.EstimatedRemainingSeconds) * time.Second)
	}
	return printers.None
}

// queueOf is the TrainJob's Kueue LocalQueue.
func queueOf(tj *trainer.TrainJob) string {
	if lq := tj.Labels[kueue.QueueLabel]; lq != "" {
		return lq
	}
	return printers.None
}

// reasonOf is why the TrainJob is in stage st: for a Queued one, why Kueue has not admitted its Workload,
// shortened; otherwise the reason of the condition that puts it there, if any.
func (q *queues) reasonOf(tj *trainer.TrainJob, st stage.Stage) string {
	if st == stage.Queued && q != nil {
		if wl := q.workloads[tj.UID]; wl != nil && wl.NotAdmitted() != "" {
			return kueue.Short(wl.NotAdmitted())
		}
		return printers.None
	}
	return reasonOf(tj, st)
}

// reasonOf is the reason of the condition that puts tj in stage st, if any.
func reasonOf(tj *trainer.TrainJob, st stage.Stage) string {
	for _, c := range tj.Status.Conditions {
		if c.Status == metav1.ConditionTrue && c.Type == string(st) {
			return c.Reason
		}
	}
	return printers.None
}

// durationOf is how long the TrainJob has run: from creation until it ended, or until now.
func durationOf(tj *trainer.TrainJob, now time.Time) string {
	end := now
	for _, c := range tj.Status.Conditions {
		if c.Status == metav1.ConditionTrue && (c.Type == trainer.TrainJobComplete || c.Type == trainer.TrainJobFailed) {
			end = c.LastTransitionTime.Time
		}
	}
	return printers.Duration(end.Sub(tj.CreationTimestamp.Time))
}

// watch appends a row (or a document) for every change after resourceVersion, until interrupted.
func (o *ListOptions) watch(ctx context.Context, w *tabwriter.Writer, table cliprinters.ResourcePrinter, nodes *runtimeDefaults, q *queues, resourceVersion string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	changed := make(chan *trainer.TrainJob, 64)
	var stopped error
	done, err := cmdutil.Watch{Object: &trainer.TrainJob{}, Namespace: o.Namespace, Options: o.selectors(), From: resourceVersion}.
		Start(ctx, o.Client, func(e cmdutil.Event) {
			if e.Err != nil {
				stopped = e.Err // read after done is closed
			}
			if tj, ok := e.Object.(*trainer.TrainJob); ok && !e.Deleted {
				select {
				case changed <- tj:
				case <-ctx.Done():
				}
			}
		})
	if err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-done:
			return o.describeListError(stopped)
		case tj := <-changed:
			if q == nil && o.needsWorkloads([]trainer.TrainJob{*tj}) {
				q = newQueues(ctx, o.Kueue)
			}
			q.refresh(ctx, tj)
			if !o.keep(q, tj) {
				continue
			}
			if err := o.print(ctx, w, table, nodes, q, []trainer.TrainJob{*tj}, false); err != nil {
				return err
			}
			if err := w.Flush(); err != nil {
				return err
			}
		}
	}
}
