package apply

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
)

// Delete deletes the child of owner that obj names (its kind, namespace and
// name), when owner controls it, with the UID it read as precondition: an
// object that took the name meanwhile is not deleted. None, or one that
// owner does not control, is left alone.
func (a *Applier) Delete(ctx context.Context, owner *trainer.TrainJob, obj client.Object) error {
	child, err := a.child(ctx, owner, obj)
	if err != nil || child == nil {
		return err
	}
	if err := a.client.Delete(ctx, child, client.Preconditions{UID: ptr.To(child.GetUID())}); client.IgnoreNotFound(err) != nil {
		return &Error{Kind: child.GetObjectKind().GroupVersionKind().Kind, Name: child.GetName(), Err: err}
	}
	return nil
}

// Exists tells whether owner controls an object of the kind, namespace and
// name of obj.
func (a *Applier) Exists(ctx context.Context, owner *trainer.TrainJob, obj client.Object) (bool, error) {
	child, err := a.child(ctx, owner, obj)
	return child != nil, err
}

// child is owner's child that obj names, nil when there is none or owner
// does not control the object of that name. It reads the cache and, when the
// cache has no child (it may not have seen the operator's create yet), the
// API server.
func (a *Applier) child(ctx context.Context, owner *trainer.TrainJob, obj client.Object) (client.Object, error) {
	gvk, err := apiutil.GVKForObject(obj, a.scheme)
	if err != nil {
		return nil, err
	}
	fail := func(err error) error { return &Error{Kind: gvk.Kind, Name: obj.GetName(), Err: err} }
	current, err := a.read(ctx, a.client, obj, gvk)
	if err != nil {
		return nil, fail(err)
	}
	if current == nil || !metav1.IsControlledBy(current, owner) {
		if current, err = a.read(ctx, a.live, obj, gvk); err != nil {
			return nil, fail(err)
		}
	}
	if current == nil || !metav1.IsControlledBy(current, owner) {
		return nil, nil
	}
	return current, nil
}
