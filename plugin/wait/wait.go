// Package wait is `kubectl trainjob wait NAME... --for=...`: block until TrainJobs reach a stage or a
// condition, with an exit code a script can act on (0 reached, 2 Failed instead, 3 timed out, 1 error).
package wait

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/stage"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/completion"
)

const example = `  # Wait until the TrainJob is Complete; exit 2 if it Failed instead
  kubectl trainjob wait llama-ft --for=Complete

  # Wait until it ends either way (exit 0 for both)
  kubectl trainjob wait llama-ft --for=Complete --for=Failed --timeout=6h

  # Wait until the trainer runs, or for any condition (here one with status False)
  kubectl trainjob wait llama-ft --for=Training
  kubectl trainjob wait llama-ft --for=condition=Suspended=False

  # Wait until it is gone after a delete
  kubectl trainjob wait llama-ft --for=delete`

// WaitOptions are the flags and resolved inputs of `wait`.
type WaitOptions struct {
	Streams cmdutil.Streams

	Names   []string
	For     []string
	Timeout time.Duration

	Namespace string
	Client    client.WithWatch

	targets []target
}

var _ cmdutil.Command = (*WaitOptions)(nil)

// NewWaitOptions returns options writing to streams.
func NewWaitOptions(streams cmdutil.Streams) *WaitOptions {
	return &WaitOptions{Streams: streams}
}

// NewCmdWait is `kubectl trainjob wait`.
func NewCmdWait(f cmdutil.Factory, streams cmdutil.Streams) *cobra.Command {
	return NewCmdWaitWithOptions(f, NewWaitOptions(streams))
}

