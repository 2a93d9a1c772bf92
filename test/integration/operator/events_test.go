package operator_test

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator/eventrecorder"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/scheme"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/integration/operator/internal/optest"
)

// TestEventRecorder: the operator's recorder writes an Event as client-go's
// does, and folds an isomorphic one recorded again into a series of the
// first (one Event, series.count 2), while another reason is an Event of
// its own.
func TestEventRecorder(t *testing.T) {
	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	regarding := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "regarding", Namespace: ns}}
	if err := env.Client.Create(t.Context(), regarding); err != nil {
		t.Fatal(err)
	}
	rec := eventrecorder.New(env.Client, scheme.New(), "events-test")
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- rec.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})

	events := func(ctx context.Context, reason string) ([]eventsv1.Event, error) {
		var list eventsv1.EventList
		if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return nil, err
		}
		var out []eventsv1.Event
		for _, e := range list.Items {
			if e.Reason == reason {
				out = append(out, e)
			}
		}
		return out, nil
	}
	rec.Eventf(regarding, nil, corev1.EventTypeWarning, "Failed", "Reconciling", "attempt %d", 1)
	optest.Eventually(t, "the first Event is written", func(ctx context.Context) error {
		got, err := events(ctx, "Failed")
		if err != nil || len(got) != 1 {
			return fmt.Errorf("events %+v, %v", got, err)
		}
		e := got[0]
		if e.Note != "attempt 1" || e.Type != corev1.EventTypeWarning || e.Action != "Reconciling" ||
			e.ReportingController != "events-test" || e.Regarding.Name != "regarding" || e.Regarding.Kind != "ConfigMap" ||
			e.EventTime.IsZero() || e.Series != nil {
			return fmt.Errorf("event %+v", e)
		}
		return nil
	})

	rec.Eventf(regarding, nil, corev1.EventTypeWarning, "Failed", "Reconciling", "attempt %d", 2)
	rec.Eventf(regarding, nil, corev1.EventTypeNormal, "Done", "Reconciling", "done")
	optest.Eventually(t, "the repeat is the series of the first Event, another reason an Event of its own", func(ctx context.Context) error {
		failed, err := events(ctx, "Failed")
		if err != nil {
			return err
		}
		if len(failed) != 1 || failed[0].Series == nil || failed[0].Series.Count != 2 || failed[0].Series.LastObservedTime.IsZero() {
			return fmt.Errorf("Failed events %+v", failed)
		}
		done, err := events(ctx, "Done")
		if err != nil {
			return err
		}
		if len(done) != 1 || done[0].Note != "done" || done[0].Type != corev1.EventTypeNormal {
			return fmt.Errorf("Done events %+v", done)
		}
		return nil
	})
}
