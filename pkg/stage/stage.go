// Package stage derives where a TrainJob is in its pipeline from what the
// API server holds about it: conditions and jobsStatus, which upstream
// Kubeflow Trainer writes too. The operator's by-stage metric and the CLI's
// list and status use it, so they can never disagree. It must not read
// anything that only this project's operator writes.
package stage

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
)

// Stage is where a TrainJob is.
type Stage string

// The stages, in pipeline order.
const (
	// Pending: no Job of the TrainJob has started yet.
	Pending Stage = "Pending"
	// Suspended: spec.suspend is true.
	Suspended Stage = "Suspended"
	// Initializing: a dataset or model initializer Job has started, no trainer Job yet.
	Initializing Stage = "Initializing"
	// Training: a trainer Job (node, launcher) has started.
	Training Stage = "Training"
	// Complete and Failed are terminal.
	Complete Stage = "Complete"
	Failed   Stage = "Failed"
)

// All lists every stage in pipeline order.
var All = []Stage{Pending, Suspended, Initializing, Training, Complete, Failed}

// Terminal tells whether a TrainJob in stage s will not change any more.
func (s Stage) Terminal() bool { return s == Complete || s == Failed }

// IsInitializer tells whether a replicated job is an initializer step.
func IsInitializer(replicatedJob string) bool {
	return replicatedJob == trainer.DatasetInitializerName || replicatedJob == trainer.ModelInitializerName
}

// Of returns the stage of a TrainJob.
func Of(tj *trainer.TrainJob) Stage {
	conds := tj.Status.Conditions
	switch {
	case meta.IsStatusConditionTrue(conds, trainer.TrainJobFailed):
		return Failed
	case meta.IsStatusConditionTrue(conds, trainer.TrainJobComplete):
		return Complete
	case ptr.Deref(tj.Spec.Suspend, false) || meta.IsStatusConditionTrue(conds, trainer.TrainJobSuspended):
		return Suspended
	}
	initializing, training := false, false
	for _, js := range tj.Status.JobsStatus {
		// A Job that has run keeps its stage until the TrainJob is terminal, so the stage never goes back to
		// Pending: not after the trainer's Jobs succeed and before the controller writes Complete, nor after
		// the initializers succeed and before the trainer's Job is created.
		started := ptr.Deref(js.Active, 0) > 0 || ptr.Deref(js.Succeeded, 0) > 0 || ptr.Deref(js.Failed, 0) > 0
		if !started {
			continue
		}
		if IsInitializer(js.Name) {
			initializing = true
		} else {
			training = true
		}
	}
	switch {
	case training:
		return Training
	case initializing:
		return Initializing
	}
	return Pending
}
