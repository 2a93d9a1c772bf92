package stage

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
)

func TestOf(t *testing.T) {
	cond := func(typ string, status metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: "R"}
	}
	// job is a replicated job's counts as JobSet writes them: ready counts the Jobs whose pods are all ready.
	job := func(name string, ready, active, succeeded int32) trainer.JobStatus {
		return trainer.JobStatus{Name: name, Ready: ptr.To(ready), Active: ptr.To(active), Succeeded: ptr.To(succeeded),
			Failed: ptr.To[int32](0), Suspended: ptr.To[int32](0)}
	}
	failed := func(name string) trainer.JobStatus {
		js := job(name, 0, 0, 0)
		js.Failed = ptr.To[int32](1)
		return js
	}
	jobs := func(js ...trainer.JobStatus) trainer.TrainJob {
		return trainer.TrainJob{Status: trainer.TrainJobStatus{JobsStatus: js}}
	}
	cases := []struct {
		name string
		tj   trainer.TrainJob
		want Stage
	}{
		{name: "new TrainJob without status is Pending", want: Pending},
		{name: "suspended in spec before the controller saw it",
			tj: trainer.TrainJob{Spec: trainer.TrainJobSpec{Suspend: ptr.To(true)}}, want: Suspended},
		{name: "resumed but no job active yet is Pending",
			tj: trainer.TrainJob{Status: trainer.TrainJobStatus{Conditions: []metav1.Condition{cond("Suspended", metav1.ConditionFalse)}}}, want: Pending},
		{name: "dataset initializer running", tj: jobs(job("dataset-initializer", 1, 1, 0), job("node", 0, 0, 0)), want: Initializing},
		{name: "dataset initializer active but its pod not ready (unschedulable, pulling) is Pending",
			tj: jobs(job("dataset-initializer", 0, 1, 0), job("node", 0, 0, 0)), want: Pending},
		{name: "initializer done, trainer running", tj: jobs(job("dataset-initializer", 0, 0, 1), job("node", 1, 1, 0)), want: Training},
		{name: "initializers done, trainer not created yet is still Initializing",
			tj: jobs(job("dataset-initializer", 0, 0, 1), job("node", 0, 0, 0)), want: Initializing},
		{name: "initializers done, trainer's Job created but its pods unschedulable is Training: the initializers are over",
			tj: jobs(job("dataset-initializer", 0, 0, 1), job("node", 0, 1, 0)), want: Training},
		// Between Training and Complete: a trainer pod has succeeded, so it is no longer ready, and its Job has
		// not counted it succeeded yet (the Job controller does that in a second status write).
		{name: "initializers done, a trainer pod succeeded but its Job counts it neither ready nor succeeded yet is still Training",
			tj: jobs(job("dataset-initializer", 0, 0, 1), job("model-initializer", 0, 0, 1), job("node", 0, 1, 0)), want: Training},
		// The same moment for a Job with nothing before it: its counts are those of a Job whose pods wait for a
		// node, and the TrainJob holds nothing else to tell them apart.
		{name: "the initializer's pod succeeded but its Job counts it neither ready nor succeeded yet is Pending",
			tj: jobs(job("dataset-initializer", 0, 1, 0)), want: Pending},
		{name: "one initializer done, the other still running, is Initializing",
			tj: jobs(job("dataset-initializer", 0, 0, 1), job("model-initializer", 1, 1, 0), job("node", 0, 1, 0)), want: Initializing},
		{name: "trainer Job active but its pods unschedulable is Pending", tj: jobs(job("node", 0, 1, 0)), want: Pending},
		{name: "trainer Job active, ready counts not written by an old JobSet is Pending",
			tj: jobs(trainer.JobStatus{Name: "node", Active: ptr.To[int32](1)}), want: Pending},
		{name: "one of two trainer Jobs ready is Training", tj: jobs(job("node", 1, 2, 0)), want: Training},
		{name: "trainer done, Complete not written yet is still Training",
			tj: jobs(job("dataset-initializer", 0, 0, 1), job("node", 0, 0, 1)), want: Training},
		{name: "trainer Job failed, Failed not written yet is Training", tj: jobs(failed("node")), want: Training},
		{name: "MPI launcher running", tj: jobs(job("node", 1, 1, 0), job("launcher", 1, 1, 0)), want: Training},
		{name: "MPI launcher waiting for a node, nodes' sshd ready is Training",
			tj: jobs(job("node", 1, 1, 0), job("launcher", 0, 1, 0)), want: Training},
		{name: "complete wins over active counts",
			tj: trainer.TrainJob{Status: trainer.TrainJobStatus{Conditions: []metav1.Condition{cond("Complete", metav1.ConditionTrue)},
				JobsStatus: []trainer.JobStatus{job("node", 1, 1, 0)}}}, want: Complete},
		{name: "failed wins over suspended",
			tj: trainer.TrainJob{Spec: trainer.TrainJobSpec{Suspend: ptr.To(true)},
				Status: trainer.TrainJobStatus{Conditions: []metav1.Condition{cond("Failed", metav1.ConditionTrue)}}}, want: Failed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Of(&tc.tj); got != tc.want {
				t.Errorf("Of() = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want Stage
		ok   bool
	}{
		{"Training", Training, true},
		{"complete", Complete, true},
		{"SUSPENDED", Suspended, true},
		{"Running", "", false},
		{"", "", false},
	}
	for _, tt := range tests {
		got, ok := Parse(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("Parse(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

// TestInQueue: a TrainJob in a Kueue LocalQueue is Queued while Kueue keeps it suspended and its Workload,
// active, is not admitted; stopped through its Workload it is Suspended; otherwise its stage is Of's.
func TestInQueue(t *testing.T) {
	suspendedBy := func(suspend bool, conds ...metav1.Condition) *trainer.TrainJob {
		return &trainer.TrainJob{Spec: trainer.TrainJobSpec{Suspend: ptr.To(suspend)}, Status: trainer.TrainJobStatus{Conditions: conds}}
	}
	suspendedCond := metav1.Condition{Type: trainer.TrainJobSuspended, Status: metav1.ConditionTrue, Reason: trainer.TrainJobSuspendedReason}
	complete := metav1.Condition{Type: trainer.TrainJobComplete, Status: metav1.ConditionTrue, Reason: "AllJobsCompleted"}
	running := suspendedBy(false)
	running.Status.JobsStatus = []trainer.JobStatus{{Name: trainer.Node, Ready: ptr.To[int32](1), Active: ptr.To[int32](1)}}
	cases := []struct {
		name string
		tj   *trainer.TrainJob
		wl   *Workload
		want Stage
	}{
		{name: "suspended by Kueue's webhook, no Workload yet", tj: suspendedBy(true), want: Queued},
		{name: "suspended, the Workload waits for quota", tj: suspendedBy(true, suspendedCond), wl: &Workload{}, want: Queued},
		{name: "stopped through the Workload (spec.active=false)", tj: suspendedBy(true, suspendedCond), wl: &Workload{Inactive: true}, want: Suspended},
		{name: "admitted, Kueue has not resumed it yet", tj: suspendedBy(true, suspendedCond), wl: &Workload{Admitted: true}, want: Suspended},
		{name: "admitted and resumed, the controller has not seen it yet: Suspended by its condition, not by Kueue",
			tj: suspendedBy(false, suspendedCond), wl: &Workload{Admitted: true}, want: Suspended},
		{name: "admitted and running", tj: running, wl: &Workload{Admitted: true}, want: Training},
		{name: "finished while suspended", tj: suspendedBy(true, complete), wl: &Workload{}, want: Complete},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := InQueue(tc.tj, tc.wl); got != tc.want {
				t.Errorf("InQueue = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestParseOf: Queued is a stage only where Workloads are read.
func TestParseOf(t *testing.T) {
	if _, ok := Parse("queued"); ok {
		t.Error("Parse accepts Queued, which Of never returns")
	}
	if st, ok := ParseOf(WithQueued, "queued"); !ok || st != Queued {
		t.Errorf("ParseOf(WithQueued, queued) = %q, %v", st, ok)
	}
	if got, want := len(WithQueued), len(All)+1; got != want {
		t.Errorf("WithQueued has %d stages, want All's %d and Queued", got, want)
	}
}
