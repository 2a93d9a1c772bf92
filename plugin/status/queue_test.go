package status

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/stage"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/kueue"
)

const noQuota = "couldn't assign flavors to pod set node: insufficient unused quota for nvidia.com/gpu in flavor gpu-node, 16 more needed"

// queuedTrainJob is the TrainJob "tj" in LocalQueue gpu, suspended by Kueue.
func queuedTrainJob() *trainer.TrainJob {
	tj := trainJob(cond(trainer.TrainJobSuspended, trainer.TrainJobSuspendedReason, metav1.ConditionTrue, time.Second))
	tj.Labels = map[string]string{kueue.QueueLabel: "gpu"}
	tj.Spec.Suspend = ptr.To(true)
	return tj
}

// workload is tj's Workload with conditions conds.
func workload(conds ...metav1.Condition) *kueue.Workload {
	wl := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Name: "trainjob-tj-1a2b3", Namespace: "ns", UID: "wl-uid",
		OwnerReferences: []metav1.OwnerReference{{Kind: trainer.TrainJobKind, Name: "tj", UID: "uid-1", Controller: ptr.To(true)}}}}
	wl.Spec.Priority = ptr.To[int32](0)
	wl.Status.Conditions = conds
	return wl
}

func wlCond(typ, reason string, status metav1.ConditionStatus, msg string, d time.Duration) metav1.Condition {
	return metav1.Condition{Type: typ, Reason: reason, Status: status, Message: msg, LastTransitionTime: at(d)}
}

func wlEvent(typ, reason, msg string, d time.Duration, count int32) corev1.Event {
	return corev1.Event{InvolvedObject: corev1.ObjectReference{Kind: "Workload", Name: "trainjob-tj-1a2b3", UID: "wl-uid"},
		Type: typ, Reason: reason, Message: msg, FirstTimestamp: at(d), LastTimestamp: at(d), Count: count}
}

// lq is LocalQueue gpu of ClusterQueue gpu-cq.
func lq() *kueue.LocalQueue {
	q := &kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Name: "gpu", Namespace: "ns"}}
	q.Spec.ClusterQueue = "gpu-cq"
	return q
}

const preemptedMsg = "Preempted to accommodate a workload (UID: u2, JobUID: j2) due to prioritization in the ClusterQueue"

