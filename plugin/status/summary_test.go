package status

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/stage"
)

var created = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) metav1.Time { return metav1.NewTime(created.Add(d)) }

func atp(d time.Duration) *metav1.Time { t := at(d); return &t }

func trainJob(conds ...metav1.Condition) *trainer.TrainJob {
	return &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: "tj", Namespace: "ns", UID: "uid-1", CreationTimestamp: metav1.NewTime(created)},
		Spec:       trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: "torch"}},
		Status:     trainer.TrainJobStatus{Conditions: conds},
	}
}

func cond(typ, reason string, status metav1.ConditionStatus, d time.Duration) metav1.Condition {
	return metav1.Condition{Type: typ, Reason: reason, Status: status, Message: reason + " message", LastTransitionTime: at(d)}
}

func event(typ, reason string, d time.Duration) corev1.Event {
	return corev1.Event{InvolvedObject: corev1.ObjectReference{Kind: trainer.TrainJobKind, Name: "tj", UID: "uid-1"},
		Type: typ, Reason: reason, Message: reason + " event", FirstTimestamp: at(d), LastTimestamp: at(d)}
}

func job(rj string, start time.Duration, end *time.Duration) batchv1.Job {
	j := batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "tj-" + rj + "-0", Labels: map[string]string{jobsetv1alpha2.ReplicatedJobNameKey: rj}}}
	j.Status.StartTime = atp(start)
	if end != nil {
		j.Status.CompletionTime = atp(*end)
	}
	return j
}

// counts is a TrainJob's jobsStatus entry for replicated job rj: ready, active and succeeded Jobs.
func counts(rj string, ready, active, succeeded int32) trainer.JobStatus {
	return trainer.JobStatus{Name: rj, Ready: ptr.To(ready), Active: ptr.To(active), Succeeded: ptr.To(succeeded),
		Failed: ptr.To[int32](0), Suspended: ptr.To[int32](0)}
}

// withJobs sets the TrainJob's jobsStatus.
func withJobs(tj *trainer.TrainJob, js ...trainer.JobStatus) *trainer.TrainJob {
	tj.Status.JobsStatus = js
	return tj
}

func pod(name, rj string, mutate func(*corev1.Pod)) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{jobsetv1alpha2.ReplicatedJobNameKey: rj}}}
	p.Status.Phase = corev1.PodPending
	if mutate != nil {
		mutate(&p)
	}
	return p
}

