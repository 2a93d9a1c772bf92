package pipeline

import (
	corev1 "k8s.io/api/core/v1"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
)

// SizeTrainer sets the trainer step's pod count to spec.trainer.numNodes,
// when the TrainJob sets it, and returns the trainer's `node` container,
// which an ML policy then configures, with its pod set. The pod set is nil
// when the runtime has no trainer step; the container is nil also when the
// step has no `node` container or the TrainJob no spec.trainer (upstream
// then leaves the container alone).
func (i *RuntimeInfo) SizeTrainer(trainJob *trainer.TrainJob) (*PodSet, *corev1.Container) {
	ps := i.TrainerPodSet()
	if ps == nil {
		return nil, nil
	}
	tr := trainJob.Spec.Trainer
	if tr == nil {
		return ps, nil
	}
	if tr.NumNodes != nil {
		ps.Count = *tr.NumNodes
	}
	return ps, ps.Container(trainer.Node)
}
