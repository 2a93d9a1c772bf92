// Package failure finds why a TrainJob failed: the first of its containers to fail, by when it terminated (not
// by which Job the JobSet's message names, which is the first Job the Job controller marked Failed), with its
// exit code, reason and signal; how much of its Job's backoffLimit and of the JobSet's failurePolicy.maxRestarts
// was used; and what the JobSet's failure policy does about it, as the JobSet controller decides it. `status`
// shows it first for a Failed TrainJob, and `logs --failed` prints that container's log.
//
// It reads nothing itself: it works on the objects its caller read (pods, Jobs, the JobSet), which upstream
// Kubeflow Trainer's controllers and JobSet write too.
package failure

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/gpuhealth"
)

// LogLines is how many lines of the failed container's log `status` shows.
const LogLines = 20

// Failure is the first failure of a TrainJob's containers: where it happened, how, and what it used up.
type Failure struct {
	// Pod, ReplicatedJob, Rank (the completion index) and Node locate the container; they are empty when no pod
	// of the failure is left (the Job's Failed condition is all there is).
	Pod           string `json:"pod,omitempty"`
	ReplicatedJob string `json:"replicatedJob,omitempty"`
	Rank          string `json:"rank,omitempty"`
	Node          string `json:"node,omitempty"`
	Container     string `json:"container,omitempty"`
	// Job is the Job of the pod.
	Job string `json:"job,omitempty"`
	// Time is when it failed: when the container terminated; for a container that never started (its image
	// cannot be pulled), when its pod started; for an evicted pod without a terminated container, when the
	// kubelet marked it; for a Job whose pods are gone, when the Job was marked Failed.
	Time *metav1.Time `json:"time,omitempty"`
	// Reason is the container's termination reason (OOMKilled, Error, ContainerStatusUnknown), the waiting
	// reason of a container that never started (ErrImagePull, ImagePullBackOff, CreateContainerConfigError, …),
	// the pod's (Evicted, DeadlineExceeded), or the Job's when no pod is left (BackoffLimitExceeded, …).
	Reason  string `json:"reason"`
	Message string `json:"message,omitempty"`
	// ExitCode is the container's; Signal names the signal of an exit code 128+N (SIGKILL for 137), or the
	// signal the runtime reports.
	ExitCode *int32 `json:"exitCode,omitempty"`
	Signal   string `json:"signal,omitempty"`
	// Previous tells that the container has restarted since: the failure is its previous instance's, and so is
	// the log that goes with it (`kubectl logs --previous`).
	Previous bool `json:"previous,omitempty"`
	// Waiting is why the container waits now, if it does: CrashLoopBackOff for one that keeps failing.
	Waiting string `json:"waiting,omitempty"`
	// Restarts is the container's restartCount.
	Restarts int32 `json:"restarts"`
	// BackoffLimit is how many failures the Job counts (its failed pods, and under restartPolicy OnFailure the
	// restarts of its running pods' containers) of spec.backoffLimit.
	BackoffLimit *Budget `json:"backoffLimit,omitempty"`
	// MaxRestarts is how many JobSet restarts counted towards failurePolicy.maxRestarts, of it; nil when the
	// JobSet has no failurePolicy (or could not be read).
	MaxRestarts *Budget `json:"maxRestarts,omitempty"`
	// Policy is what the JobSet's failure policy did about its failed Job; nil while no Job has failed.
	Policy *Policy `json:"failurePolicy,omitempty"`
	// Log is the last LogLines lines of the container's log (of its previous instance when Previous).
	// LogUnavailable says why there is none.
	Log            []string `json:"log,omitempty"`
	LogUnavailable string   `json:"logUnavailable,omitempty"`
	// SickGPUs says why the GPUs of Node are sick (plugin/gpuhealth), set by the caller that read the node;
	// nil when they are not: a rank that died there may have died of them.
	SickGPUs *gpuhealth.Sickness `json:"sickGPUs,omitempty"`
}

// Text says how the container failed: "OOMKilled, exit code 137 (SIGKILL)", "Error, exit code 1 in its previous
// instance, now CrashLoopBackOff", "ImagePullBackOff: Back-off pulling image …".
func (f *Failure) Text() string {
	text := f.Reason
	if f.ExitCode != nil {
		text += fmt.Sprintf(", exit code %d", *f.ExitCode)
		if f.Signal != "" {
			text += " (" + f.Signal + ")"
		}
	}
	if f.Previous {
		text += " in its previous instance"
	}
	if f.Waiting != "" && f.Waiting != f.Reason {
		text += ", now " + f.Waiting
	}
	if m := strings.TrimSpace(f.Message); m != "" {
		text += ": " + m
	}
	return text
}

