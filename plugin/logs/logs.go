// Package logs is `kubectl trainjob logs`: the logs of a TrainJob's pods by stage and rank, following the
// pipeline, restarted containers and replaced pods, or the log of the container that failed first. It finds
// pods by the JobSet's labels only, so it works against upstream Kubeflow Trainer as well as our operator.
package logs

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/stage"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/completion"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/failure"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/kueue"
)

var (
	logsLong = strings.TrimSpace(`
Print the logs of a TrainJob's pods.

By default the logs of rank 0 of the trainer: the pod of the replicated job "node" (or
"launcher" for MPI runtimes) with completion index 0, container "node". With -f the whole
pipeline is followed: the dataset and model initializers while they run, then the trainer.
Following re-attaches to restarted containers and to pods that replace others without
repeating or losing a line, and ends when the TrainJob is Complete (exit 0) or Failed (exit 2).
--failed prints the log of the container that failed first, as status shows it.

Ranks are completion indexes, which Kubeflow Trainer's torch runtime passes as the node rank.

A TrainJob that Kueue's MultiKueue dispatched to a worker cluster runs there: its logs are read
from the worker through the kubeconfig Secret MultiKueue itself uses (MultiKueueCluster, then its
Secret in kueue-system) when you may read it, and -f first waits for the dispatch. When you may
not, it says where the TrainJob runs and how to read its logs there (exit 1).

When more than one log is read, each line starts with [pod/container]; on a terminal
(--color=auto, unless NO_COLOR is set) that prefix has a colour of its own per rank, the same
in every run and for every pod that runs the rank.

Without -f every log asked for is read, at most --max-log-requests at once, and each is
printed whole, in stage and rank order. With -f every log is a stream kept open: following
more than --max-log-requests of them is an error that says how many, so that a TrainJob of a
thousand ranks is followed by the ranks or nodes chosen (--rank, --node, or --max-log-requests
raised on purpose), never by a thousand streams opened by accident.`)

	logsExample = `  # Rank 0 of the trainer
  kubectl trainjob logs llama

  # Follow the pipeline until the TrainJob ends
  kubectl trainjob logs llama -f

  # Every rank, each line prefixed with its pod and container
  kubectl trainjob logs llama --rank all

  # Why did it fail? The log of the container that failed first
  kubectl trainjob logs llama --failed

  # The lines of every rank that mention NaN, since a time
  kubectl trainjob logs llama --rank all --grep 'nan|NaN' --since-time 2026-05-01T12:00:00Z

  # The previous instance of rank 3's container, which restarted
  kubectl trainjob logs llama --rank 3 --previous

  # The dataset initializer, with timestamps
  kubectl trainjob logs llama --stage dataset-initializer --timestamps

  # The pods on one node, the last 20 lines of each of their containers
  kubectl trainjob logs llama --node gpu-node-3 --tail 20 --all-containers`
)

// defaultMaxLogRequests bounds the log streams read at once: enough to follow a 16-node job whole, few enough
// that a thousand-rank job does not open a thousand streams to the API server and its kubelets.
const defaultMaxLogRequests = 16

// LogsOptions are the options of `kubectl trainjob logs`.
type LogsOptions struct {
	Name           string
	Namespace      string
	Stage          string
	Rank           string
	Node           string
	Container      string
	AllContainers  bool
	Follow         bool
	Previous       bool
	Failed         bool
	Since          time.Duration
	SinceTime      string
	Tail           int64
	Timestamps     bool
	Prefix         bool
	Grep           string
	Invert         bool
	MaxLogRequests int

	// RetryInterval is how long following waits before it re-opens a stream that ended while its container
	// still runs.
	RetryInterval time.Duration

	prefixSet bool
	// given are the flags set on the command line: --failed refuses those that pick a pod or container.
	given     map[string]bool
	sinceTime *metav1.Time
	filter    lineFilter
	sel       selection
	color     bool
	client    client.WithWatch
	clientset kubernetes.Interface
	// kueue finds the worker cluster of a TrainJob that MultiKueue dispatched (multikueue.go).
	kueue *kueue.Client

	cmdutil.Streams
}

