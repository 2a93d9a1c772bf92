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
	job := func(name string, active, succeeded int32) trainer.JobStatus {
		return trainer.JobStatus{Name: name, Active: ptr.To(active), Succeeded: ptr.To(succeeded),
			Ready: ptr.To[int32](0), Failed: ptr.To[int32](0), Suspended: ptr.To[int32](0)}
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
		{name: "dataset initializer active",
			tj: trainer.TrainJob{Status: trainer.TrainJobStatus{JobsStatus: []trainer.JobStatus{job("dataset-initializer", 1, 0), job("node", 0, 0)}}}, want: Initializing},
		{name: "initializer done, trainer active",
			tj: trainer.TrainJob{Status: trainer.TrainJobStatus{JobsStatus: []trainer.JobStatus{job("dataset-initializer", 0, 1), job("node", 1, 0)}}}, want: Training},
		{name: "initializers done, trainer not created yet is still Initializing",
			tj: trainer.TrainJob{Status: trainer.TrainJobStatus{JobsStatus: []trainer.JobStatus{job("dataset-initializer", 0, 1), job("node", 0, 0)}}}, want: Initializing},
		{name: "trainer done, Complete not written yet is still Training",
			tj: trainer.TrainJob{Status: trainer.TrainJobStatus{JobsStatus: []trainer.JobStatus{job("dataset-initializer", 0, 1), job("node", 0, 1)}}}, want: Training},
		{name: "MPI launcher active",
			tj: trainer.TrainJob{Status: trainer.TrainJobStatus{JobsStatus: []trainer.JobStatus{job("launcher", 1, 0)}}}, want: Training},
		{name: "complete wins over active counts",
			tj: trainer.TrainJob{Status: trainer.TrainJobStatus{Conditions: []metav1.Condition{cond("Complete", metav1.ConditionTrue)},
				JobsStatus: []trainer.JobStatus{job("node", 1, 0)}}}, want: Complete},
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
