package status

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/stage"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/failure"
)

// reason says why the TrainJob is in its stage, or what it waits for.
func reason(s *Summary, in Objects) string {
	tj := in.TrainJob
	conds := tj.Status.Conditions
	switch s.Stage {
	case stage.Failed, stage.Complete:
		c := meta.FindStatusCondition(conds, string(s.Stage))
		return joinReason(c.Reason, c.Message)
	case stage.Queued:
		switch q := s.Queue; {
		case q.NotAdmitted != "":
			return q.NotAdmitted
		case q.Workload == "":
			return "waiting for Kueue to make the TrainJob's Workload"
		}
		return "waiting for Kueue to admit Workload " + s.Queue.Workload
	case stage.Suspended:
		if q := s.Queue; q != nil && q.Workload != "" && !q.Active {
			return "stopped through Kueue: Workload " + q.Workload + " has spec.active=false (kubectl trainjob resume queues it again)"
		}
		if c := meta.FindStatusCondition(conds, trainer.TrainJobSuspended); c != nil && c.Status == metav1.ConditionTrue {
			return c.Message
		}
		return "spec.suspend is true"
	}
	if b := s.BlockedByTaint; b != nil {
		return b.Reason()
	}
	if r := podTrouble(in.Pods, s.Pods); r != "" {
		return r
	}
	if c := meta.FindStatusCondition(conds, trainer.TrainJobComponentsCreated); c != nil && c.Status == metav1.ConditionFalse {
		return joinReason(c.Reason, c.Message)
	}
	switch s.Stage {
	case stage.Initializing:
		if steps := activeSteps(s.Jobs, true); len(steps) > 0 {
			return "running " + strings.Join(steps, ", ") + podsRunning(s.Pods, stage.IsInitializer)
		}
		return "initializers done, waiting for the trainer's Jobs"
	case stage.Training:
		if steps := activeSteps(s.Jobs, false); len(steps) > 0 {
			return "running " + strings.Join(steps, ", ") + podsRunning(s.Pods, func(rj string) bool { return !stage.IsInitializer(rj) })
		}
		return "the trainer's Jobs ended, waiting for the controller to mark the TrainJob Complete or Failed"
	}
	// Pending.
	if !jobSetSeen(in) {
		for _, w := range s.Warnings {
			if w.Object == trainer.TrainJobKind+"/"+tj.Name {
				return joinReason(w.Reason, w.Message)
			}
		}
		return "waiting for the controller to create JobSet " + tj.Name
	}
	if len(in.Pods) == 0 {
		return "waiting for the pods of JobSet " + tj.Name
	}
	return "waiting for pods to start"
}

// jobSetSeen tells whether the TrainJob's JobSet is known to exist, without reading it: the TrainJob holds
// its counts, our operator said it created it, or it has Jobs or pods.
func jobSetSeen(in Objects) bool {
	return len(in.TrainJob.Status.JobsStatus) > 0 || len(in.Jobs) > 0 || len(in.Pods) > 0 ||
		meta.IsStatusConditionTrue(in.TrainJob.Status.Conditions, trainer.TrainJobComponentsCreated)
}

func joinReason(reason, message string) string {
	if reason == "" || message == "" {
		return reason + message
	}
	return reason + ": " + message
}

func activeSteps(jobs []JobSummary, initializers bool) []string {
	var steps []string
	for _, j := range jobs {
		if j.Active > 0 && stage.IsInitializer(j.Name) == initializers {
			steps = append(steps, j.Name)
		}
	}
	return steps
}

// podsRunning is " (n/m pods running)" over the pods of the steps keep selects.
func podsRunning(pods []PodSummary, keep func(replicatedJob string) bool) string {
	running, total := 0, 0
	for _, p := range pods {
		if !keep(p.ReplicatedJob) {
			continue
		}
		total++
		if p.Phase == string(corev1.PodRunning) {
			running++
		}
	}
	if total == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d/%d pods running)", running, total)
}

// podTrouble names what keeps pods from running: unschedulable pods with the scheduler's message, first a DRA
// claim of theirs that is not allocated; or a container that cannot start (image pull, crash loop, bad
// configuration). summaries are the pods' summaries, with their claims.
func podTrouble(pods []corev1.Pod, summaries []PodSummary) string {
	n, msg, claim := 0, "", ""
	for _, p := range pods {
		if m, ok := unschedulable(&p); ok {
			n++
			msg = cmp.Or(msg, m)
			if i := slices.IndexFunc(summaries, func(s PodSummary) bool { return s.Name == p.Name }); i >= 0 && claim == "" {
				claim = claimsUnallocated(&summaries[i])
			}
		}
	}
	if n > 0 {
		what := fmt.Sprintf("%d %s unschedulable", n, plural(n, "pod", "pods"))
		if claim != "" {
			what += ", " + claim
		}
		return joinReason(what, msg)
	}
	for _, p := range pods {
		for _, cs := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
			if w := cs.State.Waiting; w != nil && (w.Reason == "CrashLoopBackOff" || failure.CannotStart(w.Reason)) {
				return joinReason(fmt.Sprintf("pod %s: %s", p.Name, w.Reason), w.Message)
			}
		}
	}
	return ""
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