var _ cmdutil.Command = (*LogsOptions)(nil)

// NewLogsOptions returns the defaults of the flags.
func NewLogsOptions(streams cmdutil.Streams) *LogsOptions {
	return &LogsOptions{Streams: streams, Rank: "0", Tail: -1, MaxLogRequests: defaultMaxLogRequests, RetryInterval: time.Second}
}

// NewCmdLogs is `kubectl trainjob logs NAME`.
func NewCmdLogs(f cmdutil.Factory, streams cmdutil.Streams) *cobra.Command {
	return NewCmdLogsWithOptions(f, NewLogsOptions(streams))
}

// NewCmdLogsWithOptions is `kubectl trainjob logs` with preset options.
func NewCmdLogsWithOptions(f cmdutil.Factory, o *LogsOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:                   "logs NAME [-f] [--stage STAGE] [--rank N|all] [--node HOST] [-c CONTAINER] [--failed]",
		DisableFlagsInUseLine: true,
		Short:                 "Print the logs of a TrainJob's pods, by stage and rank, or of its first failed container",
		Long:                  logsLong,
		Example:               logsExample,
		Args:                  cobra.ExactArgs(1),
		ValidArgsFunction:     completion.TrainJobNames(f),
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.RunCommand(f, o, cmd, args)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.Stage, "stage", o.Stage, "Stage to read: "+strings.Join(stageNames(), ", ")+" (default: the trainer, or the launcher when there is one; with -f the initializers first)")
	fl.StringVar(&o.Rank, "rank", o.Rank, "Rank (completion index) to read, or all")
	fl.StringVar(&o.Node, "node", o.Node, "Only the pods on this Kubernetes node (all their ranks unless --rank is given)")
	fl.StringVarP(&o.Container, "container", "c", o.Container, "Container to read (default: the stage's main container: node for the trainer and launcher, the initializer's name for initializers)")
	fl.BoolVar(&o.AllContainers, "all-containers", o.AllContainers, "Read every container of each pod, init containers first")
	fl.BoolVarP(&o.Follow, "follow", "f", o.Follow, "Follow the pipeline until the TrainJob is Complete or Failed")
	fl.BoolVarP(&o.Previous, "previous", "p", o.Previous, "Read the previous instance of each container: the run before its last restart")
	fl.BoolVar(&o.Failed, "failed", o.Failed, "Read the log of the container that failed first, as status shows it (of its previous instance when it restarted since)")
	fl.DurationVar(&o.Since, "since", o.Since, "Only lines newer than a relative duration like 5s, 2m or 3h")
	fl.StringVar(&o.SinceTime, "since-time", o.SinceTime, "Only lines at or after this time, RFC3339 (2026-05-01T12:00:00Z)")
	fl.Int64Var(&o.Tail, "tail", o.Tail, "Lines of recent log to show per stream; -1 shows all")
	fl.BoolVar(&o.Timestamps, "timestamps", o.Timestamps, "Start every line with its timestamp")
	fl.BoolVar(&o.Prefix, "prefix", o.Prefix, "Start every line with [pod/container] (default: on when more than one stream is read)")
	fl.StringVar(&o.Grep, "grep", o.Grep, "Only lines that match this regular expression (RE2 syntax; the prefix and timestamp are not matched)")
	fl.BoolVar(&o.Invert, "invert", o.Invert, "With --grep: only lines that do not match")
	fl.IntVar(&o.MaxLogRequests, "max-log-requests", o.MaxLogRequests, "Most logs read at once; with -f, following more streams than this is an error")
	_ = cmd.RegisterFlagCompletionFunc("stage", cobra.FixedCompletions(stageNames(), cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("rank", completeRank(f))
	_ = cmd.RegisterFlagCompletionFunc("node", completion.TrainJobNodes(f))
	for _, free := range []string{"since-time", "grep"} {
		_ = cmd.RegisterFlagCompletionFunc(free, cobra.NoFileCompletions)
	}
	return cmd
}

// Complete resolves the namespace, the clients and the selection.
func (o *LogsOptions) Complete(f cmdutil.Factory, cmd *cobra.Command, args []string) error {
	o.Name = args[0]
	o.prefixSet = cmd.Flags().Changed("prefix")
	o.given = givenFlags(cmd)
	var err error
	if o.Namespace, _, err = f.Namespace(); err != nil {
		return err
	}
	if o.client, err = f.Client(); err != nil {
		return err
	}
	cfg, err := f.ToRESTConfig()
	if err != nil {
		return err
	}
	if o.clientset, err = logsClientset(cfg); err != nil {
		return err
	}
	if o.kueue, err = kueue.NewClient(f); err != nil {
		return err
	}
	o.color = f.UseColor(o.Out)
	o.sel = selection{stage: o.Stage, node: o.Node, container: o.Container, follow: o.Follow, rank: allRanks, rankSet: cmd.Flags().Changed("rank"),
		allContainers: o.AllContainers}
	if o.Node != "" && !o.sel.rankSet {
		o.Rank = "all"
	}
	return nil
}

// givenFlags are the names of the flags set on cmd's command line.
func givenFlags(cmd *cobra.Command) map[string]bool {
	given := map[string]bool{}
	cmd.Flags().Visit(func(fl *pflag.Flag) { given[fl.Name] = true })
	return given
}

// Validate rejects flags that cannot work, naming them and the way out.
func (o *LogsOptions) Validate() error {
	if o.Failed {
		for _, name := range []string{"follow", "previous", "stage", "rank", "node", "container", "all-containers"} {
			if o.given[name] {
				return fmt.Errorf("--failed picks the pod and container itself: drop --%s", name)
			}
		}
	}
	if o.Stage != "" {
		if o.Stage == trainer.Node { // the replicated job's name
			o.Stage, o.sel.stage = trainer.AncestorTrainer, trainer.AncestorTrainer
		}
		if _, ok := stepNamed(o.Stage); !ok {
			return fmt.Errorf("invalid --stage %q: use one of %s", o.Stage, strings.Join(stageNames(), ", "))
		}
	}
	if o.Rank != "all" {
		r, err := strconv.Atoi(o.Rank)
		if err != nil || r < 0 {
			return fmt.Errorf("invalid --rank %q: use a completion index (0, 1, …) or all", o.Rank)
		}
		o.sel.rank = r
	}
	if o.Tail < -1 {
		return fmt.Errorf("invalid --tail %d: use -1 (all lines) or a number of lines", o.Tail)
	}
	if o.Since < 0 {
		return fmt.Errorf("invalid --since %s: use a positive duration like 5m", o.Since)
	}
	if o.SinceTime != "" {
		if o.Since != 0 {
			return errors.New("--since and --since-time cannot be used together: use one of them")
		}
		t, err := time.Parse(time.RFC3339, o.SinceTime)
		if err != nil {
			return fmt.Errorf("invalid --since-time %q: use an RFC3339 time like 2026-05-01T12:00:00Z", o.SinceTime)
		}
		o.sinceTime = &metav1.Time{Time: t}
	}
	if o.Grep != "" {
		re, err := regexp.Compile(o.Grep)
		if err != nil {
			return fmt.Errorf("invalid --grep %q: %v", o.Grep, err)
		}
		o.filter = lineFilter{grep: re, invert: o.Invert}
	} else if o.Invert {
		return errors.New("--invert needs --grep: it prints the lines that do not match it")
	}
	if o.Previous && o.Follow {
		return errors.New("--previous reads containers that restarted, up to their restart: it cannot be followed; drop -f")
	}
	if o.AllContainers && o.Container != "" {
		return errors.New("--all-containers and -c cannot be used together: drop one")
	}
	if o.MaxLogRequests < 1 {
		return fmt.Errorf("invalid --max-log-requests %d: use 1 or more", o.MaxLogRequests)
	}
	return nil
}

// Run prints the logs.
func (o *LogsOptions) Run(ctx context.Context) error {
	tj := &trainer.TrainJob{}
	if err := o.client.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: o.Name}, tj); err != nil {
		return cmdutil.DescribeError(err, o.Namespace, o.Name)
	}
	if kueue.Dispatched(tj) {
		var ended bool
		var err error
		if tj, ended, err = o.onWorker(ctx, tj); err != nil || ended {
			return err
		}
	}
	if o.Failed {
		return o.runFailed(ctx, tj)
	}
	if o.Follow {
		return newFollower(o, tj).run(ctx)
	}
	lineage, err := cmdutil.ReadLineage(ctx, o.client, tj)
	if err != nil {
		return err
	}
	if lineage.JobSet() == nil {
		return fmt.Errorf("TrainJob %s has no pods yet (stage %s, no JobSet); follow it with: kubectl trainjob logs %s -f", o.Name, stage.Of(tj), o.Name)
	}
	p, err := newPlan(o.sel, o.Name, lineage.JobSet())
	if err != nil {
		return err
	}
	pods, err := o.pods(ctx, lineage)
	if err != nil {
		return err
	}
	targets := p.targets(pods)
	if len(targets) == 0 {
		return fmt.Errorf("TrainJob %s has no pods for %s yet (stage %s); follow it with: kubectl trainjob logs %s -f", o.Name, p.describe(), stage.Of(tj), o.Name)
	}
	n, known := p.streams()
	prefix := o.usePrefix(n, known)
	var (
		streams []stream
		skipped []string
	)
	for _, t := range targets {
		names, err := o.containersOf(t.pod, t.step)
		if err != nil {
			return err
		}
		for _, name := range names {
			st := containerStatus(t.pod, name)
			switch {
			case o.Previous && (st == nil || st.LastTerminationState.Terminated == nil):
				skipped = append(skipped, fmt.Sprintf("pod %s container %s has not restarted: it has no previous instance", t.pod.Name, name))
			case !started(st):
				skipped = append(skipped, fmt.Sprintf("pod %s container %s has not started (%s)", t.pod.Name, name, waitingReason(t.pod, st)))
			default:
				streams = append(streams, stream{pod: t.pod.Name, container: name, prefix: o.prefix(prefix, t, name)})
			}
		}
	}
	if len(streams) == 0 {
		if o.Previous {
			return fmt.Errorf("nothing to read with --previous: %s", strings.Join(skipped, "; "))
		}
		return fmt.Errorf("no logs yet: %s; follow it with: kubectl trainjob logs %s -f", strings.Join(skipped, "; "), o.Name)
	}
	if err := o.readInOrder(ctx, streams, o.Previous); err != nil {
		return err
	}
	for _, msg := range skipped {
		fmt.Fprintf(o.ErrOut, "note: %s\n", msg)
	}
	return nil
}

