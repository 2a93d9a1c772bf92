package status

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/stage"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/printers"
)

// TestFollowerEmit follows the summaries `status -w` saw in the demo, off a terminal: every line comes out
// once, oldest first, and a change of stage seen live is dated when it was seen, not when its stage's first
// Job was created (which lies before lines already printed, or long ago when the stage comes back).
func TestFollowerEmit(t *testing.T) {
	created := metav1.NewTime(created)
	entry := func(d time.Duration, source, typ, status, reason string) TimelineEntry {
		return TimelineEntry{Time: at(d), Source: source, Type: typ, Status: status, Reason: reason}
	}
	spans := func(init, train *metav1.Time) []StageSpan {
		return []StageSpan{{Name: stage.Pending, Start: &created, End: init}, {Name: stage.Initializing, Start: init}, {Name: stage.Training, Start: train}}
	}
	timeline := []TimelineEntry{{Time: created, Source: SourceCreated}, entry(0, SourceEvent, "Normal", "", "JobsCreated")}
	summaries := []struct {
		now time.Duration
		s   Summary
	}{{
		// The history: the stage began (1s) before the last timeline entry (3s).
		now: 4 * time.Second,
		s: Summary{Stage: stage.Initializing, Reason: "running dataset-initializer", Stages: spans(atp(time.Second), nil),
			Timeline: append(timeline, entry(3*time.Second, SourceEvent, "Warning", "", "BackOff"))},
	}, {
		// Seen at 6s: the trainer's Job was created at 5s.
		now: 6 * time.Second,
		s:   Summary{Stage: stage.Training, Reason: "running node", Stages: spans(atp(time.Second), atp(5*time.Second))},
	}, {
		// The trainer's Jobs ended and no count says so yet: the stage comes back; its span began at 1s.
		now: 9 * time.Second,
		s:   Summary{Stage: stage.Initializing, Reason: "initializers done, waiting for the trainer's Jobs", Stages: spans(atp(time.Second), nil)},
	}, {
		now: 10 * time.Second,
		s: Summary{Stage: stage.Complete, Reason: "AllJobsCompleted", Stages: spans(atp(time.Second), atp(5*time.Second)),
			Timeline: []TimelineEntry{entry(10*time.Second, SourceCondition, "Complete", "True", "AllJobsCompleted")}},
	}}
	f := &follower{seen: map[string]bool{}}
	var out bytes.Buffer
	for _, step := range summaries {
		step.s.Created = created
		step.s.Timeline = append(step.s.Timeline, timeline...)
		if err := f.emit(&out, &step.s, created.Add(step.now), false); err != nil {
			t.Fatal(err)
		}
	}
	line := func(d time.Duration, text string) string {
		return fmt.Sprintf("%s  %-8s  %s", printers.Clock(at(d)), printers.Delta(d), text)
	}
	want := []string{
		line(0, "Created"),
		line(0, "Event Normal  JobsCreated"),
		line(time.Second, "Initializing  running dataset-initializer"),
		line(3*time.Second, "Event Warning  BackOff"),
		line(6*time.Second, "Training  running node"),
		line(9*time.Second, "Initializing  initializers done, waiting for the trainer's Jobs"),
		line(10*time.Second, "Complete=True  AllJobsCompleted"),
	}
	if diff := cmp.Diff(want, strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
}
