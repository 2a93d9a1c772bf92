package optimization

import (
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/optimization/search"
)

func optimizationJob(direction trainer.ObjectiveDirection) *trainer.OptimizationJob {
	return &trainer.OptimizationJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "tune", UID: "uid-1"},
		Spec: trainer.OptimizationJobSpec{
			Objectives: []trainer.Objective{{Metric: "loss", Direction: direction}},
			NumTrials:  10, ParallelTrials: 2,
			TrainJobTemplate: trainer.TrainJobTemplateSpec{Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: "torch"}}},
		},
	}
}

// trial is trial index of oj with value lr, ended as condition (none when
// empty), having reported loss (none when empty).
func trial(t *testing.T, oj *trainer.OptimizationJob, index int, condition, loss string) trainer.TrainJob {
	t.Helper()
	tj, err := NewTrial(oj, index, search.Assignment{{Name: "lr", Value: strconv.Itoa(index)}})
	if err != nil {
		t.Fatal(err)
	}
	if condition != "" {
		tj.Status.Conditions = []metav1.Condition{{Type: condition, Status: metav1.ConditionTrue}}
	}
	if loss != "" {
		tj.Status.TrainerStatus = &trainer.TrainerStatus{Metrics: []trainer.Metric{{Name: "other", Value: "0"}, {Name: "loss", Value: loss}}}
	}
	return *tj
}

func TestNewTrial(t *testing.T) {
	oj := optimizationJob(trainer.ObjectiveDirectionMinimize)
	oj.Spec.TrainJobTemplate.Labels = map[string]string{"team": "a", JobNameLabel: "someone-else"}
	oj.Spec.TrainJobTemplate.Spec.Trainer = &trainer.Trainer{Env: []corev1.EnvVar{
		{Name: "KUBEFLOW_TRAINER_OPT_BATCH_SIZE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
	}}
	got, err := NewTrial(oj, 12, search.Assignment{{Name: "lr", Value: "0.1"}, {Name: "batch-size", Value: "32"}})
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "tune-12" || got.Namespace != "ns" {
		t.Errorf("name %s/%s, want ns/tune-12", got.Namespace, got.Name)
	}
	wantLabels := map[string]string{"team": "a", JobNameLabel: "tune", TrialIndexLabel: "12"}
	if diff := cmp.Diff(wantLabels, got.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	if want := `[{"name":"lr","value":"0.1"},{"name":"batch-size","value":"32"}]`; got.Annotations[ParametersAnnotation] != want {
		t.Errorf("annotation %s, want %s", got.Annotations[ParametersAnnotation], want)
	}
	wantEnv := []corev1.EnvVar{{Name: "KUBEFLOW_TRAINER_OPT_BATCH_SIZE", Value: "32"}, {Name: "KUBEFLOW_TRAINER_OPT_LR", Value: "0.1"}}
	if diff := cmp.Diff(wantEnv, got.Spec.Trainer.Env); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	if !metav1.IsControlledBy(got, oj) || !ptr.Deref(got.OwnerReferences[0].BlockOwnerDeletion, false) {
		t.Errorf("owner references %+v", got.OwnerReferences)
	}
	// The template is not changed.
	if oj.Spec.TrainJobTemplate.Spec.Trainer.Env[0].Value != "" || oj.Spec.TrainJobTemplate.Labels[JobNameLabel] != "someone-else" {
		t.Errorf("the template changed: %+v", oj.Spec.TrainJobTemplate)
	}
	if a, err := TrialParameters(got); err != nil || len(a) != 2 || a[1].Value != "32" {
		t.Errorf("TrialParameters = %v, %v", a, err)
	}
}

func TestObserve(t *testing.T) {
	minimize := optimizationJob(trainer.ObjectiveDirectionMinimize)
	maximize := optimizationJob(trainer.ObjectiveDirectionMaximize)
	foreign := trial(t, minimize, 9, trainer.TrainJobComplete, "0")
	foreign.OwnerReferences[0].UID = "another"
	counted := minimize.DeepCopy()
	counted.Annotations = map[string]string{TrialsCreatedAnnotation: "5"}
	cases := []struct {
		name              string
		oj                *trainer.OptimizationJob
		trials            func(oj *trainer.OptimizationJob) []trainer.TrainJob
		created, running  int
		succeeded, failed int
		best              string
		madeNil           []int
	}{
		{name: "none", oj: minimize, trials: func(*trainer.OptimizationJob) []trainer.TrainJob { return nil }},
		{name: "lowest loss, a trial deleted, a foreign TrainJob ignored", oj: minimize, trials: func(oj *trainer.OptimizationJob) []trainer.TrainJob {
			return []trainer.TrainJob{trial(t, oj, 3, "", "0.01"), trial(t, oj, 0, trainer.TrainJobComplete, "0.5"),
				trial(t, oj, 2, trainer.TrainJobComplete, "0.2"), trial(t, oj, 4, trainer.TrainJobFailed, "0.1"), foreign}
		}, created: 5, running: 1, succeeded: 2, failed: 1, best: "tune-2", madeNil: []int{1}},
		{name: "highest first among equals", oj: maximize, trials: func(oj *trainer.OptimizationJob) []trainer.TrainJob {
			return []trainer.TrainJob{trial(t, oj, 1, trainer.TrainJobComplete, "0.9"), trial(t, oj, 0, trainer.TrainJobComplete, "0.9"),
				trial(t, oj, 2, trainer.TrainJobComplete, "0.5"), trial(t, oj, 3, trainer.TrainJobComplete, "")}
		}, created: 4, succeeded: 4, best: "tune-0"},
		{name: "the annotation counts a last trial deleted", oj: counted, trials: func(oj *trainer.OptimizationJob) []trainer.TrainJob {
			return []trainer.TrainJob{trial(t, oj, 0, "", "")}
		}, created: 5, running: 1, madeNil: []int{1, 2, 3, 4}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := Observe(tc.oj, tc.trials(tc.oj))
			if s.Created != tc.created || s.Running != tc.running || s.Succeeded != tc.succeeded || s.Failed != tc.failed {
				t.Errorf("created %d, running %d, succeeded %d, failed %d; want %d, %d, %d, %d",
					s.Created, s.Running, s.Succeeded, s.Failed, tc.created, tc.running, tc.succeeded, tc.failed)
			}
			best := ""
			if s.Best != nil {
				best = s.Best.Name
			}
			if best != tc.best {
				t.Errorf("best %q, want %q", best, tc.best)
			}
			var madeNil []int
			for i, a := range s.Made {
				if a == nil {
					madeNil = append(madeNil, i)
				}
			}
			if diff := cmp.Diff(tc.madeNil, madeNil); diff != "" {
				t.Errorf("indexes without an assignment (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSeed(t *testing.T) {
	if Seed("a") == Seed("b") || Seed("a") != Seed("a") {
		t.Errorf("Seed: a %d, b %d", Seed("a"), Seed("b"))
	}
}
