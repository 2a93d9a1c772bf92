package controller

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
)

// RuntimeFinalizerReconciler takes upstream's legacy
// trainer.kubeflow.org/resource-in-use finalizer off TrainingRuntimes or
// ClusterTrainingRuntimes, so that a runtime an older controller protected
// can be deleted: TrainJobs now run from their snapshot.
type RuntimeFinalizerReconciler[T client.Object] struct {
	client client.Client
	newObj func() T
}

// SetupRuntimeControllers registers the TrainingRuntime and
// ClusterTrainingRuntime controllers.
func SetupRuntimeControllers(mgr manager.Manager) error {
	tr := &RuntimeFinalizerReconciler[*trainer.TrainingRuntime]{client: mgr.GetClient(), newObj: func() *trainer.TrainingRuntime { return &trainer.TrainingRuntime{} }}
	if err := tr.setup(mgr, TrainingRuntimeControllerName); err != nil {
		return err
	}
	ctr := &RuntimeFinalizerReconciler[*trainer.ClusterTrainingRuntime]{client: mgr.GetClient(), newObj: func() *trainer.ClusterTrainingRuntime { return &trainer.ClusterTrainingRuntime{} }}
	return ctr.setup(mgr, ClusterTrainingRuntimeControllerName)
}

func (r *RuntimeFinalizerReconciler[T]) setup(mgr manager.Manager, name string) error {
	return builder.ControllerManagedBy(mgr).
		Named(name).
		For(r.newObj(), builder.WithPredicates(predicate.NewPredicateFuncs(hasLegacyFinalizer))).
		Complete(r)
}

func hasLegacyFinalizer(obj client.Object) bool {
	return controllerutil.ContainsFinalizer(obj, trainer.ResourceInUseFinalizer)
}

// Reconcile removes the legacy finalizer with a merge patch that fails if
// the runtime changed since it was read, so that no other finalizer is lost.
func (r *RuntimeFinalizerReconciler[T]) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	obj := r.newObj()
	if err := r.client.Get(ctx, req.NamespacedName, obj); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !hasLegacyFinalizer(obj) {
		return reconcile.Result{}, nil
	}
	patch := client.MergeFromWithOptions(obj.DeepCopyObject().(client.Object), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(obj, trainer.ResourceInUseFinalizer)
	return reconcile.Result{}, client.IgnoreNotFound(r.client.Patch(ctx, obj, patch))
}
