package status

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

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

// FollowOptions say which TrainJob Follow follows and what it prints.
type FollowOptions struct {
	Client    client.WithWatch
	Kueue     *kueue.Client
	Namespace string
	Name      string
	Out       io.Writer
	// Clock gives "now" to the summaries (the durations of running stages); the lines are dated by the
	// cluster's records, never by this clock.
	Clock clock.PassiveClock
	Color bool
	// Lines prints a line per transition, oldest first: each new timeline entry, change of stage or of its
	// reason, report of the trainer's progress, and the first failed container (status -w off a terminal,
	// create --follow).
	Lines bool
	// ProgressLines prints a line per report of the trainer's progress only (create --wait off a terminal).
	ProgressLines bool
	// Live keeps one line at the bottom of a terminal, redrawn in place: the stage and why, or a progress bar
	// with the time left and the latest metrics (create --wait and --follow on a terminal). It is erased when
	// the TrainJob ends. Width is the terminal's (0: 80 columns): the line is cut to fit, so that it can be
	// redrawn.
	Live  bool
	Width int
}

// Follow prints what opts ask for about a TrainJob until it is Complete or Failed, and returns the final stage.
// `status -w` off a terminal and `create --wait|--follow` use it.
func Follow(ctx context.Context, opts FollowOptions) (stage.Stage, error) {
	f := &follower{opts: opts, seen: map[string]bool{}}
	st, err := follow(ctx, Reader{Client: opts.Client, Kueue: opts.Kueue}, opts.Client, opts.Namespace, opts.Name, opts.Clock,
		f.emit)
	if f.live != "" {
		_, _ = io.WriteString(opts.Out, eraseLine)
	}
	return st, err
}

// eraseLine moves the cursor to the start of its line and erases the line: a live line is redrawn in place.
const eraseLine = "\r\x1b[K"

