// Package logs is `kubectl trainjob logs`: the logs of a TrainJob's pods by stage and rank, following the
// pipeline, restarted containers and replaced pods. It finds pods by the JobSet's labels only, so it works
// against upstream Kubeflow Trainer as well as our operator.
package logs

import (
	"context"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/stage"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/completion"
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

Ranks are completion indexes, which Kubeflow Trainer's torch runtime passes as the node rank.

A TrainJob that Kueue's MultiKueue dispatched to a worker cluster runs there: its logs are read
from the worker through the kubeconfig Secret MultiKueue itself uses (MultiKueueCluster, then its
Secret in kueue-system) when you may read it, and -f first waits for the dispatch. When you may
not, it says where the TrainJob runs and how to read its logs there (exit 1).`)

	logsExample = `  # Rank 0 of the trainer
  kubectl trainjob logs llama

  # Follow the pipeline until the TrainJob ends
  kubectl trainjob logs llama -f

  # Every rank, each line prefixed with its pod and container
  kubectl trainjob logs llama --rank all

  # The dataset initializer, with timestamps
  kubectl trainjob logs llama --stage dataset-initializer --timestamps

  # The pods on one node, the last 20 lines of each
  kubectl trainjob logs llama --node gpu-node-3 --tail 20`
)

// LogsOptions are the options of `kubectl trainjob logs`.
type LogsOptions struct {
	Name           string
	Namespace      string
	Stage          string
	Rank           string
	Node           string
	Container      string
	Follow         bool
	Since          time.Duration
	Tail           int64
	Timestamps     bool
	Prefix         bool
	MaxLogRequests int

	// RetryInterval is how long following waits before it re-opens a stream that ended while its container
	// still runs.
	RetryInterval time.Duration

	prefixSet bool
	sel       selection
	color     bool
	client    client.WithWatch
	clientset kubernetes.Interface
	// kueue finds the worker cluster of a TrainJob that MultiKueue dispatched (multikueue.go).
	kueue *kueue.Client

	cmdutil.Streams
}

// NewLogsOptions returns the defaults of the flags.
func NewLogsOptions(streams cmdutil.Streams) *LogsOptions {
	return &LogsOptions{Streams: streams, Rank: "0", Tail: -1, MaxLogRequests: 10, RetryInterval: time.Second}
}

// NewCmdLogs is `kubectl trainjob logs NAME`.
func NewCmdLogs(f cmdutil.Factory, streams cmdutil.Streams) *cobra.Command {
	return NewCmdLogsWithOptions(f, NewLogsOptions(streams))
}

// NewCmdLogsWithOptions is `kubectl trainjob logs` with preset options.
func NewCmdLogsWithOptions(f cmdutil.Factory, o *LogsOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:                   "logs NAME [-f] [--stage STAGE] [--rank N|all] [--node HOST] [-c CONTAINER]",
		DisableFlagsInUseLine: true,
		Short:                 "Print the logs of a TrainJob's pods, by stage and rank",
		Long:                  logsLong,
		Example:               logsExample,
		Args:                  cobra.ExactArgs(1),
		ValidArgsFunction:     completion.TrainJobNames(f),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Complete(f, cmd, args); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.Stage, "stage", o.Stage, "Stage to read: "+strings.Join(stageNames(), ", ")+" (default: the trainer, or the launcher when there is one; with -f the initializers first)")
	fl.StringVar(&o.Rank, "rank", o.Rank, "Rank (completion index) to read, or all")
	fl.StringVar(&o.Node, "node", o.Node, "Only the pods on this Kubernetes node (all their ranks unless --rank is given)")
	fl.StringVarP(&o.Container, "container", "c", o.Container, "Container to read (default: the stage's main container: node for the trainer and launcher, the initializer's name for initializers)")
	fl.BoolVarP(&o.Follow, "follow", "f", o.Follow, "Follow the pipeline until the TrainJob is Complete or Failed")
	fl.DurationVar(&o.Since, "since", o.Since, "Only lines newer than a relative duration like 5s, 2m or 3h")
	fl.Int64Var(&o.Tail, "tail", o.Tail, "Lines of recent log to show per stream; -1 shows all")
	fl.BoolVar(&o.Timestamps, "timestamps", o.Timestamps, "Start every line with its timestamp")
	fl.BoolVar(&o.Prefix, "prefix", o.Prefix, "Start every line with [pod/container] (default: on when more than one stream is read)")
	fl.IntVar(&o.MaxLogRequests, "max-log-requests", o.MaxLogRequests, "Most log streams to follow at once; following more is an error")
	_ = cmd.RegisterFlagCompletionFunc("stage", cobra.FixedCompletions(stageNames(), cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("rank", completeRank(f))
	_ = cmd.RegisterFlagCompletionFunc("node", completion.TrainJobNodes(f))
	return cmd
}

// Complete resolves the namespace, the clients and the selection.
func (o *LogsOptions) Complete(f cmdutil.Factory, cmd *cobra.Command, args []string) error {
	o.Name = args[0]
	o.prefixSet = cmd.Flags().Changed("prefix")
	var err error
	if o.Namespace, _, err = f.Namespace(); err != nil {
		return err
	}
	if o.client, err = f.Client(); err != nil {
		return err
	}
	if o.clientset, err = f.KubernetesClientSet(); err != nil {
		return err
	}
	if o.kueue, err = kueue.NewClient(f); err != nil {
		return err
	}
	o.color = f.UseColor(o.Out)
	o.sel = selection{stage: o.Stage, node: o.Node, container: o.Container, follow: o.Follow, rank: allRanks, rankSet: cmd.Flags().Changed("rank")}
	if o.Node != "" && !o.sel.rankSet {
		o.Rank = "all"
	}
	return nil
}

// Validate rejects flags that cannot work.
func (o *LogsOptions) Validate() error {
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
	if o.Follow {
		return newFollower(o).run(ctx)
	}
	js := &jobsetv1alpha2.JobSet{}
	if err := o.client.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: o.Name}, js); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("TrainJob %s has no pods yet (stage %s, no JobSet); follow it with: kubectl trainjob logs %s -f", o.Name, stage.Of(tj), o.Name)
		}
		return err
	}
	p, err := newPlan(o.sel, o.Name, js)
	if err != nil {
		return err
	}
	var pods corev1.PodList
	if err := o.client.List(ctx, &pods, client.InNamespace(o.Namespace), client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: o.Name}); err != nil {
		return err
	}
	targets := p.targets(pods.Items)
	if len(targets) == 0 {
		return fmt.Errorf("TrainJob %s has no pods for %s yet (stage %s); follow it with: kubectl trainjob logs %s -f", o.Name, p.describe(), stage.Of(tj), o.Name)
	}
	out := &printer{out: o.Out, timestamps: o.Timestamps}
	n, known := p.streams()
	prefix := o.usePrefix(n, known)
	var notStarted []string
	read := 0
	for _, t := range targets {
		name, err := containerOf(t.pod, t.step.container, o.Container != "")
		if err != nil {
			return err
		}
		if st := containerStatus(t.pod, name); !started(st) {
			notStarted = append(notStarted, fmt.Sprintf("pod %s container %s has not started (%s)", t.pod.Name, name, waitingReason(t.pod, st)))
			continue
		}
		tl := newTail(o.clientset, o.Namespace, t.pod.Name, name, o.prefix(prefix, t.pod.Name, name), out, o.sinceSeconds(), o.tailLines())
		if err := tl.read(ctx, false, false); err != nil {
			return err
		}
		read++
	}
	if read == 0 {
		return fmt.Errorf("no logs yet: %s; follow it with: kubectl trainjob logs %s -f", strings.Join(notStarted, "; "), o.Name)
	}
	for _, msg := range notStarted {
		fmt.Fprintf(o.ErrOut, "note: %s\n", msg)
	}
	return nil
}

// usePrefix is --prefix, or when it is not given whether more than one stream may be read.
func (o *LogsOptions) usePrefix(streams int, known bool) bool {
	if o.prefixSet {
		return o.Prefix
	}
	return streams > 1 || !known
}

// prefix is what starts every line of a stream: "[pod/container] ", coloured per pod on a terminal.
func (o *LogsOptions) prefix(on bool, pod, container string) string {
	if !on {
		return ""
	}
	p := "[" + pod + "/" + container + "]"
	if o.color {
		h := fnv.New32a()
		_, _ = h.Write([]byte(pod))
		colors := []int{31, 32, 33, 34, 35, 36}
		p = fmt.Sprintf("\x1b[%dm%s\x1b[0m", colors[h.Sum32()%uint32(len(colors))], p)
	}
	return p + " "
}

func (o *LogsOptions) sinceSeconds() *int64 {
	if o.Since <= 0 {
		return nil
	}
	s := int64((o.Since + time.Second - 1) / time.Second)
	return &s
}

func (o *LogsOptions) tailLines() *int64 {
	if o.Tail < 0 {
		return nil
	}
	return &o.Tail
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

// podSelector selects the pods of a TrainJob's JobSet.
func podSelector(name string) string {
	return labels.Set{jobsetv1alpha2.JobSetNameKey: name}.String()
}
