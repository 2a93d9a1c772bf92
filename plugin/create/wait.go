package create

import (
	"context"
	"errors"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/stage"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/status"
)

// wait follows the created TrainJob until it is terminal, as `status -w` does off a terminal (printing its
// transitions with --follow), and turns the outcome into the exit code: 0 Complete, 2 Failed, 3 timed out.
func (o *CreateOptions) wait(ctx context.Context, namespace, name string) error {
	if o.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Timeout)
		defer cancel()
	}
	out := io.Discard
	if o.Follow {
		out = o.Out
	}
	st, err := status.Follow(ctx, o.client, o.kueue, namespace, name, out, o.Clock, o.color)
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return cmdutil.WithExitCode(cmdutil.ExitTimeout, fmt.Errorf("timed out after %s waiting for TrainJob %s to end (it is %s)", o.Timeout, name, st))
	case err != nil:
		return err
	case st == stage.Failed:
		return cmdutil.WithExitCode(cmdutil.ExitFailed, fmt.Errorf("TrainJob %s Failed%s; see why with: kubectl trainjob status %s", name, o.failure(ctx, namespace, name), name))
	}
	if !o.Follow {
		fmt.Fprintf(o.Out, "trainjob.trainer.kubeflow.org/%s %s\n", name, st)
	}
	return nil
}

// failure is ": reason: message" of the TrainJob's Failed condition, or nothing when it cannot be read.
func (o *CreateOptions) failure(ctx context.Context, namespace, name string) string {
	tj := &trainer.TrainJob{}
	if err := o.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, tj); err != nil {
		return ""
	}
	c := meta.FindStatusCondition(tj.Status.Conditions, trainer.TrainJobFailed)
	if c == nil || c.Reason == "" {
		return ""
	}
	if c.Message == "" {
		return ": " + c.Reason
	}
	return ": " + c.Reason + ": " + c.Message
}
