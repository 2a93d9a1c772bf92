package operator_test

import (
	"context"
	"errors"
	"fmt"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	"sigs.k8s.io/yaml"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/snapshot"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/integration/operator/internal/optest"
)

// TestRuntimeSnapshot: the first reconcile copies the runtime into
// <job>-runtime-snapshot; the TrainJob keeps building from it when the
// runtime changes; a deleted snapshot is taken again.
func TestRuntimeSnapshot(t *testing.T) {
	for _, kind := range []string{trainer.TrainingRuntimeKind, trainer.ClusterTrainingRuntimeKind} {
		t.Run(kind, func(t *testing.T) {
			ns := cluster.NewNamespace(t, env.Client, "test-", nil)
			rt := runtimeOfKind(kind, ns, "torch")
			create(t, rt)
			t.Cleanup(func() { _ = env.Client.Delete(context.Background(), rt) })
			tj := newTrainJob(ns, "alpha", kind, rt.GetName())
			tj.Spec.Suspend = ptr.To(true)
			create(t, tj)
			snapshotKey := nsName(ns, "alpha"+snapshot.Suffix)

			snap := &corev1.ConfigMap{}
			optest.Eventually(t, "the snapshot is taken", func(ctx context.Context) error {
				return optest.Get(ctx, env.Client, snapshotKey, snap)
			})
			// Nobody rewrites the record: Kubernetes refuses every edit of it.
			edited := snap.DeepCopy()
			edited.Data[snapshot.Key] = strings.ReplaceAll(edited.Data[snapshot.Key], "runtime-node:v1", "attacker:v1")
			if err := env.Client.Update(t.Context(), edited); !apierrors.IsInvalid(err) {
				t.Errorf("an edit of the snapshot: %v, want Invalid (the snapshot is immutable)", err)
			}
			stored := &trainer.TrainJob{}
			if err := optest.Get(t.Context(), env.Client, key(tj), stored); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(controllerRef(stored), snap.OwnerReferences); diff != "" {
				t.Errorf("snapshot owner (-want +got):\n%s", diff)
			}
			var held struct {
				metav1.TypeMeta   `json:",inline"`
				metav1.ObjectMeta `json:"metadata"`
			}
			if err := yaml.Unmarshal([]byte(snap.Data[snapshot.Key]), &held); err != nil {
				t.Fatal(err)
			}
			if held.Kind != kind || held.Name != rt.GetName() || held.APIVersion != trainer.GroupVersion.String() {
				t.Errorf("snapshot holds %s %s %q, want %s %s %q", held.APIVersion, held.Kind, held.Name, trainer.GroupVersion, kind, rt.GetName())
			}

			// Resumed follows Suspended=True: a TrainJob resumed before the
			// operator reported it suspended never was Suspended.
			trainJobMatches(t, tj, "Suspended", hasConditions(componentsCreated, suspended))
			// The runtime changes: the suspended TrainJob does not see it on resume.
			setRuntimeImage(t, rt, "runtime-node:v2")
			resume(t, tj)
			trainJobMatches(t, tj, "Resumed", hasConditions(componentsCreated, resumed))
			// The reconcile that wrote Resumed applied the resumed JobSet
			// first; settle waits for the reconciles that followed it.
			settle(t, ns)
			if err := jobSetImage(t.Context(), tj, "runtime-node:v1"); err != nil {
				t.Errorf("the JobSet does not keep the snapshot's image: %v", err)
			}

			// A deleted snapshot is taken again, from the runtime as it is now.
			if err := env.Client.Delete(t.Context(), snap); err != nil {
				t.Fatal(err)
			}
			optest.Eventually(t, "the snapshot is taken again", func(ctx context.Context) error {
				again := &corev1.ConfigMap{}
				if err := optest.Get(ctx, env.Client, snapshotKey, again); err != nil {
					return err
				}
				if again.UID == snap.UID {
					return errors.New("still the deleted snapshot")
				}
				if !strings.Contains(again.Data[snapshot.Key], "runtime-node:v2") {
					return fmt.Errorf("the new snapshot does not hold the runtime as it is now:\n%s", again.Data[snapshot.Key])
				}
				return nil
			})
		})
	}
}

// setRuntimeImage changes the image of a runtime's node container.
func setRuntimeImage(t testing.TB, rt client.Object, image string) {
	t.Helper()
	optest.Eventually(t, "update the runtime", func(ctx context.Context) error {
		if err := optest.Get(ctx, env.Client, key(rt), rt); err != nil {
			return err
		}
		var spec *trainer.TrainingRuntimeSpec
		switch r := rt.(type) {
		case *trainer.TrainingRuntime:
			spec = &r.Spec
		case *trainer.ClusterTrainingRuntime:
			spec = &r.Spec
		}
		spec.Template.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0].Image = image
		return env.Client.Update(ctx, rt)
	})
}