// pods are the pods of the TrainJob's JobSet: those its label selects that lineage owns.
func (o *LogsOptions) pods(ctx context.Context, lineage *cmdutil.Lineage) ([]corev1.Pod, error) {
	var pods corev1.PodList
	if err := o.client.List(ctx, &pods, client.InNamespace(o.Namespace), cmdutil.ChildrenOf(o.Name)); err != nil {
		return nil, err
	}
	return lineage.Pods(ctx, pods.Items)
}

// runFailed prints the log of the container that failed first (plugin/failure, as status finds it): of its
// previous instance when it has restarted since. What failed goes to stderr, so that stdout is the log.
func (o *LogsOptions) runFailed(ctx context.Context, tj *trainer.TrainJob) error {
	lineage, err := cmdutil.ReadLineage(ctx, o.client, tj)
	if err != nil {
		return err
	}
	pods, err := o.pods(ctx, lineage)
	if err != nil {
		return err
	}
	f := failure.First(failure.Objects{Pods: pods})
	switch {
	case f == nil:
		return fmt.Errorf("no container of TrainJob %s has failed (stage %s); see it with: kubectl trainjob status %s", o.Name, stage.Of(tj), o.Name)
	case f.ExitCode == nil:
		return fmt.Errorf("the first failure of TrainJob %s is %s: %s; the container never started, so it has no log", o.Name, f.Where(), f.Text())
	}
	fmt.Fprintf(o.ErrOut, "first failure: %s: %s\n", f.Where(), f.Text())
	prefix := ""
	if o.prefixSet && o.Prefix {
		prefix = "[" + f.Pod + "/" + f.Container + "] "
	}
	return o.readInOrder(ctx, []stream{{pod: f.Pod, container: f.Container, prefix: prefix}}, f.Previous)
}

