package status

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
)

// stepOrder ranks replicated jobs in pipeline order: initializers, launcher, node, then any other.
func stepOrder(name string) int {
	switch name {
	case trainer.DatasetInitializerName:
		return 0
	case trainer.ModelInitializerName:
		return 1
	case trainer.Launcher:
		return 2
	case trainer.Node:
		return 3
	}
	return 4
}

func compareSteps(a, b string) int {
	return cmp.Or(cmp.Compare(stepOrder(a), stepOrder(b)), strings.Compare(a, b))
}

func comparePods(a, b corev1.Pod) int {
	rank := func(p corev1.Pod) int {
		n, err := strconv.Atoi(podRank(&p))
		if err != nil {
			return -1
		}
		return n
	}
	return cmp.Or(
		compareSteps(a.Labels[jobsetv1alpha2.ReplicatedJobNameKey], b.Labels[jobsetv1alpha2.ReplicatedJobNameKey]),
		strings.Compare(a.Labels[jobsetv1alpha2.JobIndexKey], b.Labels[jobsetv1alpha2.JobIndexKey]),
		cmp.Compare(rank(a), rank(b)),
		a.CreationTimestamp.Compare(b.CreationTimestamp.Time),
		strings.Compare(a.Name, b.Name))
}

// podRank is the pod's completion index: the node rank for Trainer's torch runtime.
func podRank(p *corev1.Pod) string {
	if r, ok := p.Labels[batchv1.JobCompletionIndexAnnotation]; ok {
		return r
	}
	return p.Annotations[batchv1.JobCompletionIndexAnnotation]
}

// summarizePod summarizes p, its DRA claims from the namespace's ResourceClaims claims.
func summarizePod(p *corev1.Pod, claims []resourcev1.ResourceClaim) PodSummary {
	ps := PodSummary{
		Name:          p.Name,
		ReplicatedJob: p.Labels[jobsetv1alpha2.ReplicatedJobNameKey],
		Rank:          podRank(p),
		Node:          p.Spec.NodeName,
		Phase:         string(p.Status.Phase),
		Status:        podStatus(p),
		Started:       p.Status.StartTime,
	}
	var reqs []resourcev1.DeviceRequest
	ps.Claims, reqs = podClaims(p, claims)
	ps.GPUs = pipeline.PodGPUs(&p.Spec, reqs)
	for _, cs := range p.Status.ContainerStatuses {
		ps.Restarts += cs.RestartCount
	}
	return ps
}

// podStatus is what kubectl get pods shows in STATUS, shortened: the reason of a waiting or failed container,
// Unschedulable, Terminating, or the phase.
func podStatus(p *corev1.Pod) string {
	if p.DeletionTimestamp != nil {
		return "Terminating"
	}
	if _, ok := unschedulable(p); ok {
		return corev1.PodReasonUnschedulable
	}
	if p.Status.Phase == corev1.PodFailed && p.Status.Reason != "" {
		return p.Status.Reason // Evicted, DeadlineExceeded: what happened to the pod, not how its containers ended
	}
	for _, cs := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
		switch {
		case cs.State.Waiting != nil && cs.State.Waiting.Reason != "":
			return cs.State.Waiting.Reason
		case cs.State.Terminated != nil && cs.State.Terminated.ExitCode != 0 && cs.State.Terminated.Reason != "":
			return cs.State.Terminated.Reason
		}
	}
	if p.Status.Phase == corev1.PodSucceeded {
		return "Completed"
	}
	if p.Status.Phase == "" {
		return string(corev1.PodPending)
	}
	return string(p.Status.Phase)
}

// unschedulable tells whether the scheduler found no node for p, and its message.
func unschedulable(p *corev1.Pod) (string, bool) {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return c.Message, true
		}
	}
	return "", false
}
