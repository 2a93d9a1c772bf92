package podgroup

import (
	"context"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
)

// Fixed reports whether the TrainJob runs and its PodGroup exists: the gang
// of a running job is fixed, so the plugin then builds no PodGroup. A
// suspended TrainJob's PodGroup is rebuilt. A PodGroup of the TrainJob's
// name that it does not control is not its PodGroup: the plugin builds one,
// and the applier refuses to write over that one and says whose it is.
// podGroup is an empty PodGroup of the plugin's type, read into.
func Fixed(ctx context.Context, c client.Reader, trainJob *trainer.TrainJob, podGroup client.Object) (bool, error) {
	if ptr.Deref(trainJob.Spec.Suspend, false) {
		return false, nil
	}
	if err := pipeline.GetControlled(ctx, c, trainJob, client.ObjectKeyFromObject(trainJob), podGroup); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return true, nil
}

// ReconcilerBuilders watch the PodGroups (of kind gvk, Go type of podGroup)
// the TrainJobs own, and LimitRanges and RuntimeClasses, which change what
// a suspended TrainJob's pods request. Where the cluster does not serve
// the PodGroup's kind (its CRD is missing, or offline) there is nothing to
// watch.
func ReconcilerBuilders(mapper meta.RESTMapper, log logr.Logger, gvk schema.GroupVersionKind, podGroup client.Object) []pipeline.ReconcilerBuilder {
	if _, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
		log.Error(err, "PodGroup CRDs must be installed in advance")
		return nil
	}
	return []pipeline.ReconcilerBuilder{
		func(b *builder.Builder, _ client.Client, _ cache.Cache) *builder.Builder {
			return pipeline.Owns(b, podGroup)
		},
		func(b *builder.Builder, cl client.Client, _ cache.Cache) *builder.Builder {
			return b.Watches(&corev1.LimitRange{}, handler.EnqueueRequestsFromMapFunc(SuspendedTrainJobsInNamespace(cl)))
		},
		func(b *builder.Builder, cl client.Client, _ cache.Cache) *builder.Builder {
			return b.Watches(&nodev1.RuntimeClass{}, handler.EnqueueRequestsFromMapFunc(SuspendedTrainJobsUsingRuntimeClass(cl)))
		},
	}
}
