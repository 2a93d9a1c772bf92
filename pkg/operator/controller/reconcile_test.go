package controller

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator/apply"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/plugins"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/scheme"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/snapshot"
)

// newTestReconciler is a reconciler of objs in a fake API server.
func newTestReconciler(t *testing.T, objs ...client.Object) (*TrainJobReconciler, client.Client, *events.FakeRecorder) {
	t.Helper()
	return newInterceptedReconciler(t, interceptor.Funcs{}, objs...)
}

// newInterceptedReconciler is newTestReconciler whose client calls go through funcs first.
func newInterceptedReconciler(t *testing.T, funcs interceptor.Funcs, objs ...client.Object) (*TrainJobReconciler, client.Client, *events.FakeRecorder) {
	t.Helper()
	s := scheme.New()
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).WithStatusSubresource(&trainer.TrainJob{}).
		WithInterceptorFuncs(funcs).Build()
	fw, err := plugins.NewFramework(t.Context(), plugins.Config{}, pipeline.NewHandle(c, c.RESTMapper(), pipeline.OperatorInfo{}))
	if err != nil {
		t.Fatal(err)
	}
	rec := events.NewFakeRecorder(10)
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return &TrainJobReconciler{
		client: c, framework: fw, recorder: rec,
		snapshots: snapshot.NewStore(c, c, s),
		applier:   apply.New(c, c, s, nil, nil),
		stages:    &stageClock{seen: map[types.NamespacedName]stageSince{}},
		conflicts: newConflictRuns(),
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

// TestPersistentConflict: a JobSet create that meets another writer's is
// retried quietly; once conflicts have gone on for persistentConflict, the
// TrainJob says so (ComponentsCreated=False and a Warning), and once the
// write goes through it is built.
func TestPersistentConflict(t *testing.T) {
	tj := trainJob(trainer.TrainingRuntimeKind)
	rt := &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "torch"}}
	rt.Spec.MLPolicy = &trainer.MLPolicy{NumNodes: ptr.To[int32](1), MLPolicySource: trainer.MLPolicySource{Torch: &trainer.TorchMLPolicySource{}}}
	rt.Spec.Template.Spec.ReplicatedJobs = []jobsetv1alpha2.ReplicatedJob{{Name: trainer.Node, Replicas: 1}}
	rt.Spec.Template.Spec.ReplicatedJobs[0].Template.Labels = map[string]string{trainer.AncestorLabel: trainer.AncestorTrainer}
	rt.Spec.Template.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers = []corev1.Container{{Name: trainer.Node, Image: "node"}}
	fighting := true
	conflict := interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		if _, ok := obj.(*jobsetv1alpha2.JobSet); ok && fighting {
			return apierrors.NewConflict(schema.GroupResource{Group: jobsetv1alpha2.GroupVersion.Group, Resource: "jobsets"}, obj.GetName(), errors.New("another writer"))
		}
		return c.Create(ctx, obj, opts...)
	}}
	r, c, rec := newInterceptedReconciler(t, conflict, tj, rt)
	start := r.now()
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "alpha"}}
	reconcileAt := func(at time.Time) (reconcile.Result, error) {
		r.now = func() time.Time { return at }
		return r.Reconcile(t.Context(), req)
	}
	created := func() *metav1.Condition {
		got := &trainer.TrainJob{}
		if err := c.Get(t.Context(), req.NamespacedName, got); err != nil {
			t.Fatal(err)
		}
		return meta.FindStatusCondition(got.Status.Conditions, trainer.TrainJobComponentsCreated)
	}

	for _, at := range []time.Time{start, start.Add(persistentConflict / 2), start.Add(persistentConflict - time.Second)} {
		res, err := reconcileAt(at)
		if err != nil || !res.Requeue {
			t.Fatalf("a conflict %v after the first: result %+v, error %v; want a quiet requeue", at.Sub(start), res, err)
		}
		if cond := created(); cond != nil {
			t.Fatalf("a conflict %v after the first sets %+v; want nothing said yet", at.Sub(start), cond)
		}
		if len(rec.Events) != 0 {
			t.Fatalf("a conflict %v after the first records %q; want no Event yet", at.Sub(start), <-rec.Events)
		}
	}

	if _, err := reconcileAt(start.Add(persistentConflict)); !apierrors.IsConflict(err) {
		t.Fatalf("conflicts for %v: error %v, want the conflict", persistentConflict, err)
	}
	cond := created()
	if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != trainer.TrainJobJobsCreationFailedReason ||
		!strings.Contains(cond.Message, "writes have met other writers' for 30s") {
		t.Fatalf("after conflicts for %v: ComponentsCreated %+v", persistentConflict, cond)
	}
	var events []string
	for len(rec.Events) > 0 {
		events = append(events, <-rec.Events)
	}
	if !slices.ContainsFunc(events, func(e string) bool {
		return strings.HasPrefix(e, "Warning "+ReasonResourcesCreationFailed) && strings.Contains(e, "another writer")
	}) {
		t.Errorf("events %q; want a Warning %s naming the conflict", events, ReasonResourcesCreationFailed)
	}

	fighting = false
	if _, err := reconcileAt(start.Add(persistentConflict + time.Second)); err != nil {
		t.Fatal(err)
	}
	if cond := created(); cond == nil || cond.Status != metav1.ConditionTrue {
		t.Fatalf("once the write goes through: ComponentsCreated %+v, want True", cond)
	}
	// A new run of conflicts starts quiet again.
	if _, ok := r.conflicts.since[req.NamespacedName]; ok {
		t.Error("the run of conflicts is still remembered after a write went through")
	}
}
