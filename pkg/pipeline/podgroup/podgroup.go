// Package podgroup holds what the gang-scheduling plugins (CoScheduling,
// Volcano) share: the size of a TrainJob's gang, when a PodGroup is left
// alone, and the watches: the owned PodGroups, and the requeues of
// suspended TrainJobs when LimitRanges or RuntimeClasses change.
package podgroup

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
)

// GangSize is how many pods the TrainJob runs, initializers included, and
// what they request together.
func GangSize(info *pipeline.RuntimeInfo) (int32, corev1.ResourceList) {
	var members int32
	total := corev1.ResourceList{}
	for _, ps := range info.PodSets {
		members += ps.Count
		for name, perPod := range ps.SinglePodRequests {
			// Mul changes a quantity in place, and perPod may share its
			// digits with the pod set's.
			all := perPod.DeepCopy()
			all.Mul(int64(ps.Count))
			sum := total[name]
			sum.Add(all)
			total[name] = sum
		}
	}
	return members, total
}

// SuspendedTrainJobsInNamespace requeues the suspended TrainJobs of a
// LimitRange's namespace.
func SuspendedTrainJobsInNamespace(c client.Client) handler.MapFunc {
	return func(ctx context.Context, limitRange client.Object) []reconcile.Request {
		var tjs trainer.TrainJobList
		if err := c.List(ctx, &tjs, client.InNamespace(limitRange.GetNamespace())); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Listing TrainJobs to requeue", "limitRange", klog.KObj(limitRange))
			return nil
		}
		return suspended(tjs.Items, func(*trainer.TrainJob) bool { return true })
	}
}

// runtimeKey names a TrainingRuntime (kind, namespace, name) or a
// ClusterTrainingRuntime (kind, "", name).
type runtimeKey struct{ kind, namespace, name string }

// SuspendedTrainJobsUsingRuntimeClass requeues the suspended TrainJobs whose
// runtime runs pods with a RuntimeClass.
func SuspendedTrainJobsUsingRuntimeClass(c client.Client) handler.MapFunc {
	return func(ctx context.Context, runtimeClass client.Object) []reconcile.Request {
		log := ctrl.LoggerFrom(ctx).WithValues("runtimeClass", klog.KObj(runtimeClass))
		var trs trainer.TrainingRuntimeList
		var ctrs trainer.ClusterTrainingRuntimeList
		var tjs trainer.TrainJobList
		for _, l := range []client.ObjectList{&trs, &ctrs, &tjs} {
			if err := c.List(ctx, l); err != nil {
				log.Error(err, "Listing runtimes and TrainJobs to requeue")
				return nil
			}
		}
		users := map[runtimeKey]bool{}
		for _, r := range trs.Items {
			if usesRuntimeClass(&r.Spec, runtimeClass.GetName()) {
				users[runtimeKey{trainer.TrainingRuntimeKind, r.Namespace, r.Name}] = true
			}
		}
		for _, r := range ctrs.Items {
			if usesRuntimeClass(&r.Spec, runtimeClass.GetName()) {
				users[runtimeKey{trainer.ClusterTrainingRuntimeKind, "", r.Name}] = true
			}
		}
		if len(users) == 0 {
			return nil
		}
		return suspended(tjs.Items, func(tj *trainer.TrainJob) bool {
			gk := pipeline.RuntimeRefGroupKind(tj)
			key := runtimeKey{gk.Kind, "", tj.Spec.RuntimeRef.Name}
			if gk.Kind == trainer.TrainingRuntimeKind {
				key.namespace = tj.Namespace
			}
			return gk.Group == trainer.GroupVersion.Group && users[key]
		})
	}
}

func usesRuntimeClass(spec *trainer.TrainingRuntimeSpec, name string) bool {
	for _, rj := range spec.Template.Spec.ReplicatedJobs {
		if ptr.Deref(rj.Template.Spec.Template.Spec.RuntimeClassName, "") == name {
			return true
		}
	}
	return false
}

// suspended returns a request for every suspended TrainJob that match accepts.
func suspended(tjs []trainer.TrainJob, match func(*trainer.TrainJob) bool) []reconcile.Request {
	var reqs []reconcile.Request
	for k := range tjs {
		if ptr.Deref(tjs[k].Spec.Suspend, false) && match(&tjs[k]) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&tjs[k])})
		}
	}
	return reqs
}