// TestQueue: what status says of a TrainJob in a Kueue LocalQueue: its stage and why, its queues, position,
// admission and evictions, in the summary and on the screen.
func TestQueue(t *testing.T) {
	waiting := workload(wlCond(kueue.ConditionQuotaReserved, "Pending", metav1.ConditionFalse, noQuota, 2*time.Second))
	admitted := workload(wlCond(kueue.ConditionQuotaReserved, "QuotaReserved", metav1.ConditionTrue, "Quota reserved in ClusterQueue gpu-cq", 3*time.Second),
		wlCond(kueue.ConditionAdmitted, "Admitted", metav1.ConditionTrue, "The workload is admitted", 3*time.Second))
	admitted.Status.Admission = &kueue.Admission{ClusterQueue: "gpu-cq"}
	preempted := workload(wlCond(kueue.ConditionQuotaReserved, "Pending", metav1.ConditionFalse, noQuota, 62*time.Second),
		wlCond(kueue.ConditionAdmitted, "NoReservation", metav1.ConditionFalse, "The workload has no reservation", 61*time.Second),
		wlCond(kueue.ConditionEvicted, "Preempted", metav1.ConditionTrue, preemptedMsg, 60*time.Second),
		wlCond(kueue.ConditionPreempted, "InClusterQueue", metav1.ConditionTrue, preemptedMsg, 60*time.Second))
	preempted.Spec.PriorityClassRef = &kueue.PriorityClassRef{Name: "low"}
	urgent := kueue.Workload{ObjectMeta: metav1.ObjectMeta{Name: "trainjob-urgent-4d5e6", Namespace: "ns", UID: "u2",
		OwnerReferences: []metav1.OwnerReference{{Kind: trainer.TrainJobKind, Name: "urgent", UID: "j2", Controller: ptr.To(true)}}}}
	stopped := workload(wlCond(kueue.ConditionQuotaReserved, "Pending", metav1.ConditionFalse, noQuota, 2*time.Second))
	stopped.Spec.Active = ptr.To(false)
	running := queuedTrainJob()
	running.Spec.Suspend = ptr.To(false)
	running.Status.Conditions = []metav1.Condition{cond(trainer.TrainJobSuspended, "Resumed", metav1.ConditionFalse, 4*time.Second)}
	running.Status.JobsStatus = []trainer.JobStatus{counts("node", 1, 1, 0)}

	for _, tc := range []struct {
		name   string
		in     Objects
		line   string
		queue  *Queue
		screen string // the Queue section of the screen
	}{{
		name: "waiting for quota; the visibility API not served",
		in:   Objects{TrainJob: queuedTrainJob(), Queue: &QueueObjects{Served: true, Workload: waiting, LocalQueue: lq()}},
		line: "Queued: " + noQuota,
		queue: &Queue{LocalQueue: "gpu", ClusterQueue: "gpu-cq", Workload: "trainjob-tj-1a2b3", Priority: ptr.To[int32](0), Active: true,
			NotAdmitted: noQuota, Position: PositionPending},
		screen: `
Queue:
  LocalQueue:     gpu
  ClusterQueue:   gpu-cq
  Workload:       trainjob-tj-1a2b3
  Priority:       0
  Position:       pending
  Admitted:       no
`,
	}, {
		name: "waiting, with the position from the visibility API",
		in: Objects{TrainJob: queuedTrainJob(), Queue: &QueueObjects{Served: true, Workload: waiting, LocalQueue: lq(),
			Pending: &kueue.PendingWorkload{ObjectMeta: metav1.ObjectMeta{Name: "trainjob-tj-1a2b3"}, PositionInClusterQueue: 2, PositionInLocalQueue: 1}}},
		line: "Queued: " + noQuota,
		queue: &Queue{LocalQueue: "gpu", ClusterQueue: "gpu-cq", Workload: "trainjob-tj-1a2b3", Priority: ptr.To[int32](0), Active: true,
			NotAdmitted: noQuota, Position: "2 ahead in ClusterQueue gpu-cq, 1 in LocalQueue gpu",
			PositionInClusterQueue: ptr.To[int32](2), PositionInLocalQueue: ptr.To[int32](1)},
	}, {
		name:  "no Workload yet",
		in:    Objects{TrainJob: queuedTrainJob(), Queue: &QueueObjects{Served: true, LocalQueue: lq()}},
		line:  "Queued: waiting for Kueue to make the TrainJob's Workload",
		queue: &Queue{LocalQueue: "gpu", ClusterQueue: "gpu-cq", Note: "Kueue has not made the TrainJob's Workload yet"},
		screen: `
Queue:
  LocalQueue:     gpu
  ClusterQueue:   gpu-cq
  Kueue:          Kueue has not made the TrainJob's Workload yet
`,
	}, {
		name: "admitted and running",
		in:   Objects{TrainJob: running, Queue: &QueueObjects{Served: true, Workload: admitted, LocalQueue: lq()}},
		line: "Training: running node",
		queue: &Queue{LocalQueue: "gpu", ClusterQueue: "gpu-cq", Workload: "trainjob-tj-1a2b3", Priority: ptr.To[int32](0), Active: true,
			Admitted: true, AdmittedAt: atp(3 * time.Second)},
		screen: `
Queue:
  LocalQueue:     gpu
  ClusterQueue:   gpu-cq
  Workload:       trainjob-tj-1a2b3
  Priority:       0
  Admitted:       +3s
`,
	}, {
		name: "preempted: the eviction from its Event and its condition, once",
		in: Objects{TrainJob: queuedTrainJob(), Queue: &QueueObjects{Served: true, Workload: preempted, LocalQueue: lq(),
			Workloads: []kueue.Workload{*preempted, urgent}},
			Events: []corev1.Event{wlEvent(corev1.EventTypeNormal, "EvictedDueToPreempted", preemptedMsg, 60*time.Second, 0),
				wlEvent(corev1.EventTypeNormal, "Preempted", preemptedMsg, 60*time.Second, 0)}},
		line: "Queued: " + noQuota,
		queue: &Queue{LocalQueue: "gpu", ClusterQueue: "gpu-cq", Workload: "trainjob-tj-1a2b3", Priority: ptr.To[int32](0), PriorityClass: "low",
			Active: true, NotAdmitted: noQuota, Position: PositionPending,
			Evictions: []Eviction{{Time: at(60 * time.Second), Reason: "Preempted", By: "TrainJob/urgent", Message: preemptedMsg}}},
		screen: `
Queue:
  LocalQueue:     gpu
  ClusterQueue:   gpu-cq
  Workload:       trainjob-tj-1a2b3
  Priority:       0 (low)
  Position:       pending
  Admitted:       no
  Evicted:        +1m0s Preempted by TrainJob/urgent: ` + preemptedMsg + `
`,
	}, {
		name: "preempted, its Event gone: the eviction from its condition; the preemptor gone too",
		in:   Objects{TrainJob: queuedTrainJob(), Queue: &QueueObjects{Served: true, Workload: preempted, LocalQueue: lq()}},
		line: "Queued: " + noQuota,
		queue: &Queue{LocalQueue: "gpu", ClusterQueue: "gpu-cq", Workload: "trainjob-tj-1a2b3", Priority: ptr.To[int32](0), PriorityClass: "low",
			Active: true, NotAdmitted: noQuota, Position: PositionPending,
			Evictions: []Eviction{{Time: at(60 * time.Second), Reason: "Preempted", Message: preemptedMsg}}},
	}, {
		name:  "stopped through its Workload: Suspended, not Queued",
		in:    Objects{TrainJob: queuedTrainJob(), Queue: &QueueObjects{Served: true, Workload: stopped, LocalQueue: lq()}},
		line:  "Suspended: stopped through Kueue: Workload trainjob-tj-1a2b3 has spec.active=false (kubectl trainjob resume queues it again)",
		queue: &Queue{LocalQueue: "gpu", ClusterQueue: "gpu-cq", Workload: "trainjob-tj-1a2b3", Priority: ptr.To[int32](0), NotAdmitted: noQuota},
	}, {
		name:  "Kueue not installed: the TrainJob's own stage",
		in:    Objects{TrainJob: queuedTrainJob(), Queue: &QueueObjects{}},
		line:  "Suspended: " + trainer.TrainJobSuspendedReason + " message",
		queue: &Queue{LocalQueue: "gpu", Note: "Kueue is not installed: the API server does not serve kueue.x-k8s.io"},
		screen: `
Queue:
  LocalQueue:   gpu
  Kueue:        Kueue is not installed: the API server does not serve kueue.x-k8s.io
`,
	}, {
		name:  "Workloads the user may not read: the TrainJob's own stage",
		in:    Objects{TrainJob: queuedTrainJob(), Queue: &QueueObjects{Served: true, Unreadable: "workloads.kueue.x-k8s.io is forbidden", LocalQueue: lq()}},
		line:  "Suspended: " + trainer.TrainJobSuspendedReason + " message",
		queue: &Queue{LocalQueue: "gpu", ClusterQueue: "gpu-cq", Note: "cannot read Kueue's Workloads: workloads.kueue.x-k8s.io is forbidden"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			s := Summarize(tc.in, created.Add(time.Hour))
			if got := s.StageLine(); got != tc.line {
				t.Errorf("StageLine() = %q, want %q", got, tc.line)
			}
			if diff := cmp.Diff(tc.queue, s.Queue); diff != "" {
				t.Errorf("Queue (-want +got):\n%s", diff)
			}
			if tc.screen == "" {
				return
			}
			var b bytes.Buffer
			if err := renderQueue(&b, s.Queue, func(tm *metav1.Time) string { return "+" + tm.Sub(created).String() }); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(strings.TrimPrefix(tc.screen, "\n"), strings.TrimPrefix(b.String(), "\n")); diff != "" {
				t.Errorf("screen (-want +got):\n%s", diff)
			}
		})
	}
}