// Where names where it failed: "pod P (node rank 1, on gpu-node-1) container C", or the Job when no pod is left.
func (f *Failure) Where() string {
	if f.Pod == "" {
		return "Job " + f.Job
	}
	where := f.ReplicatedJob
	if f.Rank != "" {
		where += " rank " + f.Rank
	}
	if f.Node != "" {
		where += ", on " + f.Node
	}
	return fmt.Sprintf("pod %s (%s) container %s", f.Pod, where, f.Container)
}

// Budget is how much of a limit was used.
type Budget struct {
	Used  int32 `json:"used"`
	Limit int32 `json:"limit"`
}

// Exhausted tells whether no retry is left.
func (b *Budget) Exhausted() bool { return b != nil && b.Used >= b.Limit }

// Policy is the JobSet failure policy's decision about a failed Job, taken as the JobSet controller takes it:
// the first rule (in order) that some failed Job matches, applied to the earliest such Job; when no rule
// matches, RestartJobSet on the first failed Job; without a failurePolicy, FailJobSet.
type Policy struct {
	// Action is FailJobSet, RestartJobSet, RestartJobSetAndIgnoreMaxRestarts, RestartJob or
	// RestartJobAndIgnoreMaxRestarts.
	Action string `json:"action"`
	// Rule names the rule of failurePolicy.rules that matched; empty when the default applied.
	Rule string `json:"rule,omitempty"`
	// NoFailurePolicy tells that the JobSet has no failurePolicy: its first failed Job fails it.
	NoFailurePolicy bool `json:"noFailurePolicy,omitempty"`
	// Job is the failed Job the action is about, and JobFailureReason the reason of its Failed condition.
	Job              string `json:"job"`
	JobFailureReason string `json:"jobFailureReason,omitempty"`
}

// FailsJobSet tells whether the action fails the JobSet rather than restarting it or its Job, given the
// restarts used (maxRestarts).
func (p *Policy) FailsJobSet(maxRestarts *Budget) bool {
	switch jobsetv1alpha2.FailurePolicyAction(p.Action) {
	case jobsetv1alpha2.FailJobSet:
		return true
	case jobsetv1alpha2.RestartJobSet, jobsetv1alpha2.RestartJob:
		return maxRestarts.Exhausted()
	}
	return false
}

// Objects are what First works on: a TrainJob's pods, its JobSet's Jobs and its JobSet (nil when not read).
type Objects struct {
	Pods   []corev1.Pod
	Jobs   []batchv1.Job
	JobSet *jobsetv1alpha2.JobSet
}

// First is the first failure among in's pods, by when it happened; when no pod shows one, the first failed
// Job's; nil when nothing failed. Its Log is left for the caller to read.
func First(in Objects) *Failure {
	var first *Failure
	for i := range in.Pods {
		for _, f := range podFailures(&in.Pods[i]) {
			if first == nil || earlier(f, first) {
				first = f
			}
		}
	}
	if first == nil {
		first = jobFailure(in.Jobs)
	}
	if first == nil {
		return nil
	}
	first.BackoffLimit = backoffLimit(in, first.Job)
	first.MaxRestarts, first.Policy = failurePolicy(in.JobSet, in.Jobs)
	return first
}

// earlier orders failures by time (an unknown time last), then by pod and container for a stable answer.
func earlier(a, b *Failure) bool {
	switch {
	case a.Time == nil && b.Time != nil:
		return false
	case a.Time != nil && b.Time == nil:
		return true
	case a.Time != nil && !a.Time.Equal(b.Time):
		return a.Time.Before(b.Time)
	}
	return cmp.Or(strings.Compare(a.Pod, b.Pod), strings.Compare(a.Container, b.Container), boolCompare(b.Previous, a.Previous)) < 0
}

func boolCompare(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// CannotStart tells whether a container waits for a reason that no retry by the kubelet will end by itself:
// its image cannot be pulled or its configuration is wrong.
func CannotStart(reason string) bool {
	switch reason {
	case "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull",
		"CreateContainerConfigError", "CreateContainerError", "RunContainerError":
		return true
	}
	return false
}

// podFailures are the failures one pod shows: each container's failed termination (the current one, and the
// previous instance's when it restarted), a container that cannot start, or the pod's own reason (Evicted,
// DeadlineExceeded), which names the failure of its terminated containers.
func podFailures(p *corev1.Pod) []*Failure {
	var podReason, podMessage string
	if p.Status.Phase == corev1.PodFailed && p.Status.Reason != "" {
		podReason, podMessage = p.Status.Reason, p.Status.Message
	}
	base := Failure{
		Pod:           p.Name,
		ReplicatedJob: p.Labels[jobsetv1alpha2.ReplicatedJobNameKey],
		Rank:          rank(p),
		Node:          p.Spec.NodeName,
		Job:           jobOf(p),
	}
	var out []*Failure
	for _, cs := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
		at := base
		at.Container, at.Restarts = cs.Name, cs.RestartCount
		if w := cs.State.Waiting; w != nil {
			at.Waiting = w.Reason
		}
		if t := cs.LastTerminationState.Terminated; failed(t) {
			out = append(out, terminated(at, t, true))
		}
		if t := cs.State.Terminated; failed(t) {
			f := terminated(at, t, false)
			if podReason != "" {
				f.Reason, f.Message = podReason, podMessage
			}
			out = append(out, f)
		}
		if w := cs.State.Waiting; w != nil && CannotStart(w.Reason) && cs.LastTerminationState.Terminated == nil {
			f := at
			f.Reason, f.Message, f.Time = w.Reason, w.Message, podStart(p)
			out = append(out, &f)
		}
	}
	if len(out) == 0 && podReason != "" {
		f := base
		f.Reason, f.Message, f.Time = podReason, podMessage, podFailedAt(p)
		if len(p.Spec.Containers) == 1 {
			f.Container = p.Spec.Containers[0].Name
		}
		out = append(out, &f)
	}
	return out
}

