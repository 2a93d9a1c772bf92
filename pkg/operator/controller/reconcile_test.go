package controller

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator/apply"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/plugins"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/scheme"
)

// newTestReconciler is a reconciler of objs in a fake API server.
func newTestReconciler(t *testing.T, objs ...client.Object) (*TrainJobReconciler, client.Client, *events.FakeRecorder) {
	t.Helper()
	s := scheme.New()
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).WithStatusSubresource(&trainer.TrainJob{}).Build()
	fw, err := pipeline.New(t.Context(), plugins.NewRegistry(), pipeline.Handle{Client: c})
	if err != nil {
		t.Fatal(err)
	}
	rec := events.NewFakeRecorder(10)
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return &TrainJobReconciler{
		client: c, framework: fw, recorder: rec,
		snapshots: newSnapshots(c, c, s),
		applier:   apply.New(c, c, s, nil, nil),
		stages:    &stageClock{seen: map[types.NamespacedName]stageSince{}},
		now:       func() time.Time { return now },
	}, c, rec
}

// TestReconcileUnsupportedRuntime: a TrainJob naming another kind of
// runtime (only possible without the webhook) fails, and nothing is built.
// Upstream then calls its status plugin through a nil runtime.
func TestReconcileUnsupportedRuntime(t *testing.T) {
	tj := trainJob("Runtime")
	tj.Spec.RuntimeRef.APIGroup = ptr.To("example.com")
	r, c, rec := newTestReconciler(t, tj)
	if _, err := r.Reconcile(t.Context(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "alpha"}}); err != nil {
		t.Fatal(err)
	}
	got := &trainer.TrainJob{}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(tj), got); err != nil {
		t.Fatal(err)
	}
	want := []metav1.Condition{{Type: trainer.TrainJobFailed, Status: metav1.ConditionTrue, ObservedGeneration: 2,
		Reason: trainer.TrainJobRuntimeNotSupportedReason, Message: "unsupported runtime: Runtime.example.com"}}
	if diff := cmp.Diff(want, got.Status.Conditions, cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime")); diff != "" {
		t.Errorf("conditions (-want +got):\n%s", diff)
	}
	select {
	case e := <-rec.Events:
		if want := "Warning TrainingRuntimeNotSupported unsupported runtime: Runtime.example.com"; e != want {
			t.Errorf("event %q, want %q", e, want)
		}
	default:
		t.Error("no event")
	}
}

// TestReconcileManagedByMultiKueue: a TrainJob MultiKueue manages is not
// touched, not even its status.
func TestReconcileManagedByMultiKueue(t *testing.T) {
	tj := trainJob(trainer.ClusterTrainingRuntimeKind)
	tj.Spec.ManagedBy = ptr.To(trainer.MultiKueueController)
	tj.Spec.Suspend = ptr.To(true)
	r, c, rec := newTestReconciler(t, tj)
	result, err := r.Reconcile(t.Context(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "alpha"}})
	if err != nil || result != (reconcile.Result{}) {
		t.Fatalf("result %+v, error %v", result, err)
	}
	got := &trainer.TrainJob{}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(tj), got); err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Conditions) > 0 || len(rec.Events) > 0 {
		t.Errorf("status %+v, %d events; want nothing", got.Status, len(rec.Events))
	}
}