// TestQueueTimeline: the Workload's way through the queue joins the timeline: its conditions, and its Events
// except those that repeat a condition's transition.
func TestQueueTimeline(t *testing.T) {
	wl := workload(wlCond(kueue.ConditionQuotaReserved, "Pending", metav1.ConditionFalse, noQuota, 2*time.Second),
		wlCond("PodsReady", "WaitForStart", metav1.ConditionFalse, "Not all pods are ready or succeeded", 2*time.Second))
	in := Objects{TrainJob: queuedTrainJob(), Queue: &QueueObjects{Served: true, Workload: wl},
		Events: []corev1.Event{
			wlEvent(corev1.EventTypeWarning, "Pending", noQuota, 2*time.Second, 7),
			event(corev1.EventTypeNormal, "CreatedWorkload", time.Second),
			{InvolvedObject: corev1.ObjectReference{Kind: "Workload", Name: "someone-else", UID: "other"}, Reason: "Admitted", FirstTimestamp: at(time.Second)},
		}}
	var got []string
	for _, e := range Summarize(in, created.Add(time.Hour)).Timeline {
		got = append(got, e.Since+" "+e.What()+" "+e.Reason+" "+withCount(e.Message, e.Count))
	}
	want := []string{
		"0s Created  ",
		"1s Suspended=True Suspended Suspended message",
		"1s Event Normal CreatedWorkload CreatedWorkload event",
		"2s Workload QuotaReserved=False Pending " + noQuota,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("timeline (-want +got):\n%s", diff)
	}
	if s := Summarize(in, created.Add(time.Hour)); s.Stage != stage.Queued || s.BlockedByTaint != nil {
		t.Errorf("stage %s, blocked by taint %v", s.Stage, s.BlockedByTaint)
	}
}
