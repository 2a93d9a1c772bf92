package cmdutil

import (
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
)

// RestartAttemptLabel counts the JobSet's restarts on its pods (sigs.k8s.io/jobset/pkg/constants.RestartsKey).
const RestartAttemptLabel = "jobset.sigs.k8s.io/restart-attempt"

// PodsPerJob is how many pods one Job of a replicated job runs at a time.
func PodsPerJob(spec batchv1.JobSpec) int {
	n := int(ptr.Deref(spec.Parallelism, 1))
	if c := ptr.Deref(spec.Completions, 0); c > 0 && int(c) < n {
		n = int(c)
	}
	return max(n, 1)
}

// PodRank is a pod's rank in its replicated job: its Job's index times the pods per Job, plus its completion
// index (the label, or the annotation older Job controllers set). A pod of a non-indexed Job has rank
// job-index×perJob. It relies only on the labels the JobSet and Job controllers put on pods, so it reads the
// same against upstream Kubeflow Trainer.
func PodRank(pod *corev1.Pod, perJob int) (int, bool) {
	jobIndex := 0
	if v, ok := pod.Labels[jobsetv1alpha2.JobIndexKey]; ok {
		i, err := strconv.Atoi(v)
		if err != nil {
			return 0, false
		}
		jobIndex = i
	}
	completion := 0
	v, ok := pod.Labels[batchv1.JobCompletionIndexAnnotation]
	if !ok {
		v, ok = pod.Annotations[batchv1.JobCompletionIndexAnnotation]
	}
	if ok {
		i, err := strconv.Atoi(v)
		if err != nil {
			return 0, false
		}
		completion = i
	}
	return jobIndex*perJob + completion, true
}

// NewerPod tells whether pod a replaced pod b of the same rank: a later JobSet restart attempt, else a later
// creation (a Job replaces a failed or deleted pod).
func NewerPod(a, b *corev1.Pod) bool {
	ra, _ := strconv.Atoi(a.Labels[RestartAttemptLabel])
	rb, _ := strconv.Atoi(b.Labels[RestartAttemptLabel])
	if ra != rb {
		return ra > rb
	}
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return b.CreationTimestamp.Before(&a.CreationTimestamp)
	}
	return a.Name > b.Name
}
