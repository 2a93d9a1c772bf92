// Package lifecycle holds the commands that change a TrainJob's life: suspend, resume and delete.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/stage"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/completion"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/kueue"
)

// SuspendOptions are the flags and resolved inputs of `suspend` and `resume`.
type SuspendOptions struct {
	Streams cmdutil.Streams

	// Suspend is true for suspend and false for resume.
	Suspend bool
	Names   []string

	Namespace string
	Client    client.WithWatch
	// Kueue reads and sets the Workloads of TrainJobs in a Kueue LocalQueue; nil: none.
	Kueue *kueue.Client
}

var _ cmdutil.Command = (*SuspendOptions)(nil)

// NewCmdSuspend is `kubectl trainjob suspend`.
func NewCmdSuspend(f cmdutil.Factory, streams cmdutil.Streams) *cobra.Command {
	return newCmdSuspend(f, &SuspendOptions{Streams: streams, Suspend: true}, &cobra.Command{
		Use:   "suspend NAME...",
		Short: "Suspend TrainJobs: their pods are deleted until they are resumed",
		Long: `Suspend TrainJobs by setting spec.suspend to true (a merge patch). The controller suspends
the JobSet, which deletes the pods; nothing else is lost, and resume starts the pods again.
The active deadline does not run while suspended. A TrainJob queued by Kueue (label
kueue.x-k8s.io/queue-name) is suspended through its Kueue Workload (spec.active=false), as kueuectl
does, since Kueue owns its spec.suspend.`,
		Example: `  # Free the GPUs of a TrainJob for a while
  kubectl trainjob suspend llama-ft`,
	})
}

// NewCmdResume is `kubectl trainjob resume`.
func NewCmdResume(f cmdutil.Factory, streams cmdutil.Streams) *cobra.Command {
	return newCmdSuspend(f, &SuspendOptions{Streams: streams}, &cobra.Command{
		Use:   "resume NAME...",
		Short: "Resume suspended TrainJobs",
		Long: `Resume TrainJobs by setting spec.suspend to false (a merge patch). The controller resumes the
JobSet and its pods start again. A TrainJob queued by Kueue (label kueue.x-k8s.io/queue-name)
is resumed through its Kueue Workload (spec.active=true), as kueuectl does: it runs once Kueue admits it.`,
		Example: `  kubectl trainjob resume llama-ft`,
	})
}

func newCmdSuspend(f cmdutil.Factory, o *SuspendOptions, cmd *cobra.Command) *cobra.Command {
	cmd.Args = cobra.MinimumNArgs(1)
	cmd.ValidArgsFunction = completion.TrainJobNames(f)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		return cmdutil.RunCommand(f, o, cmd, args)
	}
	return cmd
}

// Complete resolves the namespace and the client.
func (o *SuspendOptions) Complete(f cmdutil.Factory, _ *cobra.Command, args []string) error {
	o.Names = args
	var err error
	if o.Namespace, o.Client, err = cmdutil.NamespaceAndClient(f, o.Client); err != nil {
		return err
	}
	if o.Kueue == nil {
		o.Kueue, err = kueue.NewClient(f)
	}
	return err
}

// Validate has nothing to check: cobra requires a NAME, and each TrainJob's patch says what is wrong with it.
func (o *SuspendOptions) Validate() error { return nil }

// Run patches each TrainJob; it goes on after an error and reports them all.
func (o *SuspendOptions) Run(ctx context.Context) error {
	var errs []error
	for _, name := range o.Names {
		if err := o.patch(ctx, name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (o *SuspendOptions) patch(ctx context.Context, name string) error {
	verb := map[bool]string{true: "suspended", false: "resumed"}[o.Suspend]
	tj, err := cmdutil.GetTrainJob(ctx, o.Client, o.Namespace, name)
	if err != nil {
		return err
	}
	if st := stage.Of(tj); st.Terminal() {
		return fmt.Errorf("%s %q is %s: a finished TrainJob cannot be %s", cmdutil.Resource, name, st, verb)
	}
	if kueue.Queued(tj) && o.Kueue != nil {
		wl, err := o.Kueue.WorkloadOf(ctx, tj)
		if err != nil {
			return fmt.Errorf("the Kueue Workload of TrainJob %q: %w", name, err)
		}
		if wl != nil {
			return o.setWorkloadActive(ctx, tj, wl)
		}
	}
	if ptr.Deref(tj.Spec.Suspend, false) == o.Suspend {
		fmt.Fprintf(o.Streams.Out, "trainjob.trainer.kubeflow.org/%s already %s\n", name, verb)
		return nil
	}
	patch := []byte(`{"spec":{"suspend":` + strconv.FormatBool(o.Suspend) + `}}`)
	if err := o.Client.Patch(ctx, tj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return cmdutil.DescribeError(err, o.Namespace, name)
	}
	fmt.Fprintf(o.Streams.Out, "trainjob.trainer.kubeflow.org/%s %s\n", name, verb)
	if kueue.Queued(tj) {
		fmt.Fprintf(o.Streams.ErrOut, "note: %s is queued by Kueue (%s=%s), which decides when it runs and may change spec.suspend again\n",
			name, kueue.QueueLabel, tj.Labels[kueue.QueueLabel])
	}
	return nil
}
