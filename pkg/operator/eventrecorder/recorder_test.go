package eventrecorder

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// clock is a settable now.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newTestRecorder() (*Recorder, *clock) {
	c := &clock{t: time.Date(2026, 12, 3, 7, 0, 0, 0, time.UTC)}
	r := New(nil, runtime.NewScheme(), "test")
	r.now = c.now
	return r, c
}

var regarding = &corev1.ObjectReference{Kind: "TrainJob", APIVersion: "trainer.kubeflow.org/v1alpha1", Namespace: "ns", Name: "tj", UID: "u1", ResourceVersion: "7"}

// TestSeries: an isomorphic Event folds into the series of the first (same name, counted), is written again only
// every refreshAfter once it repeats more than twice, and starts a new series after seriesWindow of silence.
func TestSeries(t *testing.T) {
	r, c := newTestRecorder()
	k := newKey("Normal", "Reconciling", "Created", regarding, nil)
	first := r.next(k, "Normal", "Reconciling", "Created", regarding, nil, "note")
	if first == nil || first.Series != nil || first.Namespace != "ns" || first.Reason != "Created" || first.Note != "note" {
		t.Fatalf("first Event %+v", first)
	}
	c.t = c.t.Add(time.Second)
	second := r.next(k, "Normal", "Reconciling", "Created", regarding, nil, "note")
	if second == nil || second.Name != first.Name || second.Series == nil || second.Series.Count != 2 {
		t.Fatalf("second Event %+v, want the series of %s with count 2", second, first.Name)
	}
	c.t = c.t.Add(time.Second)
	if third := r.next(k, "Normal", "Reconciling", "Created", regarding, nil, "note"); third != nil {
		t.Fatalf("third Event %+v, want none (written less than %v ago)", third, refreshAfter)
	}
	// Keep the series alive past refreshAfter, one occurrence every five minutes.
	for range 5 {
		c.t = c.t.Add(5 * time.Minute)
		if ev := r.next(k, "Normal", "Reconciling", "Created", regarding, nil, "note"); ev != nil {
			t.Fatalf("Event %+v less than %v after the last written, want none", ev, refreshAfter)
		}
	}
	c.t = c.t.Add(5*time.Minute + time.Second)
	refreshed := r.next(k, "Normal", "Reconciling", "Created", regarding, nil, "note")
	if refreshed == nil || refreshed.Name != first.Name || refreshed.Series.Count != 9 {
		t.Fatalf("Event %v after the last written: %+v, want the series of %s with count 9", refreshAfter, refreshed, first.Name)
	}
	c.t = c.t.Add(seriesWindow + time.Minute)
	fresh := r.next(k, "Normal", "Reconciling", "Created", regarding, nil, "note")
	if fresh == nil || fresh.Name == first.Name || fresh.Series != nil {
		t.Fatalf("Event after %v of silence: %+v, want a new Event", seriesWindow, fresh)
	}
}

// TestKey: Events differing in any field client-go compares are not isomorphic.
func TestKey(t *testing.T) {
	base := newKey("Normal", "A", "R", regarding, nil)
	other := *regarding
	other.ResourceVersion = "8"
	related := &corev1.ObjectReference{Kind: "JobSet", Name: "tj"}
	for name, k := range map[string]key{
		"type":                       newKey("Warning", "A", "R", regarding, nil),
		"action":                     newKey("Normal", "B", "R", regarding, nil),
		"reason":                     newKey("Normal", "A", "S", regarding, nil),
		"regarding resourceVersion":  newKey("Normal", "A", "R", &other, nil),
		"related":                    newKey("Normal", "A", "R", regarding, related),
		"fields moved between parts": newKey("Normal", "AR", "", regarding, nil),
	} {
		if k == base {
			t.Errorf("%s differs, but the key is the same", name)
		}
	}
	if again := newKey("Normal", "A", "R", regarding.DeepCopy(), nil); again != base {
		t.Error("the same Event has another key")
	}
}

// TestSweepWhenIdle: the series past their window are forgotten without any new Event.
func TestSweepWhenIdle(t *testing.T) {
	r, c := newTestRecorder()
	for _, name := range []string{"a", "b", "c"} {
		ref := regarding.DeepCopy()
		ref.Name = name
		r.next(newKey("Normal", "A", "R", ref, nil), "Normal", "A", "R", ref, nil, "")
	}
	c.t = c.t.Add(2 * time.Minute)
	r.next(newKey("Normal", "A", "R", regarding, nil), "Normal", "A", "R", regarding, nil, "")
	if n := r.remembered(); n != 4 {
		t.Fatalf("remembered %d series, want 4", n)
	}
	c.t = c.t.Add(seriesWindow - time.Minute)
	r.sweep()
	if n := r.remembered(); n != 1 {
		t.Fatalf("after %v, remembered %d series, want 1 (the latest)", seriesWindow+time.Minute, n)
	}
	c.t = c.t.Add(2 * time.Minute)
	r.sweep()
	if n := r.remembered(); n != 0 {
		t.Fatalf("remembered %d series, want none", n)
	}
}
