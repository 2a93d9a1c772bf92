// Package stage derives where a TrainJob is in its pipeline from what the
// API server holds about it: conditions and jobsStatus, which upstream
// Kubeflow Trainer writes too. The operator's by-stage metric and the CLI's
// list and status use it, so they can never disagree. It must not read
// anything that only this project's operator writes.
//
// One stage needs more than the TrainJob: Queued, a TrainJob that Kueue holds
// suspended until its ClusterQueue admits it, is told apart from Suspended by
// its Kueue Workload (InQueue). Readers of Workloads (the CLI's list and
// status) show it; Of, and so the operator's metric, count it as Suspended.
package stage

import (
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
)

// Stage is where a TrainJob is.
type Stage string

// The stages, in pipeline order.
const (
	// Pending: no Job of the TrainJob has started yet. A Job whose pods wait for a node (unschedulable,
	// pulling images) is active but has not started: JobSet counts it active, not ready.
	Pending Stage = "Pending"
	// Queued: Kueue holds the TrainJob suspended until its ClusterQueue admits it (InQueue).
	Queued Stage = "Queued"
	// Suspended: spec.suspend is true.
	Suspended Stage = "Suspended"
	// Initializing: a dataset or model initializer Job has started, no trainer Job yet.
	Initializing Stage = "Initializing"
	// Training: a trainer Job (node, launcher) has started: all its pods are ready, or it has ended; or,
	// after the initializers succeeded, it exists (Begun).
	Training Stage = "Training"
	// Complete and Failed are terminal.
	Complete Stage = "Complete"
	Failed   Stage = "Failed"
)

// All lists every stage Of derives from the TrainJob alone, in pipeline order.
var All = []Stage{Pending, Suspended, Initializing, Training, Complete, Failed}

// WithQueued lists All and Queued, in pipeline order: the stages a reader of Kueue's Workloads shows.
var WithQueued = []Stage{Pending, Queued, Suspended, Initializing, Training, Complete, Failed}

// Terminal tells whether a TrainJob in stage s will not change any more.
func (s Stage) Terminal() bool { return s == Complete || s == Failed }

// IsInitializer tells whether a replicated job is an initializer step.
func IsInitializer(replicatedJob string) bool {
	return replicatedJob == trainer.DatasetInitializerName || replicatedJob == trainer.ModelInitializerName
}

// Started tells whether a replicated job has started, from its Job counts in jobsStatus: one of its Jobs is
// ready (JobSet counts a Job ready when all its pods are ready or succeeded) or has ended. Active alone is
// not enough: a Job is active from the moment it exists, while its pods wait for a node that may never come;
// and while any of its pods is not ready (scheduled on no node, pulling its image, restarting its container)
// the Job is not ready, so a replicated job that has not ended reads as started only while all its pods run.
// A Job that ended keeps its stage until the TrainJob is terminal: not after the trainer's Jobs succeed and
// before the controller writes Complete, nor after the initializers succeed and before the trainer's Job
// is created, does the stage go back to Pending.
func Started(js trainer.JobStatus) bool {
	return ptr.Deref(js.Ready, 0) > 0 || ptr.Deref(js.Succeeded, 0) > 0 || ptr.Deref(js.Failed, 0) > 0
}

// Begun tells whether the stage of replicated job js has begun, among the replicated jobs all: js has
// Started, or it is a trainer job that exists (active) after every initializer succeeded. The pipeline is
// then past initializing whatever the trainer's pods do: wait for a node, restart, or finish one by one (a
// pod that has succeeded is no longer ready, and its Job counts it succeeded only a moment later, so in
// between the trainer's Job counts neither ready nor succeeded).
func Begun(all []trainer.JobStatus, js trainer.JobStatus) bool {
	if Started(js) {
		return true
	}
	if IsInitializer(js.Name) || ptr.Deref(js.Active, 0) == 0 {
		return false
	}
	initializers := 0
	for _, other := range all {
		if !IsInitializer(other.Name) {
			continue
		}
		if ptr.Deref(other.Succeeded, 0) == 0 || ptr.Deref(other.Active, 0) > 0 {
			return false
		}
		initializers++
	}
	return initializers > 0
}

// Of returns the stage of a TrainJob. It reads only the TrainJob (not its pods), so the list of a thousand
// TrainJobs, the operator's metric and one TrainJob's status all agree.
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
		if !Begun(tj.Status.JobsStatus, js) {
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

// Workload is what InQueue needs of the Kueue Workload of a TrainJob.
type Workload struct {
	// Admitted: its Admitted condition is True, and it is not being evicted (Evicted is not True).
	Admitted bool
	// Inactive: its spec.active is false: someone stopped it (kubectl trainjob suspend, kueuectl stop
	// workload), and Kueue will not admit it until it is active again.
	Inactive bool
}

// InQueue returns the stage of tj, which a Kueue LocalQueue queues (it has Kueue's queue label and Kueue's
// Workloads are served), given its Workload (nil: Kueue has not made it yet). A TrainJob that Kueue keeps
// suspended (spec.suspend, set by Kueue's webhook at creation and again at eviction) while its Workload is
// active and not admitted is Queued; one whose Workload was stopped is Suspended, as Of says.
func InQueue(tj *trainer.TrainJob, wl *Workload) Stage {
	st := Of(tj)
	if st != Suspended || !ptr.Deref(tj.Spec.Suspend, false) {
		return st
	}
	if wl != nil && (wl.Inactive || wl.Admitted) {
		// Admitted but still suspended: Kueue is about to resume it.
		return st
	}
	return Queued
}

// Names are the names of the stages of All, in pipeline order.
func Names() []string { return NamesOf(All) }

// NamesOf are the names of stages.
func NamesOf(stages []Stage) []string {
	names := make([]string, len(stages))
	for k, s := range stages {
		names[k] = string(s)
	}
	return names
}

// Parse reads a stage name of All, in any case.
func Parse(name string) (Stage, bool) { return ParseOf(All, name) }

// ParseOf reads the name of one of stages, in any case.
func ParseOf(stages []Stage, name string) (Stage, bool) {
	for _, s := range stages {
		if strings.EqualFold(name, string(s)) {
			return s, true
		}
	}
	return "", false
}
