package controller

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/optimization"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/optimization/search"
)

// TestReport: the conditions and result of a search as its trials tell it.
func TestReport(t *testing.T) {
	oj := &trainer.OptimizationJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "tune", UID: "uid-1"},
		Spec: trainer.OptimizationJobSpec{
			Objectives: []trainer.Objective{{Metric: "loss", Direction: trainer.ObjectiveDirectionMinimize}},
			NumTrials:  3, ParallelTrials: 1,
		},
	}
	trial := func(index int, condition, loss string) trainer.TrainJob {
		tj, err := optimization.NewTrial(oj, index, search.Assignment{{Name: "lr", Value: "0.1"}})
		if err != nil {
			t.Fatal(err)
		}
		if condition != "" {
			tj.Status.Conditions = []metav1.Condition{{Type: condition, Status: metav1.ConditionTrue}}
		}
		if loss != "" {
			tj.Status.TrainerStatus = &trainer.TrainerStatus{Metrics: []trainer.Metric{{Name: "loss", Value: loss}}}
		}
		return *tj
	}
	type cond struct{ Type, Status, Reason, Message string }
	cases := []struct {
		name   string
		trials []trainer.TrainJob
		// created, when set, counts trials deleted by hand.
		created int
		out     creation
		want    []cond
		result  string
	}{
		{name: "one of three created", trials: []trainer.TrainJob{trial(0, "", "")},
			want: []cond{{optimization.Created, "True", optimization.TrialsCreatedReason, "1 of 3 trials are created"}}},
		{name: "all created, one runs", trials: []trainer.TrainJob{trial(0, trainer.TrainJobComplete, "1"), trial(1, trainer.TrainJobFailed, ""), trial(2, "", "")},
			want:   []cond{{optimization.Created, "True", optimization.AllTrialsCreatedReason, "All 3 trials are created"}},
			result: "tune-0"},
		{name: "grid exhausted after two", trials: []trainer.TrainJob{trial(0, trainer.TrainJobComplete, "2"), trial(1, trainer.TrainJobComplete, "1")},
			out: creation{exhausted: true},
			want: []cond{{optimization.Created, "True", optimization.AllTrialsCreatedReason, "All 2 trials are created"},
				{optimization.Complete, "True", optimization.SearchSpaceExhaustedReason, "2 trials: 2 Complete, 0 Failed, 0 deleted; the best is tune-1 with loss 1"}},
			result: "tune-1"},
		{name: "no trial reported the objective", trials: []trainer.TrainJob{trial(0, trainer.TrainJobComplete, ""), trial(2, trainer.TrainJobFailed, "0.1")}, created: 3,
			want: []cond{{optimization.Created, "True", optimization.AllTrialsCreatedReason, "All 3 trials are created"},
				{optimization.Failed, "True", optimization.NoTrialSucceededReason, `No trial completed with metric "loss" reported (3 trials: 1 Complete, 1 Failed, 1 deleted)`}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u := &optimizationUpdate{orig: oj, oj: oj.DeepCopy(), now: metav1.NewTime(time.Now())}
			u.oj.Status = &trainer.OptimizationJobStatus{}
			s := optimization.Observe(oj, tc.trials)
			s.Created = max(s.Created, tc.created)
			report(u, s, tc.out)
			var got []cond
			for _, c := range u.oj.Status.Conditions {
				got = append(got, cond{c.Type, string(c.Status), c.Reason, c.Message})
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			if u.oj.Status.Result.TrainJobName != tc.result {
				t.Errorf("result %+v, want %s", u.oj.Status.Result, tc.result)
			}
		})
	}
}
