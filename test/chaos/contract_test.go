package chaos_test

// The controller contract against the operator's processes, as a cluster runs them: what others do to a
// TrainJob's children (a user's JobSet of its name, edits of what it built, deletion with a finalizer held,
// a failed JobSet that later says it completed). The fine-grained cases, down to the operator's cache, are in
// test/integration/operator/contract_test.go.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator/controller"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/snapshot"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/stack"
)

// waitTimeout bounds each wait of these tests for the operator to act.
const waitTimeout = 2 * time.Minute

// trainJob is a one-node torch TrainJob on the shipped runtime.
func trainJob(ns, name string, suspend bool) *trainer.TrainJob {
	return &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: "torch-distributed"},
			Trainer: &trainer.Trainer{NumNodes: ptr.To[int32](1)}, Suspend: ptr.To(suspend)}}
}

// condition waits until TrainJob ns/name's condition typ has status (and reason, unless empty), and returns
// the TrainJob.
func condition(t *testing.T, ns, name, typ string, status metav1.ConditionStatus, reason string) *trainer.TrainJob {
	t.Helper()
	tj := &trainer.TrainJob{}
	cluster.Eventually(t, fmt.Sprintf("TrainJob %s: %s=%s %s", name, typ, status, reason), waitTimeout, func(ctx context.Context) error {
		if err := env.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, tj); err != nil {
			return err
		}
		c := meta.FindStatusCondition(tj.Status.Conditions, typ)
		if c == nil || c.Status != status || (reason != "" && c.Reason != reason) {
			return fmt.Errorf("conditions %+v", tj.Status.Conditions)
		}
		return nil
	})
	return tj
}

// TestNotControlledJobSet: a user's JobSet of the TrainJob's name, completed, is neither adopted, written nor
// read: the TrainJob says whose name it is and takes none of its status; once the user deletes it, the
// TrainJob is built.
func TestNotControlledJobSet(t *testing.T) {
	ctx := t.Context()
	ns := cluster.NewNamespace(t, env.client, "chaos-", nil)
	theirs := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alpha"}}
	theirs.Spec.Suspend = ptr.To(true)
	theirs.Spec.ReplicatedJobs = []jobsetv1alpha2.ReplicatedJob{{Name: "theirs", Replicas: 1}}
	theirs.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec = corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
		Containers: []corev1.Container{{Name: "theirs", Image: "theirs:v1"}}}
	if err := env.client.Create(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	theirs.Status.Conditions = []metav1.Condition{{Type: string(jobsetv1alpha2.JobSetCompleted), Status: metav1.ConditionTrue,
		Reason: "AllJobsCompleted", Message: "theirs completed", LastTransitionTime: metav1.Now()}}
	if err := env.client.Status().Update(ctx, theirs); err != nil {
		t.Fatal(err)
	}

	if err := env.client.Create(ctx, trainJob(ns, "alpha", false)); err != nil {
		t.Fatal(err)
	}
	tj := condition(t, ns, "alpha", trainer.TrainJobComponentsCreated, metav1.ConditionFalse, controller.ComponentNotControlledReason)
	if msg := meta.FindStatusCondition(tj.Status.Conditions, trainer.TrainJobComponentsCreated).Message; !strings.Contains(msg, "JobSet "+ns+"/alpha exists and is not controlled by TrainJob") {
		t.Errorf("ComponentsCreated says %q; want it to name the JobSet", msg)
	}
	if meta.FindStatusCondition(tj.Status.Conditions, trainer.TrainJobComplete) != nil || tj.Status.JobsStatus != nil {
		t.Errorf("the TrainJob took the user's JobSet's status: conditions %+v, jobsStatus %+v", tj.Status.Conditions, tj.Status.JobsStatus)
	}
	got := &jobsetv1alpha2.JobSet{}
	if err := env.client.Get(ctx, client.ObjectKeyFromObject(theirs), got); err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion != theirs.ResourceVersion || len(got.OwnerReferences) != 0 {
		t.Errorf("the user's JobSet was written: resourceVersion %s → %s, owners %v", theirs.ResourceVersion, got.ResourceVersion, got.OwnerReferences)
	}

	if err := env.client.Delete(ctx, theirs, client.Preconditions{UID: ptr.To(theirs.UID)}); err != nil {
		t.Fatal(err)
	}
	cluster.Eventually(t, "built once the name is free", waitTimeout, func(ctx context.Context) error { return built(ctx, ns, "alpha") })
}

