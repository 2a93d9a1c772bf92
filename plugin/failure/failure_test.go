package failure

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
)

var created = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func at(s int) metav1.Time { return metav1.NewTime(created.Add(time.Duration(s) * time.Second)) }

func atp(s int) *metav1.Time { t := at(s); return &t }

// pod is a pod of Job job (replicated job node) with completion index rank, on node gpu-node-<rank>.
func pod(job, rank string, mutate func(*corev1.Pod)) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: job + "-" + rank + "-x", Labels: map[string]string{
		jobsetv1alpha2.ReplicatedJobNameKey: "node", batchv1.JobCompletionIndexAnnotation: rank, batchv1.JobNameLabel: job}}}
	p.Spec.NodeName = "gpu-node-" + rank
	p.Spec.Containers = []corev1.Container{{Name: "node"}}
	p.Status.Phase = corev1.PodRunning
	p.Status.StartTime = atp(1)
	mutate(&p)
	return p
}

func container(mutate func(*corev1.ContainerStatus)) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		cs := corev1.ContainerStatus{Name: "node", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at(1)}}}
		mutate(&cs)
		p.Status.ContainerStatuses = []corev1.ContainerStatus{cs}
	}
}

func exited(code int32, reason string, finished int) *corev1.ContainerStateTerminated {
	return &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, StartedAt: at(1), FinishedAt: at(finished)}
}

// job is Job name of replicated job node, Failed at failed seconds (never when failed < 0).
func job(name string, failed int, mutate ...func(*batchv1.Job)) batchv1.Job {
	j := batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{jobsetv1alpha2.ReplicatedJobNameKey: "node"}}}
	j.Spec.BackoffLimit = ptr.To[int32](0)
	j.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
	if failed >= 0 {
		j.Status.Failed = 1
		j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded",
			Message: "Job has reached the specified backoff limit", LastTransitionTime: at(failed)}}
	}
	for _, m := range mutate {
		m(&j)
	}
	return j
}

