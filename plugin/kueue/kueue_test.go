package kueue

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/stage"
)

// A Workload as Kueue v0.17 writes it (v1beta2) for a TrainJob that waits for GPUs, trimmed.
const waitingWorkload = `{
  "apiVersion": "kueue.x-k8s.io/v1beta2",
  "kind": "Workload",
  "metadata": {
    "name": "trainjob-second-5c7f1",
    "namespace": "team",
    "ownerReferences": [{"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "name": "second",
      "uid": "uid-second", "controller": true, "blockOwnerDeletion": true}]
  },
  "spec": {"active": true, "priority": 0, "queueName": "gpu", "podSets": [{"name": "node", "count": 2}]},
  "status": {
    "conditions": [{"type": "QuotaReserved", "status": "False", "reason": "Pending",
      "message": "couldn't assign flavors to pod set node: insufficient unused quota for nvidia.com/gpu in flavor gpu-node, 16 more needed",
      "lastTransitionTime": "2026-12-01T10:00:01Z"}]
  }
}`

func decode(t *testing.T, doc string) Workload {
	t.Helper()
	var wl Workload
	if err := json.Unmarshal([]byte(doc), &wl); err != nil {
		t.Fatal(err)
	}
	return wl
}

func cond(typ string, status metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg,
		LastTransitionTime: metav1.NewTime(time.Date(2026, 12, 1, 10, 0, 5, 0, time.UTC))}
}

