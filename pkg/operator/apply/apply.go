// Package apply is the operator's one write path: it makes the objects the
// Build phase returns for a TrainJob exist as built (Ensure), and writes the
// TrainJob's status (WriteStatus). The rules of a trusted controller live
// here, once:
//
//   - ownership: an object is the TrainJob's child only if the TrainJob
//     controls it (metav1.IsControlledBy, by UID). One of the same name that
//     it does not control is never created over, applied, adopted or
//     deleted: Ensure returns a pipeline.NotControlledError;
//   - drift: a child someone else changed (a field the operator set, a label,
//     an annotation) is applied again, as upstream's apply at every
//     reconcile would, but without a write when nothing changed;
//   - create versus apply: a new object is created, an existing one is
//     server-side applied, after moving the create's fields to the apply
//     (takeOverCreate) so that a field left out is removed;
//   - read after write: an object a reconcile created is what its plugins
//     read next (Written), as the cache sees it only later. Only creates:
//     an object read live or returned by an apply is newer than the cache,
//     and a status derived from it would step back at the next reconcile,
//     which reads the cache.
//
// It must not know any plugin: every kind is handled alike.
package apply

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
)

// FieldManager is the server-side apply field manager of every object the
// operator writes.
const FieldManager = "trainer"

// Applier writes a TrainJob's children and its status.
type Applier struct {
	// client reads from the cache and writes to the API server.
	client client.Client
	// live reads the API server, where the cache may lag behind.
	live    client.Reader
	scheme  *runtime.Scheme
	creates *creator
	status  *statusWrites
}

// New is the Applier of a manager's clients. config and httpClient reach
// the API server for the creates of custom resources; without them (unit
// tests on a fake client) every kind is created through c.
func New(c client.Client, live client.Reader, scheme *runtime.Scheme, config *rest.Config, httpClient *http.Client) *Applier {
	return &Applier{client: c, live: live, scheme: scheme, creates: newCreator(c, config, httpClient, scheme), status: newStatusWrites()}
}

// Error is a failure to write one object for a TrainJob.
type Error struct {
	Kind, Name string
	Err        error
}

func (e *Error) Error() string { return fmt.Sprintf("apply %s %s: %v", e.Kind, e.Name, e.Err) }
func (e *Error) Unwrap() error { return e.Err }

