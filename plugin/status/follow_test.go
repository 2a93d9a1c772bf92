package status

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/stage"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/failure"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/printers"
)

// followed feeds summaries to a follower with opts, each taken at its recorded time, and returns what it
// printed, line by line.
func followed(t *testing.T, opts FollowOptions, summaries ...Summary) []string {
	t.Helper()
	var out bytes.Buffer
	opts.Out = &out
	f := &follower{opts: opts, seen: map[string]bool{}}
	for i := range summaries {
		s := summaries[i]
		s.Created = metav1.NewTime(created)
		if err := f.emit(&s); err != nil {
			t.Fatal(err)
		}
	}
	return strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
}

// transition is a line as WriteTransition prints it, d after creation.
func transition(d time.Duration, text string) string {
	return fmt.Sprintf("%s  %-8s  %s", printers.Clock(at(d)), printers.Delta(d), text)
}

func entry(d time.Duration, source, typ, status, reason string) TimelineEntry {
	return TimelineEntry{Time: at(d), Source: source, Type: typ, Status: status, Reason: reason}
}

func spans(init, train *metav1.Time) []StageSpan {
	c := metav1.NewTime(created)
	return []StageSpan{{Name: stage.Pending, Start: &c, End: init}, {Name: stage.Initializing, Start: init}, {Name: stage.Training, Start: train}}
}

var createdEntry = TimelineEntry{Time: metav1.NewTime(created), Source: SourceCreated}