// failed tells whether a container terminated unsuccessfully.
func failed(t *corev1.ContainerStateTerminated) bool {
	return t != nil && (t.ExitCode != 0 || t.Signal != 0)
}

func terminated(f Failure, t *corev1.ContainerStateTerminated, previous bool) *Failure {
	f.Reason, f.Message, f.Previous = t.Reason, t.Message, previous
	if f.Reason == "" {
		f.Reason = "Error"
	}
	f.ExitCode, f.Signal = ptr.To(t.ExitCode), SignalName(t.ExitCode, t.Signal)
	if !t.FinishedAt.IsZero() {
		f.Time = t.FinishedAt.DeepCopy()
	}
	return &f
}

// podStart is when the kubelet started the pod, or when it was created.
func podStart(p *corev1.Pod) *metav1.Time {
	if p.Status.StartTime != nil {
		return p.Status.StartTime.DeepCopy()
	}
	return p.CreationTimestamp.DeepCopy()
}

// podFailedAt is when the kubelet marked a pod failed without a terminated container: its DisruptionTarget
// condition (an eviction), else its Ready condition's last transition, else its start.
func podFailedAt(p *corev1.Pod) *metav1.Time {
	for _, typ := range []corev1.PodConditionType{corev1.DisruptionTarget, corev1.PodReady} {
		for _, c := range p.Status.Conditions {
			if c.Type == typ && !c.LastTransitionTime.IsZero() {
				return c.LastTransitionTime.DeepCopy()
			}
		}
	}
	return podStart(p)
}

// rank is the pod's completion index: the node rank for Trainer's torch runtime.
func rank(p *corev1.Pod) string {
	if r, ok := p.Labels[batchv1.JobCompletionIndexAnnotation]; ok {
		return r
	}
	return p.Annotations[batchv1.JobCompletionIndexAnnotation]
}

// jobOf is the name of the Job that controls the pod.
func jobOf(p *corev1.Pod) string {
	if ref := metav1.GetControllerOf(p); ref != nil && ref.Kind == "Job" {
		return ref.Name
	}
	return p.Labels[batchv1.JobNameLabel]
}

// jobFailure is the failure of the first Job marked Failed, for when none of its pods is left to tell more.
func jobFailure(jobs []batchv1.Job) *Failure {
	var first *batchv1.Job
	for i := range jobs {
		if t := failedAt(&jobs[i]); t != nil && (first == nil || t.Before(failedAt(first))) {
			first = &jobs[i]
		}
	}
	if first == nil {
		return nil
	}
	c := failedCondition(first)
	return &Failure{Job: first.Name, ReplicatedJob: first.Labels[jobsetv1alpha2.ReplicatedJobNameKey],
		Time: c.LastTransitionTime.DeepCopy(), Reason: c.Reason, Message: c.Message}
}

// failedCondition is a Job's Failed condition when it is True, as the JobSet controller reads it.
func failedCondition(j *batchv1.Job) *batchv1.JobCondition {
	for i, c := range j.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
			return &j.Status.Conditions[i]
		}
	}
	return nil
}

func failedAt(j *batchv1.Job) *metav1.Time {
	if c := failedCondition(j); c != nil {
		return &c.LastTransitionTime
	}
	return nil
}

// backoffLimit is how many failures Job name counts of its backoffLimit, as the Job controller counts them:
// its failed pods, and under restartPolicy OnFailure the container restarts of its pods still running.
func backoffLimit(in Objects, name string) *Budget {
	i := slices.IndexFunc(in.Jobs, func(j batchv1.Job) bool { return j.Name == name })
	if i < 0 {
		return nil
	}
	j := &in.Jobs[i]
	b := &Budget{Used: j.Status.Failed, Limit: ptr.Deref(j.Spec.BackoffLimit, 6)}
	if j.Spec.Template.Spec.RestartPolicy == corev1.RestartPolicyOnFailure {
		for _, p := range in.Pods {
			if jobOf(&p) != name || (p.Status.Phase != corev1.PodRunning && p.Status.Phase != corev1.PodPending) {
				continue
			}
			for _, cs := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
				b.Used += cs.RestartCount
			}
		}
	}
	return b
}