// containersOf are the containers to read of a pod of step: with --all-containers every one, init containers
// first; else the one asked for with -c, or the step's main container.
func (o *LogsOptions) containersOf(pod *corev1.Pod, s *planStep) ([]string, error) {
	if o.AllContainers {
		var names []string
		for _, c := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
			names = append(names, c.Name)
		}
		return names, nil
	}
	name, err := containerOf(pod, s.container, o.Container != "")
	if err != nil {
		return nil, err
	}
	return []string{name}, nil
}

// usePrefix is --prefix, or when it is not given whether more than one stream may be read.
func (o *LogsOptions) usePrefix(streams int, known bool) bool {
	if o.prefixSet {
		return o.Prefix
	}
	return streams > 1 || !known
}

// prefix is what starts every line of a stream: "[pod/container] ", coloured by rank on a terminal.
func (o *LogsOptions) prefix(on bool, t podTarget, container string) string {
	if !on {
		return ""
	}
	p := "[" + t.pod.Name + "/" + container + "]"
	if o.color {
		p = fmt.Sprintf("\x1b[%dm%s\x1b[0m", rankColor(t.step.name, t.rank), p)
	}
	return p + " "
}

// palette are the colours of the prefixes of the lines of different ranks (SGR foreground codes): six colours,
// then their bright variants, none of them bold, all readable on dark and light backgrounds.
var palette = []int{36, 32, 35, 33, 34, 31, 96, 92, 95, 93, 94, 91}