// TestFollowerEmit follows the summaries `status -w` saw in the demo, off a terminal: every line comes out
// once, oldest first. The history's stage line is dated by when its stage began; a change of stage seen live
// by the newest time the cluster recorded when it was seen, not by when its stage's first Job was created
// (which lies before lines already printed, or long ago when the stage comes back).
func TestFollowerEmit(t *testing.T) {
	timeline := []TimelineEntry{createdEntry, entry(0, SourceEvent, "Normal", "", "JobsCreated")}
	got := followed(t, FollowOptions{Lines: true},
		// The history: the stage began (1s) before the last timeline entry (3s).
		Summary{Stage: stage.Initializing, Reason: "running dataset-initializer", Stages: spans(atp(time.Second), nil), recorded: at(3 * time.Second),
			Timeline: append(timeline, entry(3*time.Second, SourceEvent, "Warning", "", "BackOff"))},
		// The trainer's pods became ready at 6s.
		Summary{Stage: stage.Training, Reason: "running node", Stages: spans(atp(time.Second), atp(5*time.Second)), recorded: at(6 * time.Second), Timeline: timeline},
		// The trainer's Jobs ended at 9s and no count says so yet: the stage comes back; its span began at 1s.
		Summary{Stage: stage.Initializing, Reason: "initializers done, waiting for the trainer's Jobs", Stages: spans(atp(time.Second), nil),
			recorded: at(9 * time.Second), Timeline: timeline},
		Summary{Stage: stage.Complete, Reason: "AllJobsCompleted", Stages: spans(atp(time.Second), atp(5*time.Second)), recorded: at(10 * time.Second),
			Timeline: append(timeline, entry(10*time.Second, SourceCondition, "Complete", "True", "AllJobsCompleted"))},
	)
	want := []string{
		transition(0, "Created"),
		transition(0, "Event Normal  JobsCreated"),
		transition(time.Second, "Initializing  running dataset-initializer"),
		transition(3*time.Second, "Event Warning  BackOff"),
		transition(6*time.Second, "Training  running node"),
		transition(9*time.Second, "Initializing  initializers done, waiting for the trainer's Jobs"),
		transition(10*time.Second, "Complete=True  AllJobsCompleted"),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
}

// TestFollowerTimeOrder: the lines off a terminal are in time order, each with the time the cluster recorded.
// Before, a change of stage seen live was dated by this machine's clock: with that clock ahead of the
// cluster's (here by two minutes, as a test's pinned clock is, or a laptop's that drifted), the stage line
// came after lines of the cluster's that followed it ("Training +2m" before "Complete=True +90s"). An Event
// that reaches the API server after a later line was printed is printed at the last line's time, with its own.
func TestFollowerTimeOrder(t *testing.T) {
	got := followed(t, FollowOptions{Lines: true},
		Summary{Stage: stage.Pending, Reason: "waiting for the controller to create JobSet tj", Stages: spans(nil, nil),
			recorded: at(0), Timeline: []TimelineEntry{createdEntry}},
		// Only jobsStatus says the trainer started, and its pods became ready at 20s.
		Summary{Stage: stage.Training, Reason: "running node", Stages: spans(nil, atp(12*time.Second)), recorded: at(20 * time.Second),
			Timeline: []TimelineEntry{createdEntry}},
		// Nothing newer recorded than the last line: the reason changed after it.
		Summary{Stage: stage.Training, Reason: "running node (2/2 pods running)", Stages: spans(nil, atp(12*time.Second)), recorded: at(15 * time.Second),
			Timeline: []TimelineEntry{createdEntry}},
		// An Event of 18s, written after the lines of 20s were printed.
		Summary{Stage: stage.Training, Reason: "running node (2/2 pods running)", Stages: spans(nil, atp(12*time.Second)), recorded: at(20 * time.Second),
			Timeline: []TimelineEntry{createdEntry, entry(18*time.Second, SourceEvent, "Warning", "", "NodeLost")}},
		Summary{Stage: stage.Complete, Reason: "AllJobsCompleted", Stages: spans(nil, atp(12*time.Second)), recorded: at(90 * time.Second),
			Timeline: []TimelineEntry{createdEntry, entry(18*time.Second, SourceEvent, "Warning", "", "NodeLost"),
				entry(90*time.Second, SourceCondition, "Complete", "True", "AllJobsCompleted")}},
	)
	want := []string{
		transition(0, "Created"),
		transition(0, "Pending  waiting for the controller to create JobSet tj"),
		transition(20*time.Second, "Training  running node"),
		transition(20*time.Second, "Training  running node (2/2 pods running)"),
		transition(20*time.Second, "Event Warning  NodeLost (at "+printers.Clock(at(18*time.Second))+", reported late)"),
		transition(90*time.Second, "Complete=True  AllJobsCompleted"),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
}

// TestFollowerProgressAndFailure: a progress report is a line when it changes, dated by its lastUpdatedTime (the
// same report read again, or without its time left once the TrainJob ended, is not); the first failed container
// is a line once, dated by when it terminated. create --wait off a terminal prints the progress lines only.
func TestFollowerProgressAndFailure(t *testing.T) {
	progress := func(pct int32, left int32, loss string, d time.Duration) *Progress {
		return &Progress{Percentage: ptr.To(pct), RemainingSeconds: ptr.To(left), Metrics: []trainer.Metric{{Name: "loss", Value: loss}}, LastUpdated: at(d)}
	}
	oom := &failure.Failure{Pod: "tj-node-0-1-x", ReplicatedJob: "node", Rank: "1", Node: "gpu-node-1", Container: "node",
		Time: atp(40 * time.Second), Reason: "OOMKilled", ExitCode: ptr.To[int32](137), Signal: "SIGKILL"}
	failed := entry(41*time.Second, SourceCondition, "Failed", "True", "FailedJobs")
	summaries := []Summary{
		{Stage: stage.Training, Reason: "running node", Stages: spans(nil, atp(5*time.Second)), recorded: at(20 * time.Second),
			Timeline: []TimelineEntry{createdEntry}, Progress: progress(10, 600, "2.31", 20*time.Second)},
		// The same report, read again.
		{Stage: stage.Training, Reason: "running node", Stages: spans(nil, atp(5*time.Second)), recorded: at(20 * time.Second),
			Timeline: []TimelineEntry{createdEntry}, Progress: progress(10, 600, "2.31", 20*time.Second)},
		{Stage: stage.Training, Reason: "running node", Stages: spans(nil, atp(5*time.Second)), recorded: at(30 * time.Second),
			Timeline: []TimelineEntry{createdEntry}, Progress: progress(45, 330, "1.27", 30*time.Second)},
		{Stage: stage.Failed, Reason: "FailedJobs", Stages: spans(nil, atp(5*time.Second)), recorded: at(41 * time.Second),
			Timeline: []TimelineEntry{createdEntry, failed}, Progress: progress(45, 330, "1.27", 30*time.Second), FirstFailure: oom},
	}
	for _, tc := range []struct {
		name string
		opts FollowOptions
		want []string
	}{{
		name: "status -w",
		opts: FollowOptions{Lines: true},
		want: []string{
			transition(0, "Created"),
			transition(5*time.Second, "Training  running node"),
			transition(20*time.Second, "Progress  10%, about 10m left, loss=2.31"),
			transition(30*time.Second, "Progress  45%, about 5m30s left, loss=1.27"),
			transition(40*time.Second, "First failure  pod tj-node-0-1-x (node rank 1, on gpu-node-1) container node: OOMKilled, exit code 137 (SIGKILL)"),
			transition(41*time.Second, "Failed=True  FailedJobs"),
		},
	}, {
		name: "create --wait off a terminal",
		opts: FollowOptions{ProgressLines: true},
		want: []string{
			transition(20*time.Second, "Progress  10%, about 10m left, loss=2.31"),
			transition(30*time.Second, "Progress  45%, about 5m30s left, loss=1.27"),
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, followed(t, tc.opts, summaries...)); diff != "" {
				t.Errorf("lines (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFollowerLive: on a terminal, create keeps one line at the bottom, redrawn in place only when it changes,
// under the lines of --follow; it is cut to the terminal's width, so that a redraw erases all of it.
func TestFollowerLive(t *testing.T) {
	running := Summary{Stage: stage.Training, Reason: "running node", Stages: spans(nil, atp(5*time.Second)), recorded: at(20 * time.Second),
		Timeline: []TimelineEntry{createdEntry}}
	reporting := running
	reporting.Progress = &Progress{Percentage: ptr.To[int32](45), RemainingSeconds: ptr.To[int32](330),
		Metrics: []trainer.Metric{{Name: "loss", Value: "1.27"}, {Name: "tokens_per_sec", Value: "5100"}}, LastUpdated: at(30 * time.Second)}
	for _, tc := range []struct {
		name string
		opts FollowOptions
		want string
	}{{
		name: "--wait",
		opts: FollowOptions{Live: true, Width: 120},
		want: eraseLine + "Training: running node" + eraseLine + "Training  [#########-----------] 45%, about 5m30s left, loss=1.27 tokens_per_sec=5100",
	}, {
		name: "--wait on a narrow terminal",
		opts: FollowOptions{Live: true, Width: 40},
		want: eraseLine + "Training: running node" + eraseLine + "Training  [#########-----------] 45%, …",
	}, {
		name: "--follow",
		opts: FollowOptions{Live: true, Lines: true, Width: 120},
		want: transition(0, "Created") + "\n" + transition(5*time.Second, "Training  running node") + "\n" + "Training: running node" +
			eraseLine + transition(30*time.Second, "Progress  45%, about 5m30s left, loss=1.27 tokens_per_sec=5100") + "\n" +
			"Training  [#########-----------] 45%, about 5m30s left, loss=1.27 tokens_per_sec=5100",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := strings.Join(followed(t, tc.opts, running, running, reporting, reporting), "\n")
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
		})
	}
}