// failurePolicy is the JobSet's restarts of maxRestarts and what its failure policy did about its failed Jobs.
func failurePolicy(js *jobsetv1alpha2.JobSet, jobs []batchv1.Job) (*Budget, *Policy) {
	if js == nil {
		return nil, nil
	}
	fp := js.Spec.FailurePolicy
	var budget *Budget
	if fp != nil {
		budget = &Budget{Used: js.Status.RestartsCountTowardsMax, Limit: fp.MaxRestarts}
		for _, rj := range js.Status.ReplicatedJobsStatus {
			for _, n := range rj.JobRestartsCountTowardsMax {
				budget.Used += n
			}
		}
	}
	var failedJobs []*batchv1.Job
	for i := range jobs {
		if failedCondition(&jobs[i]) != nil {
			failedJobs = append(failedJobs, &jobs[i])
		}
	}
	if len(failedJobs) == 0 {
		return budget, nil
	}
	policy := func(action jobsetv1alpha2.FailurePolicyAction, rule string, j *batchv1.Job) *Policy {
		return &Policy{Action: string(action), Rule: rule, NoFailurePolicy: fp == nil, Job: j.Name, JobFailureReason: failedCondition(j).Reason}
	}
	firstFailed := func(match func(*batchv1.Job) bool) *batchv1.Job {
		var first *batchv1.Job
		for _, j := range failedJobs {
			if match(j) && (first == nil || failedAt(j).Before(failedAt(first))) {
				first = j
			}
		}
		return first
	}
	anyJob := func(*batchv1.Job) bool { return true }
	if fp == nil {
		return budget, policy(jobsetv1alpha2.FailJobSet, "", firstFailed(anyJob))
	}
	for _, rule := range fp.Rules {
		if j := firstFailed(func(j *batchv1.Job) bool { return ruleApplies(rule, j) }); j != nil {
			return budget, policy(rule.Action, rule.Name, j)
		}
	}
	return budget, policy(jobsetv1alpha2.RestartJobSet, "", firstFailed(anyJob))
}

// ruleApplies tells whether a rule matches a failed Job: its failure reason, its message and its replicated
// job, as the JobSet controller matches them (an empty list matches anything).
func ruleApplies(rule jobsetv1alpha2.FailurePolicyRule, j *batchv1.Job) bool {
	c := failedCondition(j)
	if len(rule.OnJobFailureReasons) > 0 && !slices.Contains(rule.OnJobFailureReasons, c.Reason) {
		return false
	}
	if len(rule.OnJobFailureMessagePatterns) > 0 && !slices.ContainsFunc(rule.OnJobFailureMessagePatterns, func(p string) bool {
		ok, err := regexp.MatchString(p, c.Message)
		return err == nil && ok
	}) {
		return false
	}
	rj, ok := j.Labels[jobsetv1alpha2.ReplicatedJobNameKey]
	return ok && (len(rule.TargetReplicatedJobs) == 0 || slices.Contains(rule.TargetReplicatedJobs, rj))
}

// linuxSignals names the signals of Linux on x86 and arm (containers of a Kubernetes node run on Linux,
// whatever this binary runs on), by number.
var linuxSignals = []string{1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 5: "SIGTRAP", 6: "SIGABRT", 7: "SIGBUS",
	8: "SIGFPE", 9: "SIGKILL", 10: "SIGUSR1", 11: "SIGSEGV", 12: "SIGUSR2", 13: "SIGPIPE", 14: "SIGALRM", 15: "SIGTERM",
	16: "SIGSTKFLT", 17: "SIGCHLD", 18: "SIGCONT", 19: "SIGSTOP", 20: "SIGTSTP", 21: "SIGTTIN", 22: "SIGTTOU", 23: "SIGURG",
	24: "SIGXCPU", 25: "SIGXFSZ", 26: "SIGVTALRM", 27: "SIGPROF", 28: "SIGWINCH", 29: "SIGIO", 30: "SIGPWR", 31: "SIGSYS"}

// SignalName names the signal that ended a container: the one the runtime reports, else the N of an exit code
// 128+N as a shell reports a process killed by signal N (137 is SIGKILL: the kernel's OOM killer, or a kill
// after the grace period; 143 is SIGTERM). Empty when there is none.
func SignalName(exitCode, signal int32) string {
	n := signal
	if n == 0 && exitCode > 128 {
		n = exitCode - 128
	}
	if n > 0 && int(n) < len(linuxSignals) {
		return linuxSignals[n]
	}
	return ""
}
