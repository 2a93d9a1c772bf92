package pipeline

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
