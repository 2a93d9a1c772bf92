package metrics_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator/metrics"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator/metrics/metricstest"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/stage"
)

func TestObserveReconcile(t *testing.T) {
	m, reg := metricstest.Registered(t)
	m.ObserveReconcile(20*time.Millisecond, nil)
	m.ObserveReconcile(3*time.Second, errors.New("conflict"))
	m.ObserveReconcile(time.Second, nil)
	families := metricstest.Gather(t, reg)
	if diff := cmp.Diff(map[string]float64{"result=success": 2, "result=error": 1}, metricstest.Values(families, metrics.ReconcileDurationName)); diff != "" {
		t.Errorf("reconciles observed (-want +got):\n%s", diff)
	}
	if got := metricstest.Sums(families, metrics.ReconcileDurationName)["result=error"]; got != 3 {
		t.Errorf("the failed reconcile took %vs, want 3s", got)
	}
}

// TestObserveStageTransition: by stage left and entered; a transition seen before the stage's start (clock
// skew) counts as 0 s, not negative.
func TestObserveStageTransition(t *testing.T) {
	m, reg := metricstest.Registered(t)
	m.ObserveStageTransition(stage.Pending, stage.Training, 90*time.Second)
	m.ObserveStageTransition(stage.Pending, stage.Training, -5*time.Second)
	families := metricstest.Gather(t, reg)
	count := metricstest.Values(families, metrics.StageTransitionName)["from=Pending,to=Training"]
	sum := metricstest.Sums(families, metrics.StageTransitionName)["from=Pending,to=Training"]
	if count != 2 || sum != 90 {
		t.Errorf("Pending → Training: %v transitions, %vs in all; want 2 and 90s", count, sum)
	}
}

func TestCountBuildError(t *testing.T) {
	m, reg := metricstest.Registered(t)
	m.CountBuildError("torch")
	m.CountBuildError(metrics.RuntimePlugin)
	m.CountBuildError(metrics.RuntimePlugin)
	if diff := cmp.Diff(map[string]float64{"plugin=torch": 1, "plugin=runtime": 2},
		metricstest.Values(metricstest.Gather(t, reg), metrics.BuildErrorsName)); diff != "" {
		t.Errorf("build errors (-want +got):\n%s", diff)
	}
}