// NewCmdWaitWithOptions is `wait` with options given, e.g. a Client of the
// caller's (tests), which Complete keeps.
func NewCmdWaitWithOptions(f cmdutil.Factory, o *WaitOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "wait NAME... --for=STAGE|CONDITION",
		Short: "Wait until TrainJobs reach a stage or a condition",
		Long: `Wait until each named TrainJob reaches one of the --for targets. Several --for are ORed
(unlike kubectl wait, which ANDs them): --for=Complete --for=Failed waits for either end.

A target is a stage (` + strings.Join(stage.Names(), ", ") + `; Suspended also
covers spec.suspend before the controller reacts), a condition type that must be True
(ComponentsCreated), condition=TYPE[=STATUS], or delete (until the TrainJob is gone).

Exit codes: 0 every TrainJob reached a target; 2 one Failed while waiting for something else;
3 the timeout expired; 1 any other error (a TrainJob not found, or that ended where no target
can be reached any more).`,
		Example:           example,
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: completion.TrainJobNames(f),
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.RunCommand(f, o, cmd, args)
		},
	}
	cmd.Flags().StringArrayVar(&o.For, "for", o.For, "What to wait for: a stage, a condition type, condition=TYPE[=STATUS] or delete. Repeat (or comma-separate) for any of several.")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", o.Timeout, "Give up after this long (exit code 3). 0 waits as long as it takes: training runs for hours or days.")
	_ = cmd.RegisterFlagCompletionFunc("for", cobra.FixedCompletions(append(stage.Names(), "ComponentsCreated", "condition=", "delete"), cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// Complete resolves the namespace and the client, and parses --for.
func (o *WaitOptions) Complete(f cmdutil.Factory, _ *cobra.Command, args []string) error {
	o.Names = args
	o.targets = nil
	for _, value := range o.For {
		for _, v := range strings.Split(value, ",") {
			t, err := parseTarget(strings.TrimSpace(v))
			if err != nil {
				return err
			}
			o.targets = append(o.targets, t)
		}
	}
	var err error
	o.Namespace, o.Client, err = cmdutil.NamespaceAndClient(f, o.Client)
	return err
}

// Validate requires something to wait for and a sane timeout.
func (o *WaitOptions) Validate() error {
	if len(o.targets) == 0 {
		return errors.New("--for is required: name a stage (e.g. --for=Complete), a condition or delete")
	}
	if o.Timeout < 0 {
		return fmt.Errorf("--timeout must not be negative (0 waits as long as it takes), not %s", o.Timeout)
	}
	return nil
}

// target is one --for value.
type target struct {
	stage     stage.Stage            // a stage, or
	condition string                 // a condition type with status
	status    metav1.ConditionStatus //
	deleted   bool                   // or the TrainJob gone
}

var conditionType = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]*$`)

func parseTarget(v string) (target, error) {
	if strings.EqualFold(v, "delete") || strings.EqualFold(v, "deleted") {
		return target{deleted: true}, nil
	}
	if st, ok := stage.Parse(v); ok {
		return target{stage: st}, nil
	}
	if st, ok := stage.ParseOf(stage.WithQueued, v); ok {
		return target{}, fmt.Errorf("invalid --for %q: wait reads the TrainJob alone, which does not tell %s from Suspended (its Kueue Workload does): "+
			"use --for Suspended, or see them with kubectl trainjob list --stage %s", v, st, st)
	}
	typ, status := v, metav1.ConditionTrue
	if rest, ok := strings.CutPrefix(v, "condition="); ok {
		typ = rest
		if t, s, ok := strings.Cut(rest, "="); ok {
			typ, status = t, metav1.ConditionStatus(s)
		}
		if status != metav1.ConditionTrue && status != metav1.ConditionFalse && status != metav1.ConditionUnknown {
			return target{}, fmt.Errorf("invalid --for %q: a condition's status is True, False or Unknown", v)
		}
	}
	if !conditionType.MatchString(typ) {
		return target{}, fmt.Errorf("invalid --for %q: use a stage (%s), a condition type, condition=TYPE[=STATUS] or delete",
			v, strings.Join(stage.Names(), ", "))
	}
	return target{condition: typ, status: status}, nil
}

func (t target) String() string {
	switch {
	case t.deleted:
		return "deleted"
	case t.stage != "":
		return string(t.stage)
	case t.status == metav1.ConditionTrue:
		return t.condition
	}
	return t.condition + "=" + string(t.status)
}

// met tells whether tj (nil: gone) is at t.
func (t target) met(tj *trainer.TrainJob) bool {
	switch {
	case tj == nil || t.deleted:
		return tj == nil && t.deleted
	case t.stage != "":
		return stage.Of(tj) == t.stage
	}
	c := meta.FindStatusCondition(tj.Status.Conditions, t.condition)
	return c != nil && c.Status == t.status
}

// Run waits for each TrainJob in turn, all within one timeout. A TrainJob that Failed does not stop the
// others; the exit code says so at the end.
func (o *WaitOptions) Run(ctx context.Context) error {
	if o.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Timeout)
		defer cancel()
	}
	var failed []string
	for _, name := range o.Names {
		reached, err := o.waitFor(ctx, name)
		if err != nil {
			return err
		}
		fmt.Fprintf(o.Streams.Out, "trainjob.trainer.kubeflow.org/%s %s\n", name, reached)
		if strings.HasPrefix(reached, string(stage.Failed)+":") {
			failed = append(failed, name)
		}
	}
	if len(failed) > 0 {
		return cmdutil.WithExitCode(cmdutil.ExitFailed, fmt.Errorf("TrainJob %s Failed while waiting for %s", strings.Join(failed, ", "), o.wanted()))
	}
	return nil
}

func (o *WaitOptions) wanted() string {
	var s []string
	for _, t := range o.targets {
		s = append(s, t.String())
	}
	return strings.Join(s, " or ")
}

// rereadInterval is how often wait reads a TrainJob that did not change.
const rereadInterval = 10 * time.Second

// waitFor returns what the TrainJob reached: a target, or "Failed: reason" when it Failed instead.
func (o *WaitOptions) waitFor(ctx context.Context, name string) (string, error) {
	watchCtx, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	// The regular reads tell what a watch cannot: that the user lost the right to read the TrainJob.
	changes, err := cmdutil.Changes(watchCtx, o.Client, rereadInterval, cmdutil.Watch{
		Object: &trainer.TrainJob{}, Namespace: o.Namespace, Options: []client.ListOption{client.MatchingFields{"metadata.name": name}}})
	if err != nil {
		return "", err
	}
	seen := false
	for {
		tj := &trainer.TrainJob{}
		err := o.Client.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: name}, tj)
		switch {
		case apierrors.IsNotFound(err):
			tj = nil
		case err != nil && ctx.Err() == nil:
			return "", cmdutil.DescribeError(err, o.Namespace, name)
		}
		if ctx.Err() != nil {
			return "", o.timedOut(ctx, name)
		}
		for _, t := range o.targets {
			if t.met(tj) {
				return t.String(), nil
			}
		}
		if tj == nil {
			if seen {
				return "", fmt.Errorf("%s %q was deleted while waiting for %s", cmdutil.Resource, name, o.wanted())
			}
			return "", cmdutil.DescribeError(err, o.Namespace, name)
		}
		seen = true
		switch st := stage.Of(tj); st {
		case stage.Failed:
			c := meta.FindStatusCondition(tj.Status.Conditions, trainer.TrainJobFailed)
			return fmt.Sprintf("%s: %s: %s", st, c.Reason, c.Message), nil
		case stage.Complete:
			if !o.waitsForCondition() {
				return "", fmt.Errorf("%s %q is Complete and will not be %s any more", cmdutil.Resource, name, o.wanted())
			}
		}
		select {
		case <-ctx.Done():
			return "", o.timedOut(ctx, name)
		case <-changes:
		}
	}
}

// waitsForCondition tells whether a target is a condition, which a Complete TrainJob may still gain.
func (o *WaitOptions) waitsForCondition() bool {
	for _, t := range o.targets {
		if t.condition != "" || t.deleted {
			return true
		}
	}
	return false
}

func (o *WaitOptions) timedOut(ctx context.Context, name string) error {
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return ctx.Err()
	}
	now := "it was not found"
	tj := &trainer.TrainJob{}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := o.Client.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: name}, tj); err == nil {
		now = "it is " + string(stage.Of(tj))
	}
	return cmdutil.WithExitCode(cmdutil.ExitTimeout, fmt.Errorf("timed out after %s waiting for %s %q to be %s (%s)",
		o.Timeout, cmdutil.Resource, name, o.wanted(), now))
}
