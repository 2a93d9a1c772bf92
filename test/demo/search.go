package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/optimization"
)

// The demo's hyperparameter search, on the real node after its CPU TrainJob: searchFile is an OptimizationJob
// of searchTrials trials of the CPU trainer over its learning rate.
const (
	searchFile   = "test/demo/search.yaml"
	searchName   = "lr-search"
	searchTrials = 4
	// searchMetric is the objective of searchFile, the loss the trainer reports.
	searchMetric = "loss"
)

// followSearch follows the OptimizationJob searchName until it is Complete: it prints each trial as it
// completes, with the learning rate of its parameters and the last loss it reported. It fails when the search or
// a trial fails.
func followSearch(ctx context.Context, c client.Client, out io.Writer) error {
	shown := map[string]bool{}
	return wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		var trials trainer.TrainJobList
		if err := c.List(ctx, &trials, client.InNamespace(namespace), client.MatchingLabels{optimization.JobNameLabel: searchName}); err != nil {
			return false, nil // tried again at the next poll
		}
		for i := range trials.Items {
			tj := &trials.Items[i]
			if shown[tj.Name] {
				continue
			}
			if cond := meta.FindStatusCondition(tj.Status.Conditions, trainer.TrainJobFailed); cond != nil && cond.Status == metav1.ConditionTrue {
				return false, fmt.Errorf("trial %s Failed: %s", tj.Name, cond.Message)
			}
			if !meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobComplete) {
				continue
			}
			a, err := optimization.TrialParameters(tj)
			if err != nil {
				return false, fmt.Errorf("trial %s: %w", tj.Name, err)
			}
			fmt.Fprintf(out, "    %s  %s  %s=%s  Complete\n", tj.Name, assignment(a), searchMetric, metric(tj, searchMetric))
			shown[tj.Name] = true
		}
		var oj trainer.OptimizationJob
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: searchName}, &oj); err != nil || oj.Status == nil {
			return false, nil
		}
		if cond := meta.FindStatusCondition(oj.Status.Conditions, optimization.Failed); cond != nil && cond.Status == metav1.ConditionTrue {
			return false, fmt.Errorf("OptimizationJob %s Failed: %s", searchName, cond.Message)
		}
		return meta.IsStatusConditionTrue(oj.Status.Conditions, optimization.Complete) && len(shown) == searchTrials, nil
	})
}

// assignment is a trial's parameters as NAME=VALUE, separated by spaces.
func assignment(a []trainer.ParameterAssignment) string {
	var parts []string
	for _, p := range a {
		parts = append(parts, p.Name+"="+p.Value)
	}
	return strings.Join(parts, " ")
}

// metric is the last value of name a trial reported, as its status.trainerStatus holds it.
func metric(tj *trainer.TrainJob, name string) string {
	if tj.Status.TrainerStatus != nil {
		for _, m := range tj.Status.TrainerStatus.Metrics {
			if m.Name == name {
				return m.Value
			}
		}
	}
	return "(none)"
}