// TestDriftPutBack: a suspended TrainJob's JobSet patched by someone else to run, and stripped of the label
// the operator set, is put back: suspended and labelled again (a quota bypass under Kueue otherwise).
func TestDriftPutBack(t *testing.T) {
	ctx := t.Context()
	ns := cluster.NewNamespace(t, env.client, "chaos-", nil)
	rt := labelledRuntime(ns, "labelled")
	if err := env.client.Create(ctx, rt); err != nil {
		t.Fatal(err)
	}
	tj := trainJob(ns, "alpha", true)
	tj.Spec.RuntimeRef = trainer.RuntimeRef{Name: rt.Name, Kind: ptr.To(trainer.TrainingRuntimeKind)}
	if err := env.client.Create(ctx, tj); err != nil {
		t.Fatal(err)
	}
	condition(t, ns, "alpha", trainer.TrainJobSuspended, metav1.ConditionTrue, "")
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alpha"}}
	patch := []byte(`{"metadata":{"labels":{"team":null}},"spec":{"suspend":false}}`)
	if err := env.client.Patch(ctx, js, client.RawPatch(types.MergePatchType, patch), client.FieldOwner("someone")); err != nil {
		t.Fatal(err)
	}
	cluster.Eventually(t, "the JobSet is suspended and labelled again", waitTimeout, func(ctx context.Context) error {
		got := &jobsetv1alpha2.JobSet{}
		if err := env.client.Get(ctx, client.ObjectKeyFromObject(js), got); err != nil {
			return err
		}
		if !ptr.Deref(got.Spec.Suspend, false) || got.Labels["team"] != "ml" {
			return fmt.Errorf("suspend %v, labels %v", ptr.Deref(got.Spec.Suspend, false), got.Labels)
		}
		return nil
	})
}

// labelledRuntime is a one-node torch TrainingRuntime whose JobSets carry the label team=ml.
func labelledRuntime(ns, name string) *trainer.TrainingRuntime {
	rt := &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	rt.Spec.MLPolicy = &trainer.MLPolicy{NumNodes: ptr.To[int32](1), MLPolicySource: trainer.MLPolicySource{Torch: &trainer.TorchMLPolicySource{}}}
	rt.Spec.Template.Labels = map[string]string{"team": "ml"}
	rt.Spec.Template.Spec.ReplicatedJobs = []jobsetv1alpha2.ReplicatedJob{{Name: trainer.Node, Replicas: 1}}
	rt.Spec.Template.Spec.ReplicatedJobs[0].Template.Labels = map[string]string{trainer.AncestorLabel: trainer.AncestorTrainer}
	rt.Spec.Template.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec = corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
		Containers: []corev1.Container{{Name: trainer.Node, Image: "trainer:v1"}}}
	return rt
}

