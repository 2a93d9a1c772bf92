package realnode_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/optimization"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/images/sgd"
)

// The search of randomSearch: few short trials, several at once on the real node.
const (
	searchTrials   = 6
	searchParallel = 3
	searchSteps    = 10
	// searchTimeout bounds the whole search: a wait on the real node per wave of trials.
	searchTimeout = searchTrials / searchParallel * waitTimeout
)

// trial is what a trial of the search says of itself.
type trial struct {
	name string
	// lr is the learning rate its trainer was given (its env), loss the last loss it reported to the status
	// server, as its status.trainerStatus holds it.
	lr, loss string
}

// randomSearch: an OptimizationJob's seeded random search of the sgd trainer's learning rate, the objective
// the loss its trials report through the status server, minimised. Its trials train for real; it completes,
// and its result is the trial whose own last reported loss is lowest — checked against every trial's
// status.trainerStatus and log, not the controller's arithmetic — with the learning rate of that trial's env.
// Below the trainer's largest stable rate a higher rate ends lower after the same steps: the losses fall as the
// rates rise, which shows every trainer took its rate from the env.
func (r *realNodeSuite) randomSearch(t *testing.T) {
	ns := r.namespace(t)
	template := torchTrainJob(ns, "", 1, stepsEnv(searchSteps))
	oj := &trainer.OptimizationJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lr"},
		Spec: trainer.OptimizationJobSpec{
			Objectives:      []trainer.Objective{{Metric: "loss", Direction: trainer.ObjectiveDirectionMinimize}},
			SearchAlgorithm: &trainer.SearchAlgorithm{Random: &trainer.RandomAlgorithm{Seed: ptr.To[int64](2605)}},
			Parameters: []trainer.Parameter{{Name: "lr", SearchSpace: &trainer.SearchSpace{
				LogUniform: trainer.LogUniformSpace{Min: "0.001", Max: "0.1"},
			}}},
			NumTrials:        searchTrials,
			ParallelTrials:   searchParallel,
			TrainJobTemplate: trainer.TrainJobTemplateSpec{Spec: template.Spec},
		},
	}
	if err := r.cl.Create(t.Context(), oj); err != nil {
		t.Fatal(err)
	}
	cluster.Eventually(t, "OptimizationJob "+oj.Name+" Complete", searchTimeout, func(ctx context.Context) error {
		if err := r.cl.Get(ctx, client.ObjectKeyFromObject(oj), oj); err != nil {
			return err
		}
		var conds []metav1.Condition
		if oj.Status != nil {
			conds = oj.Status.Conditions
		}
		if c := meta.FindStatusCondition(conds, optimization.Failed); c != nil && c.Status == metav1.ConditionTrue {
			return fmt.Errorf("%w: Failed: %s", cluster.ErrCannotHappen, c.Message)
		}
		if !meta.IsStatusConditionTrue(conds, optimization.Complete) {
			return fmt.Errorf("conditions %+v", conds)
		}
		return nil
	})

	trials := r.trialReports(t, oj)
	if t.Failed() {
		return
	}
	best := slices.MinFunc(trials, func(a, b trial) int { return cmpFloat(t, a.loss, b.loss) })
	for _, tr := range trials {
		if tr != best && cmpFloat(t, tr.loss, best.loss) == 0 {
			t.Fatalf("trials %s and %s both reported the lowest loss %s: no single best", tr.name, best.name, best.loss)
		}
	}
	want := trainer.Result{TrainJobName: best.name, Parameters: []trainer.ParameterAssignment{{Name: "lr", Value: best.lr}}}
	if diff := cmp.Diff(want, oj.Status.Result); diff != "" {
		t.Errorf("status.result is not the trial with the lowest loss it reported (-want +got):\n%s", diff)
	}
	byRate := slices.SortedFunc(slices.Values(trials), func(a, b trial) int { return cmpFloat(t, a.lr, b.lr) })
	for i := 1; i < len(byRate); i++ {
		if lo, hi := byRate[i-1], byRate[i]; cmpFloat(t, hi.loss, lo.loss) >= 0 {
			t.Errorf("trial %s (lr %s) ended at loss %s, not below trial %s's (lr %s) %s: the trainers did not train at their rates",
				hi.name, hi.lr, hi.loss, lo.name, lo.lr, lo.loss)
		}
	}
}

// trialReports checks that oj made exactly its trials, each Complete, trained with the learning rate of its
// parameters annotation and reported its log's last loss, and returns what they reported.
func (r *realNodeSuite) trialReports(t *testing.T, oj *trainer.OptimizationJob) []trial {
	t.Helper()
	var list trainer.TrainJobList
	if err := r.cl.List(t.Context(), &list, client.InNamespace(oj.Namespace), client.MatchingLabels{optimization.JobNameLabel: oj.Name}); err != nil {
		t.Fatal(err)
	}
	var names, want []string
	for i := range searchTrials {
		want = append(want, optimization.TrialName(oj.Name, i))
	}
	var trials []trial
	for i := range list.Items {
		tj := &list.Items[i]
		names = append(names, tj.Name)
		if !meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobComplete) {
			t.Errorf("trial %s is not Complete: %+v", tj.Name, tj.Status.Conditions)
			continue
		}
		tr := trial{name: tj.Name}
		for _, e := range tj.Spec.Trainer.Env {
			if e.Name == sgd.LearningRateEnv {
				tr.lr = e.Value
			}
		}
		params, err := optimization.TrialParameters(tj)
		if err != nil || len(params) != 1 || params[0].Value != tr.lr {
			t.Errorf("trial %s: %s=%q, parameters %v (%v): want the same learning rate", tj.Name, sgd.LearningRateEnv, tr.lr, params, err)
		}
		var metrics []trainer.Metric
		if tj.Status.TrainerStatus != nil {
			metrics = tj.Status.TrainerStatus.Metrics
		}
		for _, m := range metrics {
			if m.Name == "loss" {
				tr.loss = m.Value
			}
		}
		lines := sgd.StepLines(r.podLog(t, tj))
		if len(lines) != searchSteps || strings.Fields(lines[len(lines)-1])[3] != tr.loss {
			t.Errorf("trial %s reported %v, its log's steps are %v: want its last step's loss", tj.Name, metrics, lines)
		}
		t.Logf("trial %s: lr %s, loss %s", tr.name, tr.lr, tr.loss)
		trials = append(trials, tr)
	}
	slices.Sort(names)
	if !slices.Equal(names, want) {
		t.Errorf("the trials are %v, want %v", names, want)
	}
	return trials
}

// podLog is the log of the one trainer pod of tj.
func (r *realNodeSuite) podLog(t *testing.T, tj *trainer.TrainJob) string {
	t.Helper()
	var pods corev1.PodList
	if err := r.cl.List(t.Context(), &pods, client.InNamespace(tj.Namespace), client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: tj.Name}); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 {
		t.Fatalf("TrainJob %s has %d pods, want 1", tj.Name, len(pods.Items))
	}
	data, err := r.c.Clientset().CoreV1().Pods(tj.Namespace).GetLogs(pods.Items[0].Name, &corev1.PodLogOptions{}).DoRaw(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// cmpFloat compares two numbers written as strings.
func cmpFloat(t *testing.T, a, b string) int {
	t.Helper()
	x, errX := strconv.ParseFloat(a, 64)
	y, errY := strconv.ParseFloat(b, 64)
	if errX != nil || errY != nil {
		t.Fatalf("not numbers: %q (%v), %q (%v)", a, errX, b, errY)
	}
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}
