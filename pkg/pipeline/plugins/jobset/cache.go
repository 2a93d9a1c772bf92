package jobset

import (
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/intern"
)

// TrimForCache drops from a JobSet what the plugin never reads from the
// operator's cache: everything in its spec but whether it is suspended and
// who manages it, and the names of its replicated jobs until the JobSet
// controller reports on them. The pod templates go, by far the largest part
// of a JobSet: the plugin reads its JobSet only for Status (the status, and
// the replicated jobs' names before the JobSet controller reports), for
// whether it runs (spec.suspend) and at admission (the status); whether the
// JobSet is as built the operator tells from the hash it applied with, in
// the metadata. Once the status lists the replicated jobs, their names in
// the spec go too: a ReplicatedJob holds its pod template by value, so even
// one that keeps only its name is larger than the rest of the cached JobSet.
func (j *JobSet) TrimForCache(obj client.Object) {
	js, ok := obj.(*jobsetv1alpha2.JobSet)
	if !ok {
		return
	}
	var jobs []jobsetv1alpha2.ReplicatedJob
	if js.Status.ReplicatedJobsStatus == nil && len(js.Spec.ReplicatedJobs) > 0 {
		jobs = make([]jobsetv1alpha2.ReplicatedJob, len(js.Spec.ReplicatedJobs))
		for k, rj := range js.Spec.ReplicatedJobs {
			jobs[k] = jobsetv1alpha2.ReplicatedJob{Name: rj.Name}
		}
	}
	js.Spec = jobsetv1alpha2.JobSetSpec{Suspend: js.Spec.Suspend, ManagedBy: js.Spec.ManagedBy, ReplicatedJobs: jobs}
	// What every JobSet of a runtime repeats (see package intern).
	intern.Pointer(js.Spec.ManagedBy)
	intern.Conditions(js.Status.Conditions)
	for i := range js.Status.ReplicatedJobsStatus {
		js.Status.ReplicatedJobsStatus[i].Name = intern.String(js.Status.ReplicatedJobsStatus[i].Name)
	}
	js.Status.TerminalState = intern.String(js.Status.TerminalState)
}
