package apply

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/scheme"
)

// TestWrittenOnlyCreates: what a reconcile created is read back from the
// context; an object found live (newer than the cache) is not, so that the
// status derived from it cannot step back at the next reconcile.
func TestWrittenOnlyCreates(t *testing.T) {
	s := scheme.New()
	owner := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "alpha", Namespace: "ns", UID: "uid-1"}}
	owner.Status.Conditions = []metav1.Condition{{Type: trainer.TrainJobComponentsCreated, Status: metav1.ConditionTrue}}
	ref := *metav1.NewControllerRef(owner, trainer.GroupVersion.WithKind(trainer.TrainJobKind))
	hostfile := func(name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", OwnerReferences: []metav1.OwnerReference{ref}},
			Data: map[string]string{"hostfile": "a slots=1\n"}}
	}
	existing, _, err := pipeline.AsApplied(s, hostfile("alpha-existing"), "alpha")
	if err != nil {
		t.Fatal(err)
	}
	cache := fake.NewClientBuilder().WithScheme(s).Build()
	live := fake.NewClientBuilder().WithScheme(s).WithObjects(existing).Build()
	a := New(cache, live, s, nil, nil)

	ctx := WithWritten(t.Context())
	if err := a.Ensure(ctx, owner, []client.Object{hostfile("alpha-existing"), hostfile("alpha-new")}); err != nil {
		t.Fatal(err)
	}
	gvk := corev1.SchemeGroupVersion.WithKind("ConfigMap")
	if Written(ctx, gvk, client.ObjectKey{Namespace: "ns", Name: "alpha-existing"}, &corev1.ConfigMap{}) {
		t.Error("an object read live is served to the plugins")
	}
	got := &corev1.ConfigMap{}
	if !Written(ctx, gvk, client.ObjectKey{Namespace: "ns", Name: "alpha-new"}, got) || got.Data["hostfile"] != "a slots=1\n" {
		t.Errorf("the created object is not served to the plugins: %+v", got)
	}
}
