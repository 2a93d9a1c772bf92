package create

import (
	"context"
	"errors"
	"fmt"
	"os"

	"golang.org/x/term"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/stage"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/printers"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/status"
)

// wait follows the created TrainJob until it is terminal and turns the outcome into the exit code: 0 Complete,
// 2 Failed, 3 timed out. With --follow it prints a line per transition, as `status -w` does off a terminal;
// with --wait alone a line per report of the trainer's progress. On a terminal (and unless -o asks for a
// document) a live line at the bottom shows the stage, or a progress bar with the time left and the latest
// metrics, redrawn in place and erased at the end.
func (o *CreateOptions) wait(ctx context.Context, namespace, name string) error {
	if o.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Timeout)
		defer cancel()
	}
	terminal := o.terminal()
	plain := ptr.Deref(o.PrintFlags.OutputFormat, "") == "" || ptr.Deref(o.PrintFlags.OutputFormat, "") == "name"
	st, err := status.Follow(ctx, status.FollowOptions{
		Client: o.client, Kueue: o.kueue, Namespace: namespace, Name: name, Out: o.Out, Clock: o.Clock, Color: o.color,
		Lines:         o.Follow,
		ProgressLines: !o.Follow && !terminal && plain,
		Live:          terminal && plain,
		Width:         terminalWidth(o.Out),
	})
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

// terminal tells whether Out is a terminal: Terminal when set (tests), else whether it is one.
func (o *CreateOptions) terminal() bool {
	if o.Terminal != nil {
		return *o.Terminal
	}
	return printers.IsTerminal(o.Out)
}

// terminalWidth is the width of the terminal w is, 0 when unknown (the live line then assumes 80 columns).
func terminalWidth(w any) int {
	f, ok := w.(*os.File)
	if !ok {
		return 0
	}
	width, _, err := term.GetSize(int(f.Fd()))
	if err != nil {
		return 0
	}
	return width
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