// Ensure makes every object of objs exist as built, in order, for owner,
// and stops at the first failure. An object that exists and that owner does
// not control stops it with a pipeline.NotControlledError; a conflict with
// another writer is an API Conflict error (the caller retries).
func (a *Applier) Ensure(ctx context.Context, owner *trainer.TrainJob, objs []client.Object) error {
	// Once a reconcile has built, the objects may exist where the cache
	// does not show them yet.
	mayExist := meta.FindStatusCondition(owner.Status.Conditions, trainer.TrainJobComponentsCreated) != nil
	ownerChecked := !mayExist
	for _, obj := range objs {
		err := a.ensure(ctx, owner, obj, mayExist, func() error {
			if ownerChecked {
				return nil
			}
			ownerChecked = true
			return a.ownerLive(ctx, owner)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// ErrOwnerDeleted reports a TrainJob that is being deleted, or is gone,
// although the cache does not show it yet: its children are not created
// again.
var ErrOwnerDeleted = errors.New("the TrainJob is being deleted")

// ownerLive is nil when owner, read from the API server, is still there and
// not being deleted. It is asked before a child of a TrainJob built before
// is created again: the child's deletion (by the garbage collector of a
// TrainJob deleted in the foreground, say) may reach the operator before
// the TrainJob's deletionTimestamp does, and a child created under a
// terminating owner would hold up or outlive its deletion.
func (a *Applier) ownerLive(ctx context.Context, owner *trainer.TrainJob) error {
	live := &metav1.PartialObjectMetadata{}
	live.SetGroupVersionKind(trainer.GroupVersion.WithKind(trainer.TrainJobKind))
	switch err := a.live.Get(ctx, client.ObjectKeyFromObject(owner), live); {
	case apierrors.IsNotFound(err):
		return ErrOwnerDeleted
	case err != nil:
		return err
	case live.UID != owner.UID || !live.DeletionTimestamp.IsZero():
		return ErrOwnerDeleted
	}
	return nil
}

// ensure makes obj exist as built; before creating it, it asks creating
// whether it may (see ownerLive).
func (a *Applier) ensure(ctx context.Context, owner *trainer.TrainJob, obj client.Object, mayExist bool, creating func() error) error {
	built, gvk, err := pipeline.AsApplied(a.scheme, obj, owner.Name)
	if err != nil {
		return &Error{Kind: fmt.Sprintf("%T", obj), Name: obj.GetName(), Err: err}
	}
	fail := func(err error) error { return &Error{Kind: gvk.Kind, Name: built.GetName(), Err: err} }
	current, err := a.current(ctx, owner, built, gvk, mayExist)
	if err != nil {
		return fail(err)
	}
	if current == nil {
		if err := creating(); err != nil {
			return err
		}
		err := a.creates.create(ctx, built, gvk)
		if err == nil {
			remember(ctx, gvk, built)
			return nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return fail(err)
		}
		// Someone else's, or the operator's own that neither the cache
		// nor the last live read had yet.
		if current, err = a.read(ctx, a.live, built, gvk); err != nil {
			return fail(err)
		}
		if current == nil {
			return fail(apierrors.NewConflict(schema.GroupResource{Group: gvk.Group, Resource: gvk.Kind}, built.GetName(),
				fmt.Errorf("it was deleted while being created")))
		}
	}
	if err := pipeline.CheckControlled(current, gvk.Kind, owner); err != nil {
		return err
	}
	if asBuilt(current, built) {
		return nil
	}
	u, err := toApply(built, gvk)
	if err != nil {
		return fail(err)
	}
	if err := a.takeOverCreate(ctx, u, current); err != nil {
		return fail(err)
	}
	if err := a.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return fail(err)
	}
	return nil
}

// current is the object built names as it is now, nil when it does not
// exist. It reads the cache and, when the cache does not have the object as
// built (the cache may not have seen the last write yet: the operator's own,
// or the deletion of a name's previous holder), the API server: always when
// the cache has it, when the cache misses it only if an earlier reconcile
// built it (mayExist). The first reconcile of a TrainJob thus reads nothing
// from the API server.
func (a *Applier) current(ctx context.Context, owner *trainer.TrainJob, built client.Object, gvk schema.GroupVersionKind, mayExist bool) (client.Object, error) {
	cached, err := a.read(ctx, a.client, built, gvk)
	switch {
	case err != nil:
		return nil, err
	case cached == nil && !mayExist:
		return nil, nil
	case cached != nil && metav1.IsControlledBy(cached, owner) && asBuilt(cached, built):
		return cached, nil
	}
	return a.read(ctx, a.live, built, gvk)
}

// read reads the object built names from r; nil when it does not exist.
func (a *Applier) read(ctx context.Context, r client.Reader, built client.Object, gvk schema.GroupVersionKind) (client.Object, error) {
	obj, err := a.newObject(gvk)
	if err != nil {
		return nil, err
	}
	switch err := r.Get(ctx, client.ObjectKeyFromObject(built), obj); {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return obj, nil
}

// asBuilt tells whether current is as the operator built it: it carries the
// hash of built, and nobody changed what the operator set since (drift).
func asBuilt(current, built client.Object) bool {
	return current.GetAnnotations()[pipeline.AppliedHashAnnotation] == built.GetAnnotations()[pipeline.AppliedHashAnnotation] && !drifted(current, built)
}

// toApply converts an object as applied (pipeline.AsApplied) for server-side apply: without status
// and creationTimestamp, which only the server sets.
func toApply(built client.Object, gvk schema.GroupVersionKind) (*unstructured.Unstructured, error) {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(built)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: content}
	u.SetGroupVersionKind(gvk)
	delete(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return u, nil
}

func (a *Applier) newObject(gvk schema.GroupVersionKind) (client.Object, error) {
	obj, err := a.scheme.New(gvk)
	if err != nil {
		return nil, err
	}
	co, ok := obj.(client.Object)
	if !ok {
		return nil, fmt.Errorf("%s is not an object", gvk)
	}
	co.GetObjectKind().SetGroupVersionKind(gvk)
	return co, nil
}