func TestTimeline(t *testing.T) {
	type entry struct{ What, Reason string }
	cases := []struct {
		name   string
		conds  []metav1.Condition
		events []corev1.Event
		want   []entry
	}{{
		name: "a never-suspended TrainJob has only its creation",
		want: []entry{{"Created", ""}},
	}, {
		name:   "an Event recording a condition's transition is shown once",
		conds:  []metav1.Condition{cond("Suspended", "Resumed", metav1.ConditionFalse, time.Minute)},
		events: []corev1.Event{event("Normal", "Resumed", time.Minute+2*time.Second)},
		want:   []entry{{"Created", ""}, {"Suspended=False", "Resumed"}},
	}, {
		name:   "an earlier transition that the condition no longer holds comes from its Event",
		conds:  []metav1.Condition{cond("Suspended", "Resumed", metav1.ConditionFalse, time.Minute)},
		events: []corev1.Event{event("Normal", "Suspended", time.Second), event("Normal", "Resumed", time.Minute)},
		want:   []entry{{"Created", ""}, {"Event Normal", "Suspended"}, {"Suspended=False", "Resumed"}},
	}, {
		name:   "the same reason long apart is two transitions",
		conds:  []metav1.Condition{cond("Suspended", "Suspended", metav1.ConditionTrue, 10*time.Minute)},
		events: []corev1.Event{event("Normal", "Suspended", time.Minute), event("Normal", "Suspended", 10*time.Minute)},
		want:   []entry{{"Created", ""}, {"Event Normal", "Suspended"}, {"Suspended=True", "Suspended"}},
	}, {
		name:   "Events of other objects are not the TrainJob's",
		events: []corev1.Event{{InvolvedObject: corev1.ObjectReference{Kind: trainer.TrainJobKind, Name: "tj", UID: "other-uid"}, Reason: "Old", FirstTimestamp: at(time.Second)}},
		want:   []entry{{"Created", ""}},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := Summarize(Objects{TrainJob: trainJob(tc.conds...), Events: tc.events}, created.Add(time.Hour))
			var got []entry
			for _, e := range s.Timeline {
				got = append(got, entry{e.What(), e.Reason})
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("timeline (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStages(t *testing.T) {
	d := func(x time.Duration) *time.Duration { return &x }
	type span struct {
		Name       stage.Stage
		Start, End string
		Duration   string
	}
	show := func(t *metav1.Time) string {
		if t == nil {
			return "-"
		}
		return t.Sub(created).String()
	}
	cases := []struct {
		name  string
		tj    *trainer.TrainJob
		jobs  []batchv1.Job
		pods  []corev1.Pod
		want  []span
		stage stage.Stage
	}{{
		name: "pending until a Job starts",
		tj:   trainJob(),
		want: []span{{"Pending", "0s", "-", "1h0m0s"}, {"Training", "-", "-", ""}},
	}, {
		name: "initializers done, trainer running",
		tj:   withJobs(trainJob(), counts("dataset-initializer", 0, 0, 1), counts("model-initializer", 0, 0, 1), counts("node", 1, 1, 0)),
		jobs: []batchv1.Job{job("dataset-initializer", 5*time.Second, d(30*time.Second)), job("model-initializer", 6*time.Second, d(50*time.Second)), job("node", time.Minute, nil)},
		want: []span{{"Pending", "0s", "5s", "5s"}, {"Initializing", "5s", "50s", "45s"}, {"Training", "1m0s", "-", "59m0s"}},
	}, {
		name: "an initializer still running keeps Initializing open",
		tj:   withJobs(trainJob(), counts("dataset-initializer", 0, 0, 1), counts("model-initializer", 1, 1, 0)),
		jobs: []batchv1.Job{job("dataset-initializer", 5*time.Second, d(30*time.Second)), job("model-initializer", 6*time.Second, nil)},
		want: []span{{"Pending", "0s", "5s", "5s"}, {"Initializing", "5s", "-", "59m55s"}, {"Training", "-", "-", ""}},
	}, {
		name: "a Failed TrainJob closes the running stage at its failure",
		tj:   withJobs(trainJob(cond("Failed", "DeadlineExceeded", metav1.ConditionTrue, 10*time.Minute)), counts("node", 1, 1, 0)),
		jobs: []batchv1.Job{job("node", time.Minute, nil)},
		want: []span{{"Pending", "0s", "1m0s", "1m0s"}, {"Training", "1m0s", "10m0s", "9m0s"}, {"Failed", "10m0s", "10m0s", "0s"}},
	}, {
		name:  "a trainer Job active while its pods wait for nodes leaves Pending open, Training not begun",
		tj:    withJobs(trainJob(), counts("node", 0, 1, 0)),
		jobs:  []batchv1.Job{job("node", time.Minute, nil)},
		want:  []span{{"Pending", "0s", "-", "1h0m0s"}, {"Training", "-", "-", ""}},
		stage: stage.Pending,
	}, {
		name:  "initializers done, the trainer's pods wait for nodes: Initializing ended, Training began with the trainer's Job",
		tj:    withJobs(trainJob(), counts("dataset-initializer", 0, 0, 1), counts("node", 0, 1, 0)),
		jobs:  []batchv1.Job{job("dataset-initializer", 5*time.Second, d(30*time.Second)), job("node", time.Minute, nil)},
		want:  []span{{"Pending", "0s", "5s", "5s"}, {"Initializing", "5s", "30s", "25s"}, {"Training", "1m0s", "-", "59m0s"}},
		stage: stage.Training,
	}, {
		name: "Failed while Pending (deadline exceeded, pods never scheduled) closes Pending at the failure",
		tj:   withJobs(trainJob(cond("Failed", "DeadlineExceeded", metav1.ConditionTrue, 10*time.Minute)), counts("node", 0, 1, 0)),
		jobs: []batchv1.Job{job("node", time.Minute, nil)},
		want: []span{{"Pending", "0s", "10m0s", "10m0s"}, {"Training", "-", "-", ""}, {"Failed", "10m0s", "10m0s", "0s"}},
	}, {
		name: "Jobs ran but cannot be read, nor their pods: Pending's end is unknown",
		tj:   withJobs(trainJob(cond("Complete", "AllJobsCompleted", metav1.ConditionTrue, 3*time.Minute)), counts("node", 0, 0, 1)),
		want: []span{{"Pending", "0s", "-", ""}, {"Training", "-", "-", ""}, {"Complete", "3m0s", "3m0s", "0s"}},
	}, {
		name: "without Jobs to read, the pods tell",
		tj:   trainJob(cond("Complete", "AllJobsCompleted", metav1.ConditionTrue, 3*time.Minute)),
		pods: []corev1.Pod{
			pod("a", "node", func(p *corev1.Pod) {
				p.Status.Phase, p.Status.StartTime = corev1.PodSucceeded, atp(20*time.Second)
				p.Status.ContainerStatuses = []corev1.ContainerStatus{{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{FinishedAt: at(2 * time.Minute)}}}}
			}),
			pod("b", "node", func(p *corev1.Pod) {
				p.Status.Phase, p.Status.StartTime = corev1.PodSucceeded, atp(25*time.Second)
				p.Status.ContainerStatuses = []corev1.ContainerStatus{{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{FinishedAt: at(170 * time.Second)}}}}
			}),
		},
		want: []span{{"Pending", "0s", "20s", "20s"}, {"Training", "20s", "2m50s", "2m30s"}, {"Complete", "3m0s", "3m0s", "0s"}},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := Summarize(Objects{TrainJob: tc.tj, Jobs: tc.jobs, Pods: tc.pods}, created.Add(time.Hour))
			var got []span
			for _, sp := range s.Stages {
				got = append(got, span{sp.Name, show(sp.Start), show(sp.End), sp.Duration})
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("stages (-want +got):\n%s", diff)
			}
			if tc.stage != "" && s.Stage != tc.stage {
				t.Errorf("stage = %s, want %s", s.Stage, tc.stage)
			}
		})
	}
}

func TestReason(t *testing.T) {
	unschedulable := func(p *corev1.Pod) {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
			Message: "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."}}
	}
	// active: the replicated job's Job exists, its pods are not all ready; running: they are.
	active := func(tj *trainer.TrainJob, rj string) *trainer.TrainJob { return withJobs(tj, counts(rj, 0, 1, 0)) }
	running := func(tj *trainer.TrainJob, rj string) *trainer.TrainJob { return withJobs(tj, counts(rj, 1, 1, 0)) }
	cases := []struct {
		name string
		in   Objects
		want string
	}{{
		name: "no JobSet yet",
		in:   Objects{TrainJob: trainJob()},
		want: "Pending: waiting for the controller to create JobSet tj",
	}, {
		name: "upstream's Warning when it cannot build the JobSet",
		in:   Objects{TrainJob: trainJob(), Events: []corev1.Event{event("Warning", "TrainJobResourcesCreationFailed", time.Second)}},
		want: "Pending: TrainJobResourcesCreationFailed: TrainJobResourcesCreationFailed event",
	}, {
		name: "our operator's ComponentsCreated=False",
		in:   Objects{TrainJob: trainJob(cond(trainer.TrainJobComponentsCreated, "JobsBuildFailed", metav1.ConditionFalse, time.Second))},
		want: "Pending: JobsBuildFailed: JobsBuildFailed message",
	}, {
		name: "our operator created the JobSet, no Job yet",
		in:   Objects{TrainJob: trainJob(cond(trainer.TrainJobComponentsCreated, "JobsCreated", metav1.ConditionTrue, time.Second))},
		want: "Pending: waiting for the pods of JobSet tj",
	}, {
		name: "pods not scheduled: how many, and the scheduler's message",
		in: Objects{TrainJob: active(trainJob(), "node"), Pods: []corev1.Pod{
			pod("p0", "node", unschedulable), pod("p1", "node", unschedulable), pod("p2", "node", nil)}},
		want: "Pending: 2 pods unschedulable: 0/4 nodes are available: 4 Insufficient nvidia.com/gpu.",
	}, {
		name: "an image that cannot be pulled",
		in: Objects{TrainJob: active(trainJob(), "dataset-initializer"), Pods: []corev1.Pod{pod("p0", "dataset-initializer", func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "no such image"}}}}
		})}},
		want: "Pending: pod p0: ImagePullBackOff: no such image",
	}, {
		name: "initializers running",
		in: Objects{TrainJob: running(trainJob(), "dataset-initializer"), Pods: []corev1.Pod{pod("p0", "dataset-initializer", func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodRunning
		})}},
		want: "Initializing: running dataset-initializer (1/1 pods running)",
	}, {
		name: "between the initializers and the trainer",
		in:   Objects{TrainJob: withJobs(trainJob(), counts("dataset-initializer", 0, 0, 1))},
		want: "Initializing: initializers done, waiting for the trainer's Jobs",
	}, {
		name: "suspended by spec before the controller reacts",
		in:   Objects{TrainJob: func() *trainer.TrainJob { tj := trainJob(); tj.Spec.Suspend = ptr.To(true); return tj }()},
		want: "Suspended: spec.suspend is true",
	}, {
		name: "failed",
		in:   Objects{TrainJob: trainJob(cond("Failed", "FailedJobs", metav1.ConditionTrue, time.Minute))},
		want: "Failed: FailedJobs: FailedJobs message",
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Summarize(tc.in, created.Add(time.Hour)).StageLine(); got != tc.want {
				t.Errorf("StageLine() = %q, want %q", got, tc.want)
			}
		})
	}
}
