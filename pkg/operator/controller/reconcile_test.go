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
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator/metrics"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator/metrics/metricstest"
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
		stages:    newStageClock(metrics.Default),
		metrics:   metrics.Default,
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

// torchRuntime is the TrainingRuntime ns/torch: one torch node.
func torchRuntime() *trainer.TrainingRuntime {
	rt := &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "torch"}}
	rt.Spec.MLPolicy = &trainer.MLPolicy{NumNodes: ptr.To[int32](1), MLPolicySource: trainer.MLPolicySource{Torch: &trainer.TorchMLPolicySource{}}}
	rt.Spec.Template.Spec.ReplicatedJobs = []jobsetv1alpha2.ReplicatedJob{{Name: trainer.Node, Replicas: 1}}
	rt.Spec.Template.Spec.ReplicatedJobs[0].Template.Labels = map[string]string{trainer.AncestorLabel: trainer.AncestorTrainer}
	rt.Spec.Template.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers = []corev1.Container{{Name: trainer.Node, Image: "node"}}
	return rt
}

// TestReconcileMetrics: the reconciles of one TrainJob, each with metrics of their own, count what that TrainJob
// did: its reconciles by result, its build errors by the plugin that failed (runtime when none did), and the time
// it spent in Pending once it trains.
func TestReconcileMetrics(t *testing.T) {
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "alpha"}}
	for _, tc := range []struct {
		name    string
		runtime func(*trainer.TrainingRuntime)
		// noRuntime: the TrainJob's runtime does not exist.
		noRuntime bool
		// running: the JobSet's trainer runs after the first reconcile, and the TrainJob is reconciled again.
		running         bool
		wantReconciles  map[string]float64
		wantBuildErrors map[string]float64
		wantTransitions map[string]float64
	}{{
		name:           "built",
		wantReconciles: map[string]float64{"result=success": 1},
	}, {
		name:            "trains after 90 s in Pending",
		running:         true,
		wantReconciles:  map[string]float64{"result=success": 2},
		wantTransitions: map[string]float64{"from=Pending,to=Training": 90},
	}, {
		name: "a plugin fails",
		runtime: func(rt *trainer.TrainingRuntime) {
			rt.Spec.MLPolicy.Torch.EnvInjection = &trainer.EnvInjection{Targets: []trainer.EnvInjectionTarget{{JobName: trainer.Node, ContainerNames: []string{"sidecar"}}}}
		},
		wantReconciles:  map[string]float64{"result=error": 1},
		wantBuildErrors: map[string]float64{"plugin=Torch": 1},
	}, {
		name:            "the runtime is missing",
		noRuntime:       true,
		wantReconciles:  map[string]float64{"result=error": 1},
		wantBuildErrors: map[string]float64{"plugin=" + metrics.RuntimePlugin: 1},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			tj := trainJob(trainer.TrainingRuntimeKind)
			objs := []client.Object{tj}
			if !tc.noRuntime {
				rt := torchRuntime()
				if tc.runtime != nil {
					tc.runtime(rt)
				}
				objs = append(objs, rt)
			}
			r, c, _ := newTestReconciler(t, objs...)
			tj.CreationTimestamp = metav1.NewTime(r.now().Add(-90 * time.Second))
			if err := c.Update(t.Context(), tj); err != nil {
				t.Fatal(err)
			}
			m, reg := metricstest.Registered(t)
			r.metrics, r.stages = m, newStageClock(m)
			_, _ = r.Reconcile(t.Context(), req) // an error is counted
			if tc.running {
				js := &jobsetv1alpha2.JobSet{}
				if err := c.Get(t.Context(), req.NamespacedName, js); err != nil {
					t.Fatal(err)
				}
				js.Status.ReplicatedJobsStatus = []jobsetv1alpha2.ReplicatedJobStatus{{Name: trainer.Node, Ready: 1, Active: 1}}
				if err := c.Update(t.Context(), js); err != nil { // the fake client has no status subresource for JobSets
					t.Fatal(err)
				}
				if _, err := r.Reconcile(t.Context(), req); err != nil {
					t.Fatal(err)
				}
			}
			families := metricstest.Gather(t, reg)
			for _, m := range []struct {
				name string
				got  map[string]float64
				want map[string]float64
			}{
				{metrics.ReconcileDurationName, metricstest.Values(families, metrics.ReconcileDurationName), tc.wantReconciles},
				{metrics.BuildErrorsName, metricstest.Values(families, metrics.BuildErrorsName), tc.wantBuildErrors},
				{metrics.StageTransitionName + " (seconds)", metricstest.Sums(families, metrics.StageTransitionName), tc.wantTransitions},
			} {
				if diff := cmp.Diff(m.want, m.got, cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("%s (-want +got):\n%s", m.name, diff)
				}
			}
		})
	}
}

// TestPersistentConflict: a JobSet create that meets another writer's is
// retried quietly; once conflicts have gone on for persistentConflict, the
// TrainJob says so (ComponentsCreated=False and a Warning), and once the
// write goes through it is built.
func TestPersistentConflict(t *testing.T) {
	tj := trainJob(trainer.TrainingRuntimeKind)
	rt := torchRuntime()
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
