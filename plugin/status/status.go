// Package status is `kubectl trainjob status NAME`: one screen that says where a TrainJob is in its pipeline
// and why, when each stage started and ended, its replicated jobs and pods, every transition and the recent
// warnings; `-w` follows it until it is terminal; `-o json|yaml` prints the same Summary for tools.
// For a TrainJob whose containers failed it starts with the first failure (plugin/failure) and the end of that
// container's log. It reads only what upstream Kubeflow Trainer's controller writes too, and for a TrainJob in
// a Kueue LocalQueue what Kueue writes (plugin/kueue), and for one that MultiKueue dispatched the worker cluster's copy
// (multikueue.go). Its requests are bounded (Fetch).
package status

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/completion"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/kueue"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/optimizationjob"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/printers"
)

const example = `  # Where is my TrainJob, and why? For a Failed one: which container failed first, and how
  kubectl trainjob status llama-ft

  # Follow it until it is Complete or Failed (exit code 2 if it Failed)
  kubectl trainjob status llama-ft -w

  # The same summary for scripts
  kubectl trainjob status llama-ft -o json | jq '.stages'

  # The exit code and reason of the container that failed first
  kubectl trainjob status llama-ft -o json | jq '.firstFailure | {pod, rank, reason, exitCode}'

  # A hyperparameter search (kubectl trainjob optimize): its progress, best trial and trials
  kubectl trainjob status optimizationjob/sweep`

// StatusOptions are the flags and resolved inputs of `status`.
type StatusOptions struct {
	Streams cmdutil.Streams

	Name      string
	Namespace string
	Output    string
	Watch     bool

	// Clock gives "now" for ages and durations; tests pin it.
	Clock clock.PassiveClock
	// Terminal tells whether Out is a terminal: -w then redraws in place. Complete detects it unless set.
	Terminal *bool
	Color    bool
	Client   client.WithWatch
	// Kueue reads what Kueue says of a TrainJob in a LocalQueue; nil reads nothing. Complete makes it.
	Kueue *kueue.Client
	// Logs reads the end of the log of the first failed container. Complete makes it.
	Logs kubernetes.Interface
}

var _ cmdutil.Command = (*StatusOptions)(nil)

// NewStatusOptions returns options writing to streams.
func NewStatusOptions(streams cmdutil.Streams) *StatusOptions {
	return &StatusOptions{Streams: streams, Clock: clock.RealClock{}}
}

// NewCmdStatus is `kubectl trainjob status`.
func NewCmdStatus(f cmdutil.Factory, streams cmdutil.Streams) *cobra.Command {
	return NewCmdStatusWithOptions(f, NewStatusOptions(streams))
}

