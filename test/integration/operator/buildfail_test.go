package operator_test

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator/controller"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/snapshot"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/integration/operator/internal/optest"
)

// TestBuildFailure: a runtime the Build phase cannot run — here one changed
// after the TrainJob was built, which the TrainJob sees once its snapshot
// is taken again — gives a Warning event with the plugin's error (counted
// by plugin: TestReconcileMetrics); the TrainJob, whose JobSet exists, stays
// ComponentsCreated=True; the operator keeps working, and the TrainJob is
// built again once the runtime is fixed.
func TestBuildFailure(t *testing.T) {
	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	rt := createTrainingRuntime(t, ns, "torch", torchSpec())
	tj := newTrainJob(ns, "alpha", trainer.TrainingRuntimeKind, "torch")
	create(t, tj)
	jobSetOf(t, tj)
	trainJobMatches(t, tj, "components created", hasConditions(componentsCreated))

	setEnvInjection := func(containers ...string) {
		optest.Eventually(t, "update the runtime", func(ctx context.Context) error {
			if err := optest.Get(ctx, env.Client, key(rt), rt); err != nil {
				return err
			}
			rt.Spec.MLPolicy.Torch.EnvInjection = nil
			if len(containers) > 0 {
				rt.Spec.MLPolicy.Torch.EnvInjection = &trainer.EnvInjection{Targets: []trainer.EnvInjectionTarget{{JobName: trainer.Node, ContainerNames: containers}}}
			}
			return env.Client.Update(ctx, rt)
		})
	}
	setEnvInjection("sidecar")
	deleteSnapshot(t, tj)

	const cause = `EnforceMLPolicy plugin Torch: envInjection target podSet "node" container "sidecar" not found in runtime template`
	// Its JobSet exists and runs as built: ComponentsCreated stays True, and
	// the event says what failed.
	if err := hasConditions(componentsCreated)(creationFailed(t, tj, "TrainJob resources reconciliation failed: "+cause)); err != nil {
		t.Errorf("after its rebuild failed: %v", err)
	}
	optest.Consistently(t, "the operator keeps running and ready", func(ctx context.Context) error {
		select {
		case <-op.Done():
			return fmt.Errorf("the operator stopped")
		default:
		}
		return op.Ready(ctx)
	})
	other := newTrainJob(ns, "beta", trainer.TrainingRuntimeKind, "torch-ok")
	createTrainingRuntime(t, ns, "torch-ok", torchSpec())
	create(t, other)
	trainJobMatches(t, other, "another TrainJob is reconciled", hasConditions(componentsCreated))

	// A failed build takes no snapshot: fixing the runtime is enough.
	if err := optest.Absent(t.Context(), env.Client, nsName(ns, "alpha"+snapshot.Suffix), &corev1.ConfigMap{}); err != nil {
		t.Errorf("a failed build took a snapshot: %v", err)
	}
	setEnvInjection()
	optest.Eventually(t, "built again once the runtime is fixed: the snapshot is taken", func(ctx context.Context) error {
		return optest.Get(ctx, env.Client, nsName(ns, "alpha"+snapshot.Suffix), &corev1.ConfigMap{})
	})
	trainJobMatches(t, tj, "built", hasConditions(componentsCreated))
}

// TestMissingRuntime: a built TrainJob whose runtime is gone when its
// snapshot must be taken again says so in a Warning event, keeps
// ComponentsCreated=True (its JobSet exists); the error is counted as a
// runtime build error (TestReconcileMetrics).
func TestMissingRuntime(t *testing.T) {
	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	rt := createClusterTrainingRuntime(t, "gone", torchSpec(), nil)
	tj := newTrainJob(ns, "alpha", trainer.ClusterTrainingRuntimeKind, rt.Name)
	tj.Spec.Suspend = ptr.To(true)
	create(t, tj)
	trainJobMatches(t, tj, "Suspended", hasConditions(componentsCreated, suspended))
	if err := env.Client.Delete(t.Context(), rt); err != nil {
		t.Fatal(err)
	}
	optest.Eventually(t, "the runtime is gone", func(ctx context.Context) error {
		return optest.Absent(ctx, env.Client, key(rt), &trainer.ClusterTrainingRuntime{})
	})
	deleteSnapshot(t, tj)
	cause := fmt.Sprintf(`not found ClusterTrainingRuntime specified in TrainJob: clustertrainingruntimes.trainer.kubeflow.org %q not found`, rt.Name)
	// Its components exist, and stay created: the event says what failed.
	got := creationFailed(t, tj, "TrainJob resources reconciliation failed: "+cause)
	if err := hasConditions(componentsCreated, suspended)(got); err != nil {
		t.Errorf("after its rebuild failed: %v", err)
	}
}

func deleteSnapshot(t testing.TB, tj *trainer.TrainJob) {
	t.Helper()
	cm := &corev1.ConfigMap{}
	cm.Namespace, cm.Name = tj.Namespace, tj.Name+snapshot.Suffix
	if err := env.Client.Delete(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
}

// TestCreationFailure: a JobSet of the TrainJob's name that another
// controller (here a ConfigMap) controls is left alone; the TrainJob names
// it and its controller in ComponentsCreated. (A write the API server
// refuses is JobsCreationFailed: TestSuspendedOnlyWhenJobSetIs.)
func TestCreationFailure(t *testing.T) {
	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	createTrainingRuntime(t, ns, "torch", torchSpec())
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "owner"}}
	create(t, owner)
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alpha",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: owner.UID, Controller: ptr.To(true)}}}}
	js.Spec.Suspend = ptr.To(true)
	js.Spec.ReplicatedJobs = []jobsetv1alpha2.ReplicatedJob{replicatedJob("other", "", "other")}
	create(t, js)

	tj := newTrainJob(ns, "alpha", trainer.TrainingRuntimeKind, "torch")
	create(t, tj)
	got := notControlled(t, tj, fmt.Sprintf(`JobSet %s/alpha exists and is not controlled by TrainJob "alpha": its controller is ConfigMap "owner" (uid %s)`, ns, owner.UID))
	message := meta.FindStatusCondition(got.Status.Conditions, trainer.TrainJobComponentsCreated).Message
	wantEvents(t, tj, event{corev1.EventTypeWarning, controller.ComponentNotControlledReason, trainer.TrainJobComponentsCreated, message})
	unchanged(t, js)
}