// rankColor is the colour of the lines of a rank of a stage, as stern colours a pod's but stable by rank: the
// same in every run and for every pod that runs the rank (a replacement, a JobSet restart), different for
// neighbouring ranks, and each stage starting at another place in the palette.
func rankColor(stageName string, rank int) int {
	offset := max(slices.Index(stageNames(), stageName), 0) * 3
	return palette[(rank+offset)%len(palette)]
}

// from is where the first read of each log begins: --since or --since-time, and --tail.
func (o *LogsOptions) from(previous bool) readFrom {
	f := readFrom{sinceTime: o.sinceTime, previous: previous}
	if o.Since > 0 {
		s := int64((o.Since + time.Second - 1) / time.Second)
		f.sinceSeconds = &s
	}
	if o.Tail >= 0 {
		f.tailLines = &o.Tail
	}
	return f
}

func (o *LogsOptions) printer() *printer {
	return &printer{out: o.Out, timestamps: o.Timestamps, filter: o.filter}
}

// describe names what a plan reads, for messages.
func (p *plan) describe() string {
	var parts []string
	for _, s := range p.steps {
		r := "every rank"
		if s.rank != allRanks {
			r = "rank " + strconv.Itoa(s.rank)
		}
		parts = append(parts, fmt.Sprintf("%s of the %s stage", r, s.name))
	}
	d := strings.Join(parts, ", ")
	if p.node != "" {
		d += " on node " + p.node
	}
	return d
}

// logsClientset is the clientset that reads the logs, with no client-side
// rate limit: --max-log-requests already bounds how many are read at once,
// and the factory's token bucket on top of it would only make the reads of a
// TrainJob of many ranks wait on the client, one after another, while the
// API server idles (it has its own fairness, API Priority and Fairness).
func logsClientset(cfg *rest.Config) (kubernetes.Interface, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst, cfg.RateLimiter = -1, 0, nil
	return kubernetes.NewForConfig(cfg)
}