// TestWorkload: what the commands take from a Workload: admitted or not, and why not, as Kueue wrote it.
func TestWorkload(t *testing.T) {
	waiting := decode(t, waitingWorkload)
	admitted := waiting
	admitted.Status.Conditions = []metav1.Condition{cond(ConditionQuotaReserved, metav1.ConditionTrue, "QuotaReserved", "Quota reserved in ClusterQueue gpu-cq"),
		cond(ConditionAdmitted, metav1.ConditionTrue, "Admitted", "The workload is admitted")}
	admitted.Status.Admission = &Admission{ClusterQueue: "gpu-cq"}
	evicting := admitted
	evicting.Status.Conditions = append(slices.Clone(admitted.Status.Conditions),
		cond(ConditionEvicted, metav1.ConditionTrue, "Preempted", "Preempted to accommodate a workload (UID: u, JobUID: j) due to prioritization in the ClusterQueue"))
	checks := admitted
	checks.Status.Conditions = []metav1.Condition{cond(ConditionQuotaReserved, metav1.ConditionTrue, "QuotaReserved", "Quota reserved in ClusterQueue gpu-cq"),
		cond(ConditionAdmitted, metav1.ConditionFalse, "NoChecks", "The workload has not all admission checks ready")}
	stopped := waiting
	stopped.Spec.Active = ptr.To(false)
	fresh := waiting
	fresh.Status = WorkloadStatus{}

	type view struct {
		Admitted     bool
		AdmittedAt   bool
		ClusterQueue string
		NotAdmitted  string
		Stage        stage.Workload
	}
	for _, tc := range []struct {
		name string
		wl   Workload
		want view
	}{
		{"waiting for quota", waiting, view{NotAdmitted: "couldn't assign flavors to pod set node: insufficient unused quota for nvidia.com/gpu in flavor gpu-node, 16 more needed"}},
		{"admitted", admitted, view{Admitted: true, AdmittedAt: true, ClusterQueue: "gpu-cq", Stage: stage.Workload{Admitted: true}}},
		{"being evicted: Admitted is still True", evicting, view{ClusterQueue: "gpu-cq"}},
		{"quota reserved, admission checks pending", checks, view{ClusterQueue: "gpu-cq", NotAdmitted: "The workload has not all admission checks ready"}},
		{"stopped", stopped, view{NotAdmitted: waiting.NotAdmitted(), Stage: stage.Workload{Inactive: true}}},
		{"not considered yet", fresh, view{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := view{Admitted: tc.wl.Admitted(), AdmittedAt: tc.wl.AdmittedAt() != nil, ClusterQueue: tc.wl.ClusterQueue(),
				NotAdmitted: tc.wl.NotAdmitted(), Stage: *tc.wl.Stage()}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestOf: a TrainJob's Workload is the one it controls, whatever the names say.
func TestOf(t *testing.T) {
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "second", UID: "uid-second"}}
	ours := decode(t, waitingWorkload)
	namesake := ours
	namesake.Name = "trainjob-second-00000"
	namesake.OwnerReferences = []metav1.OwnerReference{{Kind: trainer.TrainJobKind, Name: "second", UID: "uid-old", Controller: ptr.To(true)}}
	notController := ours
	notController.Name = "other"
	notController.OwnerReferences = []metav1.OwnerReference{{Kind: trainer.TrainJobKind, Name: "second", UID: "uid-second"}}
	if got := Of(tj, []Workload{namesake, notController, ours}); got == nil || got.Name != ours.Name {
		t.Errorf("Of = %v, want %s", got, ours.Name)
	}
	if got := Of(tj, []Workload{namesake, notController}); got != nil {
		t.Errorf("Of = %s, want none: neither is controlled by the TrainJob", got.Name)
	}
	if got := ours.PriorityClass(); got != "" {
		t.Errorf("PriorityClass = %q", got)
	}
	ours.Spec.PriorityClassRef = &PriorityClassRef{Name: "high"}
	if got := ours.PriorityClass(); got != "high" {
		t.Errorf("PriorityClass = %q, want high", got)
	}
	var nilWorkload *Workload
	if nilWorkload.Stage() != nil {
		t.Error("the stage view of no Workload is not nil")
	}
}

func TestShort(t *testing.T) {
	long := strings.Repeat("x", 150)
	for _, tc := range []struct{ in, want string }{
		{"couldn't assign flavors to pod set node: insufficient unused quota for nvidia.com/gpu in flavor gpu-node, 16 more needed",
			"insufficient unused quota for nvidia.com/gpu in flavor gpu-node, 16 more needed"},
		{"LocalQueue gpu doesn't exist", "LocalQueue gpu doesn't exist"},
		{long, strings.Repeat("x", maxShort-1) + "…"},
	} {
		if got := Short(tc.in); got != tc.want {
			t.Errorf("Short(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestPreemptor: the preemptor is named by its Workload's owner, found by the Workload's UID in Kueue's message.
func TestPreemptor(t *testing.T) {
	urgent := Workload{ObjectMeta: metav1.ObjectMeta{Name: "trainjob-urgent-4d5e6", UID: "0b1c",
		OwnerReferences: []metav1.OwnerReference{{Kind: trainer.TrainJobKind, Name: "urgent", UID: "9f8e", Controller: ptr.To(true)}}}}
	msg := "Preempted to accommodate a workload (UID: 0b1c, JobUID: 9f8e) due to prioritization in the ClusterQueue; preemptor path: /gpu-cq; preemptee path: /gpu-cq"
	for _, tc := range []struct {
		name, msg string
		wls       []Workload
		want      string
	}{
		{"the preemptor's Workload is there", msg, []Workload{urgent}, "TrainJob/urgent"},
		{"it is not (another namespace, or gone)", msg, nil, ""},
		{"the JobUID is not a Workload's UID", strings.Replace(msg, "UID: 0b1c", "UID: 7777", 1), []Workload{urgent}, ""},
		{"not a preemption", "The workload is deactivated", []Workload{urgent}, ""},
	} {
		if got := Preemptor(tc.msg, tc.wls); got != tc.want {
			t.Errorf("%s: Preemptor = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestFindPending: a LocalQueue's pending list as Kueue v0.17.0 serves it, with the Workloads of another
// namespace's LocalQueue of the same name mixed in and counted in the LocalQueue's positions: FindPending counts
// the position among its own namespace's.
func TestFindPending(t *testing.T) {
	pending := func(ns, name string, inCQ, inLQ int32) PendingWorkload {
		return PendingWorkload{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, LocalQueueName: "gpu",
			PositionInClusterQueue: inCQ, PositionInLocalQueue: inLQ}
	}
	list := []PendingWorkload{pending("b", "other", 0, 0), pending("a", "next", 1, 1), pending("b", "next", 2, 2), pending("a", "later", 3, 3)}
	for _, tc := range []struct {
		namespace, name string
		want            string
	}{
		{"a", "next", "1 ahead in ClusterQueue gpu-cq, 0 in LocalQueue gpu"},
		{"a", "later", "3 ahead in ClusterQueue gpu-cq, 1 in LocalQueue gpu"},
		{"b", "next", "2 ahead in ClusterQueue gpu-cq, 1 in LocalQueue gpu"},
		{"a", "gone", ""},
	} {
		got := ""
		if p := FindPending(list, tc.namespace, tc.name); p != nil {
			got = p.Position("gpu-cq", "gpu")
		}
		if got != tc.want {
			t.Errorf("FindPending(%s/%s): %q, want %q", tc.namespace, tc.name, got, tc.want)
		}
	}
	if list[1].PositionInLocalQueue != 1 {
		t.Errorf("FindPending changed the list it was given: %+v", list[1])
	}
}