// redraw follows the TrainJob on a terminal, drawing the whole screen in place on every change.
func (o *StatusOptions) redraw(ctx context.Context) error {
	var frame bytes.Buffer
	rd := Reader{Client: o.Client, Kueue: o.Kueue, Logs: o.Logs}
	return exitFor(o.Name)(follow(ctx, rd, o.Client, o.Namespace, o.Name, o.Clock, func(s *Summary) error {
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

// Watches are what changes a TrainJob's summary: the TrainJob, its pods and the namespace's Events (Kueue
// records one at each step of a Workload). `status -w` and the dashboard's page of one TrainJob read it again
// after each change, so the pods and the Events are watched as metadata (whose resourceVersion changes with
// every change), without their managedFields: a TrainJob of 1 024 pods is not held twice.
func Watches(namespace, name string) []cmdutil.Watch {
	return []cmdutil.Watch{
		{Object: &trainer.TrainJob{}, Namespace: namespace, Options: []client.ListOption{client.MatchingFields{"metadata.name": name}}},
		{Object: metadataOf(corev1.SchemeGroupVersion.WithKind("Pod")), Namespace: namespace, Options: []client.ListOption{cmdutil.ChildrenOf(name)},
			Transform: cmdutil.StripManagedFields},
		{Object: metadataOf(corev1.SchemeGroupVersion.WithKind("Event")), Namespace: namespace, Transform: cmdutil.StripManagedFields},
	}
}

// metadataOf is an object of kind gvk watched as its metadata.
func metadataOf(gvk schema.GroupVersionKind) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(gvk)
	return m
}

// follow calls show with a fresh summary after every change to the TrainJob, its pods or the namespace's
// Events (Kueue records one at each step of a Workload), until the TrainJob is terminal.
func follow(ctx context.Context, rd Reader, c client.WithWatch, namespace, name string, clk clock.PassiveClock, show func(*Summary) error) (stage.Stage, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Watch first, then read: no change can fall between the two.
	changes, err := cmdutil.Changes(ctx, c, resyncInterval, Watches(namespace, name)...)
	if err != nil {
		return "", err
	}
	for {
		in, err := Fetch(ctx, rd, namespace, name)
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

// follower turns successive summaries into lines, each printed once, in time order.
//
// Every line is dated by what the cluster recorded, never by this machine's clock, whose time may differ from
// the cluster's: a timeline entry by its own time, a progress report by its lastUpdatedTime, a failure by when
// the container terminated. A change of stage or of its reason has no time of its own: the first summary's
// (the history) is dated by when the stage began, if known; a later one by the newest time the cluster
// recorded when it was seen (Summary.recorded, at or after the change), and never before the last line
// printed, since it was not there when that line was read. A line recorded after later ones were printed (an
// Event written late) is printed at the time of the last line, with its own time in its text: the lines stay
// in time order and no time is wrong.
type follower struct {
	opts      FollowOptions
	seen      map[string]bool
	started   bool // the first summary (the history so far) has been printed
	stage     stage.Stage
	stageLine string
	progress  string      // the progress report printed last
	last      metav1.Time // the time of the last line printed
	live      string      // the live line on the terminal, "" when none
}

// line is one line to print; recorded is false for a line whose time is ours (a change of stage), not the
// cluster's.
type line struct {
	printers.Transition
	recorded bool
}

// emit prints what s holds that was not printed yet, sorted by time, then redraws the live line.
func (f *follower) emit(s *Summary) error {
	o := f.opts
	var lines []line
	if o.Lines {
		lines = append(lines, f.timelineLines(s)...)
		lines = append(lines, f.failureLine(s)...)
		lines = append(lines, f.stageLines(s)...)
	}
	if o.Lines || o.ProgressLines {
		lines = append(lines, f.progressLine(s)...)
	}
	f.started = true
	slices.SortStableFunc(lines, func(a, b line) int { return a.Time.Compare(b.Time.Time) })
	var out strings.Builder
	if f.live != "" && len(lines) > 0 {
		out.WriteString(eraseLine)
	}
	for _, l := range lines {
		if l.Time.Before(&f.last) {
			if l.recorded {
				l.Text = strings.TrimSpace(l.Text + " (at " + printers.Clock(l.Time) + ", reported late)")
			}
			l.Time = f.last
		}
		f.last = l.Time
		l.Since = l.Time.Sub(s.Created.Time)
		var b bytes.Buffer
		if err := printers.WriteTransition(&b, l.Transition, o.Color); err != nil {
			return err
		}
		out.Write(b.Bytes())
	}
	switch {
	case o.Live && !s.Stage.Terminal(): // once the TrainJob ended, Follow erases the live line
		if text := f.liveLine(s); text != f.live || len(lines) > 0 {
			if len(lines) == 0 {
				out.WriteString(eraseLine)
			}
			out.WriteString(text)
			f.live = text
		}
	case len(lines) > 0:
		f.live = "" // erased above
	}
	_, err := io.WriteString(o.Out, out.String())
	return err
}

// timelineLines are the timeline entries not printed yet.
func (f *follower) timelineLines(s *Summary) []line {
	var lines []line
	for _, e := range s.Timeline {
		key := fmt.Sprintf("%s|%s|%s|%s|%s|%s", e.Source, e.Type, e.Status, e.Reason, e.Message, e.Time.UTC().Format(time.RFC3339))
		if f.seen[key] {
			continue
		}
		f.seen[key] = true
		lines = append(lines, line{printers.Transition{Time: e.Time, Subject: e.What(), Text: joinReason(e.Reason, withCount(e.Message, e.Count))}, true})
	}
	return lines
}

// failureLine is the first failed container, once (a crash-looping one is not printed again at every crash):
// what `status` shows first about a Failed TrainJob.
func (f *follower) failureLine(s *Summary) []line {
	ff := s.FirstFailure
	if ff == nil {
		return nil
	}
	at := s.recorded
	if ff.Time != nil {
		at = *ff.Time
	}
	key := "failure|" + ff.Pod + "|" + ff.Container + "|" + ff.Job
	if f.seen[key] {
		return nil
	}
	f.seen[key] = true
	return []line{{printers.Transition{Time: at, Subject: "First failure", Text: ff.Where() + ": " + ff.Text()}, ff.Time != nil}}
}

// stageLines is the stage line when the stage or its reason changed, unless the timeline says it already
// (the True condition of a terminal or suspended stage).
func (f *follower) stageLines(s *Summary) []line {
	text := s.StageLine()
	if text == f.stageLine {
		return nil
	}
	stated := f.stated(s)
	f.stageLine, f.stage = text, s.Stage
	if stated {
		return nil
	}
	at := s.recorded
	if !f.started {
		for _, sp := range s.Stages {
			if sp.Name == s.Stage && sp.Start != nil {
				at = *sp.Start
			}
		}
	} else if at.Before(&f.last) {
		at = f.last
	}
	return []line{{printers.Transition{Time: at, Subject: string(s.Stage), Text: s.Reason}, false}}
}

// progressLine is the trainer's report when it changed (a new report, not the same one read again, nor its
// time left dropped once the TrainJob ended).
func (f *follower) progressLine(s *Summary) []line {
	p := s.Progress
	if p == nil {
		return nil
	}
	key := fmt.Sprintf("%d|%d|%v|%s", ptr.Deref(p.Percentage, -1), ptr.Deref(p.RemainingSeconds, -1), p.Metrics, p.LastUpdated.UTC().Format(time.RFC3339))
	text := progressText(p, s.Stage.Terminal())
	if key == f.progress || text == "" {
		return nil
	}
	f.progress = key
	at, recorded := p.LastUpdated, true
	if at.IsZero() {
		at, recorded = s.recorded, false
	}
	return []line{{printers.Transition{Time: at, Subject: "Progress", Text: text}, recorded}}
}

// liveLine is the line kept at the bottom of a terminal: the stage with a progress bar, the time left and the
// latest metrics, or with why it is there; cut to the terminal's width.
func (f *follower) liveLine(s *Summary) string {
	text := s.StageLine()
	if p := s.Progress; p != nil && p.Percentage != nil {
		text = string(s.Stage) + "  " + withBar(p, progressText(p, s.Stage.Terminal()))
	}
	text = printers.Escape(text)
	width := f.opts.Width
	if width <= 0 {
		width = 80
	}
	if r := []rune(text); len(r) >= width {
		text = string(r[:width-2]) + "…"
	}
	return printers.Colorize(text, f.opts.Color)
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