// NewCmdStatusWithOptions is `kubectl trainjob status` with preset options (a pinned clock in tests).
func NewCmdStatusWithOptions(f cmdutil.Factory, o *StatusOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status NAME | status optimizationjob/NAME",
		Short: "Show where a TrainJob is in its pipeline and why",
		Long: `Show one TrainJob on one screen: its stage and why it is there (for example which pods
cannot be scheduled and the scheduler's message), the pipeline (initializers, trainer, done)
with when each stage started and ended, every replicated job's Job counts, the pods with their
node, GPUs, status and restarts, the timeline of every condition transition and Event, and the
recent warnings of the TrainJob, its JobSet, Jobs and pods. A trainer's progress report
(status.trainerStatus) shows as a progress bar with the time left and the latest metrics.

When a container failed (and the TrainJob is not Complete), the screen starts with the first
failure, by when the container terminated (not by the Job the JobSet names): its pod, rank,
replicated job and node; its exit code and reason (OOMKilled, Error, the signal of an exit
code 128+N such as SIGKILL for 137, Evicted, DeadlineExceeded, an image that cannot be
pulled); its restarts, its Job's failures of backoffLimit and the JobSet's restarts of
failurePolicy.maxRestarts; what the JobSet's failure policy did (the rule that matched, or
the default); and the last 20 lines of its log (of the previous instance when it restarted).
kubectl trainjob logs NAME --failed prints all of that log.

For a TrainJob in a Kueue LocalQueue (label kueue.x-k8s.io/queue-name) it also shows its Kueue
Workload: LocalQueue and ClusterQueue, priority, position in the queue (from Kueue's visibility
API; "pending" where that is not served), whether and when Kueue admitted it and why not, and
its evictions (preemptions); the Workload's conditions and Events join the timeline.

For a TrainJob that Kueue's MultiKueue dispatched to a worker cluster (spec.managedBy
kueue.x-k8s.io/multikueue), the Worker line names that cluster, and the jobs, pods and warnings
are the worker's, read through the kubeconfig Secret MultiKueue itself uses (MultiKueueCluster,
then its Secret in kueue-system) when you may read it; when you may not, the line says where the
TrainJob runs and how to reach it.

With -w it follows the TrainJob until it is Complete or Failed: on a terminal the screen is
redrawn in place; otherwise one line is printed per transition (condition, Event, change of
stage, progress report, first failure), in time order, each dated by the cluster's records.
It then exits 0 if Complete and 2 if Failed.

status optimizationjob/NAME shows an OptimizationJob (a hyperparameter search, kubectl trainjob
optimize): its objective and search, its trials created, complete, running and failed of
numTrials, the best trial (status.result, else the Complete trial with the best report) with
its objective and parameters, and a table of its trials (the TrainJobs it controls) with their
stage, last report of the objective metric (status.trainerStatus.metrics) and parameters, best
first. status NAME is the TrainJob NAME when there is one, else the OptimizationJob NAME. A trial
is a TrainJob: status TRIAL shows it as any other.`,
		Example:           example,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completion.TrainJobOrOptimizationJobNames(f),
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.RunCommand(f, o, cmd, args)
		},
	}
	cmd.Flags().StringVarP(&o.Output, "output", "o", o.Output, "Output format: json or yaml (the summary as a document). Default: the status screen.")
	cmd.Flags().BoolVarP(&o.Watch, "watch", "w", o.Watch, "Follow the TrainJob until it is Complete (exit 0) or Failed (exit 2).")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"json", "yaml"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// Complete resolves the namespace, the client, colour and the terminal.
func (o *StatusOptions) Complete(f cmdutil.Factory, _ *cobra.Command, args []string) error {
	o.Name = args[0]
	var err error
	if o.Namespace, o.Client, err = cmdutil.NamespaceAndClient(f, o.Client); err != nil {
		return err
	}
	if o.Kueue == nil {
		if o.Kueue, err = kueue.NewClient(f); err != nil {
			return err
		}
	}
	if o.Logs == nil {
		if o.Logs, err = f.KubernetesClientSet(); err != nil {
			return err
		}
	}
	o.Color = f.UseColor(o.Streams.Out)
	if o.Terminal == nil {
		tty := printers.IsTerminal(o.Streams.Out)
		o.Terminal = &tty
	}
	return nil
}

// Validate rejects flags that do not go together.
func (o *StatusOptions) Validate() error {
	switch o.Output {
	case "", "json", "yaml":
	default:
		return fmt.Errorf("unsupported output format %q: use -o json or -o yaml", o.Output)
	}
	if o.Watch && o.Output != "" {
		return fmt.Errorf("-w and -o %s cannot be used together: -w prints the screen or one line per transition", o.Output)
	}
	return nil
}

// Run prints the status once, or follows the TrainJob with -w. An argument optimizationjob/NAME, or a NAME that
// no TrainJob has, is an OptimizationJob (optimization.go): a TrainJob's status costs no request more.
func (o *StatusOptions) Run(ctx context.Context) error {
	if name, ok := optimizationjob.NameOf(o.Name); ok {
		return o.runOptimization(ctx, name, nil)
	}
	if o.Watch {
		if *o.Terminal {
			return o.redraw(ctx)
		}
		return exitFor(o.Name)(Follow(ctx, FollowOptions{Client: o.Client, Kueue: o.Kueue, Namespace: o.Namespace, Name: o.Name,
			Out: o.Streams.Out, Clock: o.Clock, Color: o.Color, Lines: true}))
	}
	in, err := Fetch(ctx, Reader{Client: o.Client, Kueue: o.Kueue, Logs: o.Logs}, o.Namespace, o.Name)
	if apierrors.IsNotFound(err) {
		return o.runOptimization(ctx, o.Name, err)
	}
	if err != nil {
		return err
	}
	return o.print(Summarize(in, o.Clock.Now()))
}

func (o *StatusOptions) print(s *Summary) error {
	if o.Output != "" {
		return printers.Document(o.Streams.Out, o.Output, s)
	}
	return Render(o.Streams.Out, s, o.Clock.Now(), o.Color)
}

func writeJSON(w io.Writer, v any) error { return printers.Document(w, "json", v) }
