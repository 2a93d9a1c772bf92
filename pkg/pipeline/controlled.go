package pipeline

import (
	"context"
	"fmt"
	"reflect"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
)

// NotControlledError reports an object that has the name of a TrainJob's
// child but that the TrainJob does not control (by UID): a user's object, an
// orphan, or the child of a deleted TrainJob of the same name that the
// garbage collector has not removed yet. It is never written, deleted or read
// as the TrainJob's.
type NotControlledError struct {
	Kind, Namespace, Name string
	// Controller is the object's controller, nil when it has none.
	Controller *metav1.OwnerReference
	// TrainJob names the TrainJob that wanted the name.
	TrainJob string
}

func (e *NotControlledError) Error() string {
	by := "it has no controller"
	if c := e.Controller; c != nil {
		by = fmt.Sprintf("its controller is %s %q (uid %s)", c.Kind, c.Name, c.UID)
		if c.Kind == trainer.TrainJobKind && c.Name == e.TrainJob {
			by = fmt.Sprintf("its controller is an earlier TrainJob %q (uid %s), not yet garbage-collected", c.Name, c.UID)
		}
	}
	return fmt.Sprintf("%s %s/%s exists and is not controlled by TrainJob %q: %s; it is left alone, and the TrainJob is built once the name is free",
		e.Kind, e.Namespace, e.Name, e.TrainJob, by)
}

// CheckControlled returns a NotControlledError unless obj, of kind, is
// controlled by trainJob (metav1.IsControlledBy: the same UID).
func CheckControlled(obj client.Object, kind string, trainJob *trainer.TrainJob) error {
	if metav1.IsControlledBy(obj, trainJob) {
		return nil
	}
	return &NotControlledError{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(),
		Controller: metav1.GetControllerOf(obj), TrainJob: trainJob.Name}
}

// GetControlled reads the object named key into obj, as the child of
// trainJob: an object of that name that trainJob does not control is, for
// the caller, not there, and GetControlled returns a NotFound API error that
// wraps a NotControlledError. A plugin reads its children only this way, so
// that it never derives status or decisions from someone else's object.
func GetControlled(ctx context.Context, r client.Reader, trainJob *trainer.TrainJob, key client.ObjectKey, obj client.Object) error {
	if err := r.Get(ctx, key, obj); err != nil {
		return err
	}
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	if kind == "" {
		kind = reflect.TypeOf(obj).Elem().Name()
	}
	if err := CheckControlled(obj, kind, trainJob); err != nil {
		return &notControlledNotFound{StatusError: apierrors.NewNotFound(schema.GroupResource{Resource: kind}, key.Name), cause: err.(*NotControlledError)}
	}
	return nil
}

// notControlledNotFound is NotFound for the API machinery's checks and a
// NotControlledError for errors.As.
type notControlledNotFound struct {
	*apierrors.StatusError
	cause *NotControlledError
}

func (e *notControlledNotFound) Error() string { return e.cause.Error() }
func (e *notControlledNotFound) Unwrap() error { return e.cause }