func jobSetImage(ctx context.Context, tj *trainer.TrainJob, want string) error {
	js := &jobsetv1alpha2.JobSet{}
	if err := optest.Get(ctx, env.Client, key(tj), js); err != nil {
		return err
	}
	if got := container(findJob(&js.Spec, trainer.Node), trainer.Node).Image; got != want {
		return fmt.Errorf("JobSet image %q, want %q", got, want)
	}
	return nil
}

// TestRuntimeDeletableWhileReferenced: the runtime controllers take the
// legacy finalizer off, so a runtime in use can be deleted; its TrainJob
// keeps running from the snapshot.
func TestRuntimeDeletableWhileReferenced(t *testing.T) {
	for _, kind := range []string{trainer.TrainingRuntimeKind, trainer.ClusterTrainingRuntimeKind} {
		t.Run(kind, func(t *testing.T) {
			ns := cluster.NewNamespace(t, env.Client, "test-", nil)
			rt := runtimeOfKind(kind, ns, "legacy")
			rt.SetFinalizers([]string{trainer.ResourceInUseFinalizer, "example.com/keep"})
			create(t, rt)
			t.Cleanup(func() { removeFinalizers(rt) })
			tj := newTrainJob(ns, "alpha", kind, rt.GetName())
			create(t, tj)
			jobSetOf(t, tj)

			optest.Eventually(t, "the legacy finalizer is removed, the other kept", func(ctx context.Context) error {
				if err := optest.Get(ctx, env.Client, key(rt), rt); err != nil {
					return err
				}
				if diff := cmp.Diff([]string{"example.com/keep"}, rt.GetFinalizers()); diff != "" {
					return fmt.Errorf("finalizers (-want +got):\n%s", diff)
				}
				return nil
			})
			removeFinalizers(rt)
			if err := env.Client.Delete(t.Context(), rt); err != nil {
				t.Fatal(err)
			}
			optest.Eventually(t, "the runtime is gone", func(ctx context.Context) error {
				return optest.Absent(ctx, env.Client, key(rt), rt.DeepCopyObject().(client.Object))
			})
			// A deleted JobSet of a running TrainJob is built again, from the snapshot.
			if err := env.Client.Delete(t.Context(), &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alpha"}}); err != nil {
				t.Fatal(err)
			}
			optest.Eventually(t, "the JobSet is built again without the runtime", func(ctx context.Context) error {
				return jobSetImage(ctx, tj, "runtime-node:v1")
			})
			trainJobMatches(t, tj, "still ComponentsCreated", hasConditions(componentsCreated))
		})
	}
}

// removeFinalizers clears a runtime's finalizers so it can go.
func removeFinalizers(rt client.Object) {
	ctx := context.Background()
	_ = optest.Poll(ctx, optest.Timeout, func(ctx context.Context) error {
		obj := rt.DeepCopyObject().(client.Object)
		if err := env.Client.Get(ctx, key(rt), obj); err != nil {
			return client.IgnoreNotFound(err)
		}
		if len(obj.GetFinalizers()) == 0 {
			return nil
		}
		obj.SetFinalizers(nil)
		return env.Client.Update(ctx, obj)
	})
}

// runtimeOfKind is a torch runtime of kind: a TrainingRuntime name in ns, or
// a ClusterTrainingRuntime named after name and ns (so tests do not share it).
func runtimeOfKind(kind, ns, name string) client.Object {
	if kind == trainer.TrainingRuntimeKind {
		return &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: torchSpec()}
	}
	return &trainer.ClusterTrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: name + "-" + ns}, Spec: torchSpec()}
}

// TestResumeWithoutRuntime: a TrainJob runs from its snapshot, so it can be
// resumed (an update the webhook checks against the snapshot) after its
// runtime was deleted.
func TestResumeWithoutRuntime(t *testing.T) {
	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	rt := createTrainingRuntime(t, ns, "torch", torchSpec())
	tj := newTrainJob(ns, "alpha", trainer.TrainingRuntimeKind, "torch")
	tj.Spec.Suspend = ptr.To(true)
	create(t, tj)
	// Suspended=True, which Resumed follows, is written after the snapshot.
	trainJobMatches(t, tj, "Suspended", hasConditions(componentsCreated, suspended))
	optest.Eventually(t, "the snapshot is taken", func(ctx context.Context) error {
		return optest.Get(ctx, env.Client, nsName(ns, snapshot.Name(tj)), &corev1.ConfigMap{})
	})
	if err := env.Client.Delete(t.Context(), rt); err != nil {
		t.Fatal(err)
	}
	optest.Eventually(t, "the runtime is gone", func(ctx context.Context) error {
		return optest.Absent(ctx, env.Client, key(rt), &trainer.TrainingRuntime{})
	})
	resume(t, tj)
	trainJobMatches(t, tj, "Resumed", hasConditions(componentsCreated, resumed))
	jobSetResumed(t, tj)
}
