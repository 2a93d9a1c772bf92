package pipeline

import (
	"context"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
)

// OwnedObjectMeta is the metadata of an object a plugin builds for a
// TrainJob: named after the TrainJob plus suffix ("" for the TrainJob's own
// name), in its namespace, and controlled by it, so that it is deleted with
// the TrainJob and its changes requeue it.
func OwnedObjectMeta(trainJob *trainer.TrainJob, suffix string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:            trainJob.Name + suffix,
		Namespace:       trainJob.Namespace,
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(trainJob, trainer.GroupVersion.WithKind(trainer.TrainJobKind))},
	}
}

// OwnsNamed watches the objects of obj's kind that the TrainJobs own and
// whose name ends with suffix: those a plugin builds with
// OwnedObjectMeta(trainJob, suffix), so that one deleted or edited is put
// back; other objects of that kind a TrainJob owns do not wake the
// controller on the plugin's account. The watch shares the informer of
// whole objects that the operator reads them from (it tells drift from
// their content), rather than adding a metadata-only one: that one would
// cache each of them a second time.
func OwnsNamed(obj client.Object, suffix string) ReconcilerBuilder {
	return func(b *builder.Builder, _ client.Client, _ cache.Cache) *builder.Builder {
		return Owns(b, obj, builder.WithPredicates(NameSuffix(suffix)))
	}
}

// NameSuffix passes the events of objects whose name ends with suffix.
func NameSuffix(suffix string) predicate.Predicate {
	return predicate.NewPredicateFuncs(func(o client.Object) bool { return strings.HasSuffix(o.GetName(), suffix) })
}

// Owns watches the objects of obj's kind that a TrainJob controls, and
// wakes the controller for that TrainJob, as the builder's Owns does. The
// builder's asks the RESTMapper whether the owner's kind is namespaced at
// each event of each owned object; a TrainJob always is.
func Owns(b *builder.Builder, obj client.Object, opts ...builder.WatchesOption) *builder.Builder {
	return b.Watches(obj, handler.EnqueueRequestsFromMapFunc(ControllingTrainJob), opts...)
}

// ControllingTrainJob is the request for the TrainJob that controls obj,
// if one does.
func ControllingTrainJob(_ context.Context, obj client.Object) []reconcile.Request {
	ref := TrainJobController(obj)
	if ref == nil {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: ref.Name}}}
}

// TrainJobController is obj's controller reference when it names a
// TrainJob (of any version), else nil.
func TrainJobController(obj metav1.Object) *metav1.OwnerReference {
	ref := metav1.GetControllerOfNoCopy(obj)
	if ref == nil || ref.Kind != trainer.TrainJobKind {
		return nil
	}
	if group, _, found := strings.Cut(ref.APIVersion, "/"); !found || group != trainer.GroupVersion.Group {
		return nil
	}
	return ref
}
