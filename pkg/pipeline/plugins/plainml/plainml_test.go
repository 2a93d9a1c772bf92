package plainml

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/pipelinetest"
)

// initializerRuntime has a dataset initializer (parallelism 1) before the
// trainer step, whose container already sets two variables.
func initializerRuntime(t *testing.T, mlPolicy string) *pipeline.Runtime {
	t.Helper()
	return pipelinetest.Runtime(t, fmt.Sprintf(`
kind: ClusterTrainingRuntime
metadata: {name: plain}
spec:
  mlPolicy: %s
  template:
    spec:
      replicatedJobs:
      - name: dataset-initializer
        template:
          metadata:
            labels: {trainer.kubeflow.org/trainjob-ancestor-step: dataset-initializer}
          spec:
            template:
              spec:
                containers:
                - {name: dataset-initializer, image: initializer}
      - name: node
        template:
          metadata:
            labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}
          spec:
            parallelism: 2
            template:
              spec:
                containers:
                - name: node
                  image: trainer
                  env: [{name: EPOCHS, value: '1'}, {name: LR, value: '0.1'}]
`, mlPolicy))
}

func TestEnforceMLPolicy(t *testing.T) {
	runtimeEnv := []corev1.EnvVar{{Name: "EPOCHS", Value: "1"}, {Name: "LR", Value: "0.1"}}
	mergedEnv := []corev1.EnvVar{{Name: "EPOCHS", Value: "5"}, {Name: "LR", Value: "0.1"}, {Name: "SEED", Value: "7"}}
	const trainerSpec = "{numNodes: 3, env: [{name: EPOCHS, value: '5'}, {name: SEED, value: '7'}]}"
	cases := []struct {
		name       string
		mlPolicy   string
		trainer    string
		wantCounts map[string]int32
		wantEnv    []corev1.EnvVar
	}{
		{
			name:       "no ML policy: TrainJob numNodes and env win",
			mlPolicy:   "null",
			trainer:    trainerSpec,
			wantCounts: map[string]int32{"dataset-initializer": 1, "node": 3},
			wantEnv:    mergedEnv,
		},
		{
			name:       "no ML policy and no numNodes keeps the template's parallelism",
			mlPolicy:   "null",
			trainer:    "{env: [{name: SEED, value: '7'}]}",
			wantCounts: map[string]int32{"dataset-initializer": 1, "node": 2},
			wantEnv:    []corev1.EnvVar{{Name: "EPOCHS", Value: "1"}, {Name: "LR", Value: "0.1"}, {Name: "SEED", Value: "7"}},
		},
		{
			name:       "runs alongside XGBoost",
			mlPolicy:   "{numNodes: 1, xgboost: {}}",
			trainer:    trainerSpec,
			wantCounts: map[string]int32{"dataset-initializer": 1, "node": 3},
			wantEnv:    mergedEnv,
		},
		{
			name:       "runs alongside Flux",
			mlPolicy:   "{numNodes: 1, flux: {}}",
			trainer:    trainerSpec,
			wantCounts: map[string]int32{"dataset-initializer": 1, "node": 3},
			wantEnv:    mergedEnv,
		},
		{
			name:       "stays out of Torch",
			mlPolicy:   "{numNodes: 1, torch: {}}",
			trainer:    trainerSpec,
			wantCounts: map[string]int32{"dataset-initializer": 1, "node": 1},
			wantEnv:    runtimeEnv,
		},
		{
			name:       "stays out of MPI",
			mlPolicy:   "{numNodes: 1, mpi: {}}",
			trainer:    trainerSpec,
			wantCounts: map[string]int32{"dataset-initializer": 1, "node": 1},
			wantEnv:    runtimeEnv,
		},
		{
			name:       "stays out of JAX",
			mlPolicy:   "{numNodes: 1, jax: {}}",
			trainer:    trainerSpec,
			wantCounts: map[string]int32{"dataset-initializer": 1, "node": 1},
			wantEnv:    runtimeEnv,
		},
		{
			name:       "TrainJob without trainer changes nothing",
			mlPolicy:   "null",
			wantCounts: map[string]int32{"dataset-initializer": 1, "node": 2},
			wantEnv:    runtimeEnv,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tj := pipelinetest.TrainJobOn(t, "plain", tc.trainer)
			info := pipelinetest.Info(t, tj, initializerRuntime(t, tc.mlPolicy))
			if err := (&PlainML{}).EnforceMLPolicy(info, tj); err != nil {
				t.Fatalf("EnforceMLPolicy: %v", err)
			}
			gotCounts := map[string]int32{}
			for _, ps := range info.PodSets {
				gotCounts[ps.Name] = ps.Count
			}
			if diff := cmp.Diff(tc.wantCounts, gotCounts); diff != "" {
				t.Errorf("counts (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantEnv, info.TrainerPodSet().Container(trainer.Node).Env); diff != "" {
				t.Errorf("trainer env (-want +got):\n%s", diff)
			}
		})
	}
}

// TestEnforceMLPolicyCopiesValueFrom guards the TrainJob: later plugins edit
// the template in place, and must not reach the TrainJob through it.
func TestEnforceMLPolicyCopiesValueFrom(t *testing.T) {
	tj := pipelinetest.TrainJob(t, `
metadata: {name: alpha}
spec:
  runtimeRef: {name: plain}
  trainer: {env: [{name: TOKEN, valueFrom: {secretKeyRef: {name: hf, key: token}}}]}
`)
	info := pipelinetest.Info(t, tj, initializerRuntime(t, "null"))
	if err := (&PlainML{}).EnforceMLPolicy(info, tj); err != nil {
		t.Fatal(err)
	}
	c := info.TrainerPodSet().Container(trainer.Node)
	c.Env[len(c.Env)-1].ValueFrom.SecretKeyRef.Key = "changed"
	if got := tj.Spec.Trainer.Env[0].ValueFrom.SecretKeyRef.Key; got != "token" {
		t.Errorf("TrainJob env changed through the template: key = %q", got)
	}
}
