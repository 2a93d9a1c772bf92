package admission

import (
	"context"

	"fmt"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
)

// Enforcer runs the Build phase's enforcement points (the pipeline's Framework does): the RuntimeInfo it
// returns sizes the JobSet a TrainJob gets, so that Admit can tell whether the names JobSet derives from the
// TrainJob's fit.
type Enforcer interface {
	RuntimeInfo(ctx context.Context, tj *trainer.TrainJob, rt *pipeline.Runtime, opts pipeline.BuildOptions) (*pipeline.RuntimeInfo, error)
}

// podNameSuffix stands for the random suffix of a pod's name, as JobSet's webhook counts it.
const podNameSuffix = "-abcde"

// NameLimit is the longest TrainJob name whose JobSet, as info describes it, JobSet's webhook admits, and the
// longest name JobSet derives from it for name. JobSet (v0.12.0, pkg/webhooks/jobset_webhook.go) refuses a
// JobSet unless, for every replicated job, the name of its last Job, `<jobset>-<replicatedJob>-<jobIndex>`,
// and, when its Jobs are Indexed, that of its last pod, `<jobset>-<replicatedJob>-<jobIndex>-<podIndex>-<5
// random characters>`, are DNS labels (63 characters at most); the JobSet is named after the TrainJob. The
// pods' hostnames, the headless Service and the label values are shorter.
func NameLimit(info *pipeline.RuntimeInfo, name string) (limit int, longest string) {
	limit = validation.DNS1035LabelMaxLength
	if info == nil || info.Template == nil {
		return limit, name
	}
	longest = name
	for _, rj := range info.Template.ReplicatedJobs {
		tail := "-" + rj.Name + "-" + strconv.Itoa(int(max(rj.Replicas, 1)-1))
		spec := rj.Template.Spec
		if (spec.CompletionMode == nil || *spec.CompletionMode == batchv1.IndexedCompletion) && spec.Completions != nil {
			tail += "-" + strconv.Itoa(int(max(*spec.Completions, 1)-1)) + podNameSuffix
		}
		if l := validation.DNS1035LabelMaxLength - len(tail); l < limit {
			limit, longest = l, name+tail
		}
	}
	return limit, longest
}

// validateName refuses a TrainJob whose name leaves no room for the names of its JobSet's Jobs and pods:
// JobSet's webhook would refuse the JobSet, after the TrainJob was admitted.
func validateName(info *pipeline.RuntimeInfo, tj *trainer.TrainJob) field.ErrorList {
	limit, longest := NameLimit(info, tj.Name)
	n := len(tj.Name)
	if n <= limit {
		return nil
	}
	what := "Job"
	if strings.HasSuffix(longest, podNameSuffix) {
		what = "pod"
	}
	return field.ErrorList{field.Invalid(field.NewPath("metadata", "name"), tj.Name, fmt.Sprintf(
		"must be no more than %d characters with runtime %q, and is %d: the longest name JobSet derives from it, %s %q, must be no more than %d characters; shorten the name by %d",
		limit, tj.Spec.RuntimeRef.Name, n, what, longest, validation.DNS1035LabelMaxLength, n-limit))}
}

// ReplicatedJobNameLimit is the longest name of a runtime's replicated job, as upstream v2.4 caps it (kubeflow/trainer
// #4394): JobSet derives each Job's and pod's name from the TrainJob's and the replicated job's, within 63
// characters, and a longer replicated job name leaves a TrainJob's name too little room.
const ReplicatedJobNameLimit = 20

// ValidateReplicatedJobNames refuses the replicated jobs of a runtime whose names are longer than
// ReplicatedJobNameLimit; jobs is their path.
func ValidateReplicatedJobNames(names []string, jobs *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, name := range names {
		if n := len(name); n > ReplicatedJobNameLimit {
			errs = append(errs, field.Invalid(jobs.Index(i).Child("name"), name, fmt.Sprintf(
				"must be no more than %d characters, and is %d: JobSet names the Jobs and pods of a TrainJob <trainjob>-<replicated job>-<index>-<index>-<5 random characters>, within %d characters; shorten it by %d",
				ReplicatedJobNameLimit, n, validation.DNS1035LabelMaxLength, n-ReplicatedJobNameLimit)))
		}
	}
	return errs
}

// MaxPodsPerJob is the most pods one replica of a replicated job may ask for: JobSet's Jobs are Indexed, and
// Kubernetes refuses an Indexed Job whose parallelism is over 100 000 (pkg/apis/batch/validation,
// maxParallelismForIndexedJob).
const MaxPodsPerJob = 100000

// validatePodCount refuses a TrainJob one of whose replicated jobs, as info sizes them (numNodes, the ML policy),
// would have more pods than Kubernetes runs in an Indexed Job: JobSet's Jobs would be refused after the TrainJob
// was stored, and an MPI hostfile of that many lines is built before.
func validatePodCount(info *pipeline.RuntimeInfo, tj *trainer.TrainJob) field.ErrorList {
	for _, ps := range info.PodSets {
		if ps.Count <= MaxPodsPerJob {
			continue
		}
		msg := fmt.Sprintf("must be no more than %d: Kubernetes runs at most %d pods of an Indexed Job, and the replicated job %q would have %d",
			MaxPodsPerJob, MaxPodsPerJob, ps.Name, ps.Count)
		if tj.Spec.Trainer == nil || tj.Spec.Trainer.NumNodes == nil {
			msg += fmt.Sprintf(" (runtime %q's numNodes: set spec.trainer.numNodes)", tj.Spec.RuntimeRef.Name)
		}
		return field.ErrorList{field.Invalid(field.NewPath("spec", "trainer", "numNodes"), ps.Count, msg)}
	}
	return nil
}