func TestFirst(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   Objects
		want *Failure
	}{{
		name: "nothing failed: running and succeeded containers",
		in: Objects{Pods: []corev1.Pod{
			pod("tj-node-0", "0", container(func(*corev1.ContainerStatus) {})),
			pod("tj-node-0", "1", container(func(cs *corev1.ContainerStatus) {
				cs.State = corev1.ContainerState{Terminated: exited(0, "Completed", 9)}
			})),
		}},
	}, {
		name: "an OOM-killed container: its reason, exit code 137 and SIGKILL",
		in: Objects{Pods: []corev1.Pod{pod("tj-node-0", "1", container(func(cs *corev1.ContainerStatus) {
			cs.State = corev1.ContainerState{Terminated: exited(137, "OOMKilled", 7)}
		}))}},
		want: &Failure{Pod: "tj-node-0-1-x", ReplicatedJob: "node", Rank: "1", Node: "gpu-node-1", Container: "node", Job: "tj-node-0",
			Time: atp(7), Reason: "OOMKilled", ExitCode: ptr.To[int32](137), Signal: "SIGKILL"},
	}, {
		// The JobSet's message names the first Job marked Failed (tj-node-1 at 20s); rank 0's container of
		// tj-node-0 terminated first (5s), and its Job was marked later (30s).
		name: "the container that terminated first, not the Job the JobSet names",
		in: Objects{
			Pods: []corev1.Pod{
				pod("tj-node-1", "0", container(func(cs *corev1.ContainerStatus) { cs.State = corev1.ContainerState{Terminated: exited(1, "Error", 12)} })),
				pod("tj-node-0", "0", container(func(cs *corev1.ContainerStatus) { cs.State = corev1.ContainerState{Terminated: exited(3, "Error", 5)} })),
			},
			Jobs: []batchv1.Job{job("tj-node-0", 30), job("tj-node-1", 20)},
		},
		want: &Failure{Pod: "tj-node-0-0-x", ReplicatedJob: "node", Rank: "0", Node: "gpu-node-0", Container: "node", Job: "tj-node-0",
			Time: atp(5), Reason: "Error", ExitCode: ptr.To[int32](3), BackoffLimit: &Budget{Used: 1, Limit: 0}},
	}, {
		name: "a crash-looping container: its previous instance failed, it waits in CrashLoopBackOff",
		in: Objects{
			Pods: []corev1.Pod{pod("tj-node-0", "1", container(func(cs *corev1.ContainerStatus) {
				cs.RestartCount = 4
				cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 40s restarting failed container"}}
				cs.LastTerminationState = corev1.ContainerState{Terminated: exited(1, "Error", 40)}
			}))},
			Jobs: []batchv1.Job{job("tj-node-0", -1, func(j *batchv1.Job) {
				j.Spec.BackoffLimit = ptr.To[int32](6)
				j.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
			})},
		},
		want: &Failure{Pod: "tj-node-0-1-x", ReplicatedJob: "node", Rank: "1", Node: "gpu-node-1", Container: "node", Job: "tj-node-0",
			Time: atp(40), Reason: "Error", ExitCode: ptr.To[int32](1), Previous: true, Waiting: "CrashLoopBackOff", Restarts: 4,
			BackoffLimit: &Budget{Used: 4, Limit: 6}},
	}, {
		name: "an image that cannot be pulled: the waiting reason, dated by the pod's start",
		in: Objects{Pods: []corev1.Pod{pod("tj-node-0", "0", func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodPending
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "node", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
				Reason: "ImagePullBackOff", Message: `Back-off pulling image "ghcr.io/example/nope:1"`}}}}
		})}},
		want: &Failure{Pod: "tj-node-0-0-x", ReplicatedJob: "node", Rank: "0", Node: "gpu-node-0", Container: "node", Job: "tj-node-0",
			Time: atp(1), Reason: "ImagePullBackOff", Message: `Back-off pulling image "ghcr.io/example/nope:1"`, Waiting: "ImagePullBackOff"},
	}, {
		name: "an evicted pod: the pod's reason and message, the killed container's exit code",
		in: Objects{Pods: []corev1.Pod{pod("tj-node-0", "0", func(p *corev1.Pod) {
			p.Status.Phase, p.Status.Reason, p.Status.Message = corev1.PodFailed, "Evicted", "The node was low on resource: memory."
			container(func(cs *corev1.ContainerStatus) {
				cs.State = corev1.ContainerState{Terminated: exited(137, "Error", 8)}
			})(p)
		})}},
		want: &Failure{Pod: "tj-node-0-0-x", ReplicatedJob: "node", Rank: "0", Node: "gpu-node-0", Container: "node", Job: "tj-node-0",
			Time: atp(8), Reason: "Evicted", Message: "The node was low on resource: memory.", ExitCode: ptr.To[int32](137), Signal: "SIGKILL"},
	}, {
		name: "an evicted pod without a terminated container: dated by its DisruptionTarget condition",
		in: Objects{Pods: []corev1.Pod{pod("tj-node-0", "0", func(p *corev1.Pod) {
			p.Status.Phase, p.Status.Reason, p.Status.Message = corev1.PodFailed, "Evicted", "The node was low on resource: memory."
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: at(9)},
				{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "TerminationByKubelet", LastTransitionTime: at(6)}}
		})}},
		want: &Failure{Pod: "tj-node-0-0-x", ReplicatedJob: "node", Rank: "0", Node: "gpu-node-0", Container: "node", Job: "tj-node-0",
			Time: atp(6), Reason: "Evicted", Message: "The node was low on resource: memory."},
	}, {
		name: "a pod past its activeDeadlineSeconds",
		in: Objects{Pods: []corev1.Pod{pod("tj-node-0", "0", func(p *corev1.Pod) {
			p.Status.Phase, p.Status.Reason, p.Status.Message = corev1.PodFailed, "DeadlineExceeded", "Pod was active on the node longer than the specified deadline"
			container(func(cs *corev1.ContainerStatus) {
				cs.State = corev1.ContainerState{Terminated: exited(143, "Error", 60)}
			})(p)
		})}},
		want: &Failure{Pod: "tj-node-0-0-x", ReplicatedJob: "node", Rank: "0", Node: "gpu-node-0", Container: "node", Job: "tj-node-0",
			Time: atp(60), Reason: "DeadlineExceeded", Message: "Pod was active on the node longer than the specified deadline",
			ExitCode: ptr.To[int32](143), Signal: "SIGTERM"},
	}, {
		name: "no pod left: the first Job marked Failed",
		in:   Objects{Jobs: []batchv1.Job{job("tj-node-1", 20), job("tj-node-0", 30), job("tj-init-0", -1)}},
		want: &Failure{Job: "tj-node-1", ReplicatedJob: "node", Time: atp(20), Reason: "BackoffLimitExceeded",
			Message: "Job has reached the specified backoff limit", BackoffLimit: &Budget{Used: 1, Limit: 0}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, First(tc.in)); diff != "" {
				t.Errorf("First (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFailurePolicy(t *testing.T) {
	jobSet := func(fp *jobsetv1alpha2.FailurePolicy, restarts int32) *jobsetv1alpha2.JobSet {
		js := &jobsetv1alpha2.JobSet{}
		js.Spec.FailurePolicy = fp
		js.Status.RestartsCountTowardsMax = restarts
		return js
	}
	oom := func(j *batchv1.Job) {
		j.Status.Conditions[0].Reason, j.Status.Conditions[0].Message = "PodFailurePolicy", "Container node for pod x was OOMKilled"
	}
	launcher := func(j *batchv1.Job) { j.Labels[jobsetv1alpha2.ReplicatedJobNameKey] = "launcher" }
	for _, tc := range []struct {
		name       string
		js         *jobsetv1alpha2.JobSet
		jobs       []batchv1.Job
		wantBudget *Budget
		want       *Policy
		fails      bool
	}{{
		name: "the JobSet could not be read",
		jobs: []batchv1.Job{job("tj-node-0", 5)},
	}, {
		name:       "no Job failed yet",
		js:         jobSet(&jobsetv1alpha2.FailurePolicy{MaxRestarts: 3}, 1),
		jobs:       []batchv1.Job{job("tj-node-0", -1)},
		wantBudget: &Budget{Used: 1, Limit: 3},
	}, {
		name:  "no failurePolicy: the first failed Job fails the JobSet",
		js:    jobSet(nil, 0),
		jobs:  []batchv1.Job{job("tj-node-1", 9), job("tj-node-0", 5)},
		want:  &Policy{Action: "FailJobSet", NoFailurePolicy: true, Job: "tj-node-0", JobFailureReason: "BackoffLimitExceeded"},
		fails: true,
	}, {
		name:       "no rule matches: RestartJobSet while restarts are left",
		js:         jobSet(&jobsetv1alpha2.FailurePolicy{MaxRestarts: 3, Rules: []jobsetv1alpha2.FailurePolicyRule{{Name: "oom", Action: "FailJobSet", OnJobFailureReasons: []string{"PodFailurePolicy"}}}}, 1),
		jobs:       []batchv1.Job{job("tj-node-0", 5)},
		wantBudget: &Budget{Used: 1, Limit: 3},
		want:       &Policy{Action: "RestartJobSet", Job: "tj-node-0", JobFailureReason: "BackoffLimitExceeded"},
	}, {
		name:       "no rule matches and maxRestarts is used up: the JobSet fails",
		js:         jobSet(&jobsetv1alpha2.FailurePolicy{MaxRestarts: 1}, 1),
		jobs:       []batchv1.Job{job("tj-node-0", 5)},
		wantBudget: &Budget{Used: 1, Limit: 1},
		want:       &Policy{Action: "RestartJobSet", Job: "tj-node-0", JobFailureReason: "BackoffLimitExceeded"},
		fails:      true,
	}, {
		// As the JobSet controller: rules are tried in order, each against every failed Job, and the earliest
		// Job that the first matching rule matches is the one acted on.
		name: "the first rule that matches wins, on the earliest Job it matches",
		js: jobSet(&jobsetv1alpha2.FailurePolicy{MaxRestarts: 2, Rules: []jobsetv1alpha2.FailurePolicyRule{
			{Name: "launcher", Action: "FailJobSet", TargetReplicatedJobs: []string{"launcher"}},
			{Name: "oom", Action: "RestartJobSetAndIgnoreMaxRestarts", OnJobFailureMessagePatterns: []string{"OOMKilled$"}},
			{Name: "any", Action: "FailJobSet"},
		}}, 2),
		jobs:       []batchv1.Job{job("tj-node-0", 5), job("tj-node-1", 9, oom), job("tj-node-2", 7, oom)},
		wantBudget: &Budget{Used: 2, Limit: 2},
		want:       &Policy{Action: "RestartJobSetAndIgnoreMaxRestarts", Rule: "oom", Job: "tj-node-2", JobFailureReason: "PodFailurePolicy"},
	}, {
		name: "a rule for one replicated job matches only its Jobs",
		js: jobSet(&jobsetv1alpha2.FailurePolicy{Rules: []jobsetv1alpha2.FailurePolicyRule{
			{Name: "launcher", Action: "FailJobSet", TargetReplicatedJobs: []string{"launcher"}},
		}}, 0),
		jobs:       []batchv1.Job{job("tj-node-0", 5), job("tj-launcher-0", 6, launcher)},
		wantBudget: &Budget{Used: 0, Limit: 0},
		want:       &Policy{Action: "FailJobSet", Rule: "launcher", Job: "tj-launcher-0", JobFailureReason: "BackoffLimitExceeded"},
		fails:      true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			budget, got := failurePolicy(tc.js, tc.jobs)
			if diff := cmp.Diff(tc.wantBudget, budget); diff != "" {
				t.Errorf("maxRestarts (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("policy (-want +got):\n%s", diff)
			}
			if got != nil && got.FailsJobSet(budget) != tc.fails {
				t.Errorf("FailsJobSet = %v, want %v", !tc.fails, tc.fails)
			}
		})
	}
}

// TestBackoffLimit counts a Job's failures as the Job controller does: failed pods, and under restartPolicy
// OnFailure the restarts of the containers of its pods that still run.
func TestBackoffLimit(t *testing.T) {
	restarted := func(n int32, phase corev1.PodPhase) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Status.Phase = phase
			container(func(cs *corev1.ContainerStatus) { cs.RestartCount = n })(p)
		}
	}
	pods := []corev1.Pod{pod("tj-node-0", "0", restarted(2, corev1.PodRunning)), pod("tj-node-0", "1", restarted(1, corev1.PodSucceeded)),
		pod("tj-node-1", "0", restarted(5, corev1.PodRunning))}
	never := job("tj-node-0", -1, func(j *batchv1.Job) { j.Status.Failed, j.Spec.BackoffLimit = 1, ptr.To[int32](3) })
	onFailure := job("tj-node-0", -1, func(j *batchv1.Job) {
		j.Status.Failed, j.Spec.BackoffLimit = 1, ptr.To[int32](3)
		j.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	})
	for _, tc := range []struct {
		name string
		job  batchv1.Job
		want *Budget
	}{
		{"restartPolicy Never: failed pods", never, &Budget{Used: 1, Limit: 3}},
		{"restartPolicy OnFailure: and restarts of its running pods", onFailure, &Budget{Used: 3, Limit: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := backoffLimit(Objects{Pods: pods, Jobs: []batchv1.Job{tc.job}}, "tj-node-0")
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("backoffLimit (-want +got):\n%s", diff)
			}
		})
	}
	if got := backoffLimit(Objects{Pods: pods}, "tj-node-0"); got != nil {
		t.Errorf("backoffLimit of a Job not read = %+v, want nil", got)
	}
}

