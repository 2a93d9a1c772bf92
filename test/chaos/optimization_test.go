package chaos_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/optimization"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/optimization/search"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
)

// The search TestKillDuringSearch runs: two waves of trials, the first one large enough that the leader is
// still creating it when it is killed.
const (
	searchTrials   = 16
	searchParallel = 8
)

// trialLoss is the loss trial index reports: every trial a different one, the lowest trial 9's.
func trialLoss(index int) string {
	return strconv.FormatFloat(float64((index*5+3)%searchTrials+1)/10, 'f', 1, 64)
}

// TestKillDuringSearch: SIGKILL of the leader while it creates the first trials of an OptimizationJob (the
// kubelet runs it again; the other replica takes over). The test ends every trial as its trainer and the
// TrainJob controller would. Nothing is lost or made twice: the search completes with exactly its numTrials
// trials, one of each index, each the TrainJob first seen under its name (its UID), with the assignments the
// search makes from the OptimizationJob's seed in index order — none skipped or repeated —, the trials-created
// annotation at numTrials, and the best trial in status.result.
func TestKillDuringSearch(t *testing.T) {
	ctx := t.Context()
	ns := cluster.NewNamespace(t, env.client, "chaos-", nil)
	oj := &trainer.OptimizationJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "search"},
		Spec: trainer.OptimizationJobSpec{
			Objectives: []trainer.Objective{{Metric: "loss", Direction: trainer.ObjectiveDirectionMinimize}},
			Parameters: []trainer.Parameter{
				{Name: "lr", SearchSpace: &trainer.SearchSpace{LogUniform: trainer.LogUniformSpace{Min: "0.0001", Max: "0.1"}}},
				{Name: "batch", SearchSpace: &trainer.SearchSpace{Categorical: trainer.CategoricalSpace{Choices: []string{"16", "32", "64"}}}},
			},
			NumTrials:      searchTrials,
			ParallelTrials: searchParallel,
			TrainJobTemplate: trainer.TrainJobTemplateSpec{Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: "torch-distributed"},
				Trainer: &trainer.Trainer{NumNodes: ptr.To[int32](1)}}},
		},
	}
	if err := env.client.Create(ctx, oj); err != nil {
		t.Fatal(err)
	}

	leader, err := leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Killed as soon as the first trial exists: the leader creates the others of the wave one by one.
	var seen map[string]*trainer.TrainJob
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		seen, err = trials(ctx, oj)
		return err == nil && len(seen) > 0, nil
	}); err != nil {
		t.Fatalf("no trial within %v: %v", waitTimeout, err)
	}
	if err := env.stack.CrashReplica(leader); err != nil {
		t.Fatal(err)
	}
	t.Logf("SIGKILL of replica %d, the leader, with %d of the first %d trials created", leader, len(seen), searchParallel)

	// Every trial is ended as it appears, until the search completes; the replicas that exited are run again.
	uids := map[string]types.UID{}
	cluster.Eventually(t, "the OptimizationJob Complete", 2*waitTimeout, func(ctx context.Context) error {
		if _, err := env.stack.RestartExited(ctx); err != nil {
			return err
		}
		all, err := trials(ctx, oj)
		if err != nil {
			return err
		}
		for name, tj := range all {
			if uid, ok := uids[name]; ok && uid != tj.UID {
				return fmt.Errorf("%w: trial %s was made twice: UID %s, then %s", cluster.ErrCannotHappen, name, uid, tj.UID)
			}
			uids[name] = tj.UID
			if err := endTrial(ctx, tj); err != nil {
				return err
			}
		}
		if err := env.client.Get(ctx, client.ObjectKeyFromObject(oj), oj); err != nil {
			return err
		}
		if oj.Status == nil || !meta.IsStatusConditionTrue(oj.Status.Conditions, optimization.Complete) {
			return fmt.Errorf("%d trials; status %+v", len(all), oj.Status)
		}
		return nil
	})

	all, err := trials(ctx, oj)
	if err != nil {
		t.Fatal(err)
	}
	alg, err := search.New(&oj.Spec, optimization.Seed(oj.UID))
	if err != nil {
		t.Fatal(err)
	}
	var made []search.Assignment
	for i := range searchTrials {
		name := optimization.TrialName(oj.Name, i)
		want, _ := alg.Next(made)
		made = append(made, want)
		tj, ok := all[name]
		if !ok {
			t.Errorf("trial %s is missing", name)
			continue
		}
		delete(all, name)
		if tj.UID != uids[name] {
			t.Errorf("trial %s is UID %s, first seen as %s: made twice", name, tj.UID, uids[name])
		}
		if got, _ := optimization.TrialIndex(tj); got != i || !metav1.IsControlledBy(tj, oj) {
			t.Errorf("trial %s: index %d, controlled by the OptimizationJob %v", name, got, metav1.IsControlledBy(tj, oj))
		}
		got, err := optimization.TrialParameters(tj)
		if diff := cmp.Diff(want, got); err != nil || diff != "" {
			t.Errorf("trial %s's parameters (-the search's +the trial's), %v:\n%s", name, err, diff)
		}
	}
	for name := range all {
		t.Errorf("trial %s is one more than the %d of the search", name, searchTrials)
	}
	if got := oj.Annotations[optimization.TrialsCreatedAnnotation]; got != strconv.Itoa(searchTrials) {
		t.Errorf("annotation %s = %q, want %d", optimization.TrialsCreatedAnnotation, got, searchTrials)
	}
	const best = 9
	if want := (trainer.Result{TrainJobName: optimization.TrialName(oj.Name, best), Parameters: made[best]}); !cmp.Equal(want, oj.Status.Result) {
		t.Errorf("status.result %+v, want %+v", oj.Status.Result, want)
	}
}

// trials are the TrainJobs labelled with oj's name, by name.
func trials(ctx context.Context, oj *trainer.OptimizationJob) (map[string]*trainer.TrainJob, error) {
	var list trainer.TrainJobList
	if err := env.client.List(ctx, &list, client.InNamespace(oj.Namespace), client.MatchingLabels{optimization.JobNameLabel: oj.Name}); err != nil {
		return nil, err
	}
	m := map[string]*trainer.TrainJob{}
	for i := range list.Items {
		m[list.Items[i].Name] = &list.Items[i]
	}
	return m, nil
}

// endTrial ends trial tj, unless it has ended, as its trainer and the TrainJob controller would: the trainer
// reports its loss (trialLoss) in status.trainerStatus, and Complete becomes True.
func endTrial(ctx context.Context, tj *trainer.TrainJob) error {
	if meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobComplete) {
		return nil
	}
	index, ok := optimization.TrialIndex(tj)
	if !ok {
		return fmt.Errorf("trial %s has no index", tj.Name)
	}
	tj.Status.TrainerStatus = &trainer.TrainerStatus{LastUpdatedTime: metav1.Now(),
		Metrics: []trainer.Metric{{Name: "loss", Value: trialLoss(index)}}}
	meta.SetStatusCondition(&tj.Status.Conditions, metav1.Condition{Type: trainer.TrainJobComplete, Status: metav1.ConditionTrue,
		Reason: "ByTest", Message: "ended by the test"})
	// A conflict (the operator wrote the status meanwhile) is tried again at the next poll.
	return env.client.Status().Update(ctx, tj)
}
