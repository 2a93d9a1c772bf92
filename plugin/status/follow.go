package status

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/stage"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/kueue"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/printers"
)

// Following reads the whole picture again after every change it is told about, and at least this often
// (so ages move on a terminal and a watch the user may not open costs nothing but latency).
const (
	resyncInterval = 10 * time.Second
	// settle gathers a burst of changes (a watch's initial list, a pod's several updates) into one read.
	settle = 100 * time.Millisecond
)

// Follow prints a TrainJob's transitions to out until it is Complete or Failed: first its timeline so far,
// then each new timeline entry and each change of stage or of its reason, one line each. It returns the
// final stage. `create --follow` and `status -w` off a terminal use it. kc reads what Kueue says of a
// TrainJob in a LocalQueue (nil: nothing).
func Follow(ctx context.Context, c client.WithWatch, kc *kueue.Client, namespace, name string, out io.Writer, clk clock.PassiveClock, color bool) (stage.Stage, error) {
	f := &follower{seen: map[string]bool{}}
	return follow(ctx, c, kc, namespace, name, clk, func(s *Summary) error { return f.emit(out, s, clk.Now(), color) })
}

// redraw follows the TrainJob on a terminal, drawing the whole screen in place on every change.
func (o *StatusOptions) redraw(ctx context.Context) error {
	var frame bytes.Buffer
	return exitFor(o.Name)(follow(ctx, o.Client, o.Kueue, o.Namespace, o.Name, o.Clock, func(s *Summary) error {
		frame.Reset()
		frame.WriteString(printers.ClearScreen)
		if err := Render(&frame, s, o.Clock.Now(), o.Color); err != nil {
			return err
		}
		_, err := o.Streams.Out.Write(frame.Bytes())
		return err
	}))
}

// exitFor turns the outcome of following TrainJob name into the command's error: exit code 2 when it Failed.
func exitFor(name string) func(stage.Stage, error) error {
	return func(st stage.Stage, err error) error {
		if err != nil {
			return err
		}
		if st == stage.Failed {
			return cmdutil.WithExitCode(cmdutil.ExitFailed, fmt.Errorf("%s %q Failed", cmdutil.Resource, name))
		}
		return nil
	}
}

// follow calls show with a fresh summary after every change to the TrainJob, its pods or the namespace's
// Events (Kueue records one at each step of a Workload), until the TrainJob is terminal.
func follow(ctx context.Context, c client.WithWatch, kc *kueue.Client, namespace, name string, clk clock.PassiveClock, show func(*Summary) error) (stage.Stage, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Watch first, then read: no change can fall between the two.
	changes, err := cmdutil.Changes(ctx, c, resyncInterval,
		cmdutil.Watch{Object: &trainer.TrainJob{}, Namespace: namespace, Options: []client.ListOption{client.MatchingFields{"metadata.name": name}}},
		cmdutil.Watch{Object: &corev1.Pod{}, Namespace: namespace, Options: []client.ListOption{client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: name}}},
		cmdutil.Watch{Object: &corev1.Event{}, Namespace: namespace},
	)
	if err != nil {
		return "", err
	}
	for {
		in, err := Fetch(ctx, c, kc, namespace, name)
		if err != nil {
			return "", err
		}
		s := Summarize(in, clk.Now())
		if err := show(s); err != nil {
			return "", err
		}
		if s.Stage.Terminal() {
			return s.Stage, nil
		}
		select {
		case <-ctx.Done():
			return s.Stage, ctx.Err()
		case <-changes:
		}
		select {
		case <-ctx.Done():
		case <-time.After(settle):
		}
		select { // a change during the pause is read below anyway
		case <-changes:
		default:
		}
	}
}

// follower turns successive summaries into transition lines, each printed once, oldest first.
type follower struct {
	seen      map[string]bool
	started   bool // the first summary (the history so far) has been printed
	stage     stage.Stage
	stageLine string
}

// emit prints what s holds that was not printed yet: new timeline entries at their times, and the stage line
// when the stage or its reason changed. All of them are sorted by time before they are printed.
//
// The stage line of the first summary belongs to the history: it is dated by when the stage began, if known.
// A later change of stage or of reason is dated by when it was seen (now): the summary does not say when it
// happened, and the span start it holds (when the stage's first Job was created) may lie before lines
// already printed, or long ago when the stage comes back (a Job restarting, or finishing before the
// controller marks the TrainJob Complete).
func (f *follower) emit(w io.Writer, s *Summary, now time.Time, color bool) error {
	var lines []printers.Transition
	for _, e := range s.Timeline {
		key := fmt.Sprintf("%s|%s|%s|%s|%s|%s", e.Source, e.Type, e.Status, e.Reason, e.Message, e.Time.UTC().Format(time.RFC3339))
		if f.seen[key] {
			continue
		}
		f.seen[key] = true
		lines = append(lines, printers.Transition{Time: e.Time, Subject: e.What(), Text: joinReason(e.Reason, withCount(e.Message, e.Count))})
	}
	if line := s.StageLine(); line != f.stageLine {
		if !f.stated(s) {
			at := metav1.NewTime(now)
			if !f.started {
				for _, sp := range s.Stages {
					if sp.Name == s.Stage && sp.Start != nil {
						at = *sp.Start
					}
				}
			}
			lines = append(lines, printers.Transition{Time: at, Subject: string(s.Stage), Text: s.Reason})
		}
		f.stageLine, f.stage = line, s.Stage
	}
	f.started = true
	slices.SortStableFunc(lines, func(a, b printers.Transition) int { return a.Time.Compare(b.Time.Time) })
	for _, l := range lines {
		l.Since = l.Time.Sub(s.Created.Time)
		if err := printers.WriteTransition(w, l, color); err != nil {
			return err
		}
	}
	return nil
}

// stated tells whether the timeline already said the new stage: the condition of a terminal or suspended
// stage is True and was printed.
func (f *follower) stated(s *Summary) bool {
	if s.Stage == f.stage {
		return false
	}
	for _, e := range s.Timeline {
		if e.Source == SourceCondition && e.Type == string(s.Stage) && e.Status == string(metav1.ConditionTrue) {
			return true
		}
	}
	return false
}