func TestSignalName(t *testing.T) {
	for _, tc := range []struct {
		exit, signal int32
		want         string
	}{
		{137, 0, "SIGKILL"}, {143, 0, "SIGTERM"}, {139, 0, "SIGSEGV"}, {134, 0, "SIGABRT"},
		{1, 0, ""}, {128, 0, ""}, {255, 0, ""}, {0, 11, "SIGSEGV"}, {1, 9, "SIGKILL"},
	} {
		if got := SignalName(tc.exit, tc.signal); got != tc.want {
			t.Errorf("SignalName(%d, %d) = %q, want %q", tc.exit, tc.signal, got, tc.want)
		}
	}
}

func TestText(t *testing.T) {
	for _, tc := range []struct {
		f           Failure
		text, where string
	}{{
		f:     Failure{Pod: "p", ReplicatedJob: "node", Rank: "1", Node: "gpu-node-1", Container: "node", Reason: "OOMKilled", ExitCode: ptr.To[int32](137), Signal: "SIGKILL"},
		text:  "OOMKilled, exit code 137 (SIGKILL)",
		where: "pod p (node rank 1, on gpu-node-1) container node",
	}, {
		f:     Failure{Pod: "p", ReplicatedJob: "node", Rank: "0", Container: "node", Reason: "Error", ExitCode: ptr.To[int32](1), Previous: true, Waiting: "CrashLoopBackOff"},
		text:  "Error, exit code 1 in its previous instance, now CrashLoopBackOff",
		where: "pod p (node rank 0) container node",
	}, {
		f:     Failure{Pod: "p", ReplicatedJob: "node", Rank: "0", Container: "node", Reason: "ImagePullBackOff", Waiting: "ImagePullBackOff", Message: `Back-off pulling image "x"`},
		text:  `ImagePullBackOff: Back-off pulling image "x"`,
		where: "pod p (node rank 0) container node",
	}, {
		f:     Failure{Job: "tj-node-0", ReplicatedJob: "node", Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit"},
		text:  "BackoffLimitExceeded: Job has reached the specified backoff limit",
		where: "Job tj-node-0",
	}} {
		if got := tc.f.Text(); got != tc.text {
			t.Errorf("Text() = %q, want %q", got, tc.text)
		}
		if got := tc.f.Where(); got != tc.where {
			t.Errorf("Where() = %q, want %q", got, tc.where)
		}
	}
}