// TestDeletionNeverRebuilds: a TrainJob being deleted, held by a finalizer (as --cascade=foreground holds
// it), is not rebuilt when its children go, and the finalizer's removal is admitted, so the deletion ends.
func TestDeletionNeverRebuilds(t *testing.T) {
	ctx := t.Context()
	ns := cluster.NewNamespace(t, env.client, "chaos-", nil)
	tj := trainJob(ns, "alpha", true)
	tj.Finalizers = []string{"example.com/hold"}
	if err := env.client.Create(ctx, tj); err != nil {
		t.Fatal(err)
	}
	condition(t, ns, "alpha", trainer.TrainJobComponentsCreated, metav1.ConditionTrue, "")
	if err := env.client.Delete(ctx, tj); err != nil {
		t.Fatal(err)
	}
	children := []client.Object{
		&jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alpha"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: snapshot.Name(tj)}},
	}
	for _, obj := range children {
		if err := env.client.Delete(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	barrier(t, ns, "barrier")
	for _, obj := range children {
		err := env.client.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		if !apierrors.IsNotFound(err) {
			t.Errorf("%T %s under a TrainJob being deleted: %v, want it not rebuilt", obj, obj.GetName(), err)
		}
	}
	patch := []byte(`{"metadata":{"finalizers":null}}`)
	if err := env.client.Patch(ctx, tj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatalf("removing the finalizer of a TrainJob being deleted: %v", err)
	}
	cluster.Eventually(t, "the TrainJob is gone", waitTimeout, func(ctx context.Context) error {
		if err := env.client.Get(ctx, client.ObjectKeyFromObject(tj), &trainer.TrainJob{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there: %v", err)
		}
		return nil
	})
}

// barrier returns once the leader has reconciled to the end every event of ns queued before it was called: it
// creates TrainJob ns/name, waits until it is built, and then until the leader's TrainJob controller settles.
// The leader queued the earlier events before the barrier's creation (one informer, first in first out), and
// a worker may still run their reconciles when the barrier is built; settled, they ended.
func barrier(t *testing.T, ns, name string) {
	t.Helper()
	if err := env.client.Create(t.Context(), trainJob(ns, name, true)); err != nil {
		t.Fatal(err)
	}
	cluster.Eventually(t, "the barrier TrainJob is built", waitTimeout, func(ctx context.Context) error { return built(ctx, ns, name) })
	cluster.Eventually(t, "the leader's TrainJob controller settles", waitTimeout, stack.Settled(env.stack.LeaderIdle))
}

// TestFailedStaysFailed: once its JobSet failed, a TrainJob is Failed for good: a JobSet that later says it
// completed (restarted by hand, say) does not make it Complete too.
func TestFailedStaysFailed(t *testing.T) {
	ctx := t.Context()
	ns := cluster.NewNamespace(t, env.client, "chaos-", nil)
	if err := env.client.Create(ctx, trainJob(ns, "alpha", false)); err != nil {
		t.Fatal(err)
	}
	condition(t, ns, "alpha", trainer.TrainJobComponentsCreated, metav1.ConditionTrue, "")
	cluster.SetJobSetStatus(t, env.client, client.ObjectKey{Namespace: ns, Name: "alpha"}, waitTimeout, func(s *jobsetv1alpha2.JobSetStatus) {
		*s = jobsetv1alpha2.JobSetStatus{Conditions: []metav1.Condition{{Type: string(jobsetv1alpha2.JobSetFailed),
			Status: metav1.ConditionTrue, Reason: "FailedJobs", Message: "jobset failed", LastTransitionTime: metav1.Now()}}}
	})
	condition(t, ns, "alpha", trainer.TrainJobFailed, metav1.ConditionTrue, "")
	cluster.SetJobSetStatus(t, env.client, client.ObjectKey{Namespace: ns, Name: "alpha"}, waitTimeout, func(s *jobsetv1alpha2.JobSetStatus) {
		*s = jobsetv1alpha2.JobSetStatus{
			Conditions: []metav1.Condition{{Type: string(jobsetv1alpha2.JobSetCompleted), Status: metav1.ConditionTrue,
				Reason: "AllJobsCompleted", Message: "jobset completed", LastTransitionTime: metav1.Now()}},
			ReplicatedJobsStatus: []jobsetv1alpha2.ReplicatedJobStatus{{Name: trainer.Node, Succeeded: 1}},
		}
	})
	// The operator has read the completed JobSet once it copied its jobs' status.
	tj := &trainer.TrainJob{}
	cluster.Eventually(t, "the completed JobSet's jobs status is copied", waitTimeout, func(ctx context.Context) error {
		if err := env.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "alpha"}, tj); err != nil {
			return err
		}
		for _, j := range tj.Status.JobsStatus {
			if j.Name == trainer.Node && ptr.Deref(j.Succeeded, 0) == 1 {
				return nil
			}
		}
		return fmt.Errorf("jobsStatus %+v", tj.Status.JobsStatus)
	})
	if !meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobFailed) || meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobComplete) {
		t.Errorf("conditions %+v, want Failed and not Complete", tj.Status.Conditions)
	}
}
