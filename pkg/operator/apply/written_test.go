package apply

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

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
	live := fake.NewClientBuilder().WithScheme(s).WithObjects(existing, owner.DeepCopy()).Build()
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

// TestNotCreatedUnderDeletedOwner: a missing child of a TrainJob built
// before is not created again when the API server says the TrainJob is
// being deleted or gone, though the cache does not show it yet.
func TestNotCreatedUnderDeletedOwner(t *testing.T) {
	s := scheme.New()
	owner := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "alpha", Namespace: "ns", UID: "uid-1"}}
	owner.Status.Conditions = []metav1.Condition{{Type: trainer.TrainJobComponentsCreated, Status: metav1.ConditionTrue}}
	deleting := owner.DeepCopy()
	deleting.Finalizers = []string{"example.com/hold"}
	deleting.DeletionTimestamp = ptr.To(metav1.Now())
	recreated := owner.DeepCopy()
	recreated.UID = "uid-2"
	for name, live := range map[string][]client.Object{"being deleted": {deleting}, "gone": nil, "re-created": {recreated}} {
		t.Run(name, func(t *testing.T) {
			cache := fake.NewClientBuilder().WithScheme(s).Build()
			a := New(cache, fake.NewClientBuilder().WithScheme(s).WithObjects(live...).Build(), s, nil, nil)
			child := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "alpha-hostfile", Namespace: "ns"}}
			if err := a.Ensure(t.Context(), owner, []client.Object{child}); !errors.Is(err, ErrOwnerDeleted) {
				t.Fatalf("Ensure: %v, want ErrOwnerDeleted", err)
			}
			if err := cache.Get(t.Context(), client.ObjectKeyFromObject(child), &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
				t.Errorf("the child was created: %v", err)
			}
		})
	}
}

// TestCreateRaceFindsTheExistingObject: a create that meets AlreadyExists
// (the cache had not seen the object yet: a crash after the create, before
// the status write) reads the object live and goes on with it, when the
// TrainJob controls it; one it does not control stops Ensure with a
// NotControlledError and is left as it was.
func TestCreateRaceFindsTheExistingObject(t *testing.T) {
	s := scheme.New()
	owner := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "alpha", Namespace: "ns", UID: "uid-1"}}
	hostfile := func(refs ...metav1.OwnerReference) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "alpha-hostfile", Namespace: "ns", OwnerReferences: refs},
			Data: map[string]string{"hostfile": "a slots=1\n"}}
	}
	ours := hostfile(*metav1.NewControllerRef(owner, trainer.GroupVersion.WithKind(trainer.TrainJobKind)))
	theirs := hostfile()
	theirs.Data["hostfile"] = "theirs slots=8\n"
	for name, tc := range map[string]struct {
		existing client.Object
		check    func(error) bool
	}{
		"controlled by the TrainJob": {ours, func(err error) bool { return err == nil }},
		"someone else's": {theirs, func(err error) bool {
			var nc *pipeline.NotControlledError
			return errors.As(err, &nc)
		}},
	} {
		t.Run(name, func(t *testing.T) {
			existing, _, err := pipeline.AsApplied(s, tc.existing.DeepCopyObject().(client.Object), "alpha")
			if err != nil {
				t.Fatal(err)
			}
			store := fake.NewClientBuilder().WithScheme(s).WithObjects(existing, owner.DeepCopy()).Build()
			// The cache has not seen the object: a read misses it, a create meets it.
			stale := interceptor.NewClient(store, interceptor.Funcs{
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					if _, ok := obj.(*corev1.ConfigMap); ok {
						return apierrors.NewNotFound(corev1.Resource("configmaps"), key.Name)
					}
					return c.Get(ctx, key, obj, opts...)
				},
			})
			err = New(stale, store, s, nil, nil).Ensure(t.Context(), owner, []client.Object{ours.DeepCopy()})
			if !tc.check(err) {
				t.Fatalf("Ensure: %v", err)
			}
			got := &corev1.ConfigMap{}
			if err := store.Get(t.Context(), client.ObjectKeyFromObject(existing), got); err != nil {
				t.Fatal(err)
			}
			if want := tc.existing.(*corev1.ConfigMap).Data; !cmp.Equal(got.Data, want) {
				t.Errorf("data %v, want %v", got.Data, want)
			}
		})
	}
}
