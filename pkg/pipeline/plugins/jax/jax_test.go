package jax

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/pipelinetest"
)

// jaxRuntime has the shape of the shipped jax-distributed runtime, with
// mlPolicy and the trainer container's name as parameters.
func jaxRuntime(mlPolicy, container string) string {
	return pipelinetest.TrainerRuntime{
		Name: "jax-distributed", MLPolicy: mlPolicy,
		Pod: `{containers: [{name: ` + container + `, image: nvcr.io/nvidia/jax:25.10-py3, env: [{name: XLA_FLAGS, value: --xla_gpu_enable_latency_hiding_scheduler=true}]}]}`,
	}.YAML()
}

func TestEnforceMLPolicy(t *testing.T) {
	xlaFlags := corev1.EnvVar{Name: "XLA_FLAGS", Value: "--xla_gpu_enable_latency_hiding_scheduler=true"}
	processID := corev1.EnvVar{Name: "JAX_PROCESS_ID", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
		FieldPath: "metadata.annotations['batch.kubernetes.io/job-completion-index']",
	}}}
	coordinatorPort := []corev1.ContainerPort{{ContainerPort: 29500}}
	cases := []struct {
		name      string
		runtime   string
		trainer   string
		container string
		wantCount int32
		wantEnv   []corev1.EnvVar
		wantPorts []corev1.ContainerPort
	}{
		{
			name:      "one process per node, coordinated by the first pod",
			runtime:   jaxRuntime("{numNodes: 1, jax: {}}", "node"),
			trainer:   "{numNodes: 4}",
			wantCount: 4,
			wantEnv: []corev1.EnvVar{
				xlaFlags,
				{Name: "JAX_NUM_PROCESSES", Value: "4"},
				processID,
				{Name: "JAX_COORDINATOR_ADDRESS", Value: "alpha-node-0-0.alpha:29500"},
			},
			wantPorts: coordinatorPort,
		},
		{
			name:      "runtime numNodes when the TrainJob sets none",
			runtime:   jaxRuntime("{numNodes: 2, jax: {}}", "node"),
			trainer:   "{image: my-jax}",
			wantCount: 2,
			wantEnv: []corev1.EnvVar{
				xlaFlags,
				{Name: "JAX_NUM_PROCESSES", Value: "2"},
				processID,
				{Name: "JAX_COORDINATOR_ADDRESS", Value: "alpha-node-0-0.alpha:29500"},
			},
			wantPorts: coordinatorPort,
		},
		{
			name:      "without spec.trainer only the count is set",
			runtime:   jaxRuntime("{numNodes: 2, jax: {}}", "node"),
			wantCount: 2,
			wantEnv:   []corev1.EnvVar{xlaFlags},
		},
		{
			name:      "without a node container only the count is set",
			runtime:   jaxRuntime("{numNodes: 1, jax: {}}", "trainer"),
			trainer:   "{numNodes: 3}",
			container: "trainer",
			wantCount: 3,
			wantEnv:   []corev1.EnvVar{xlaFlags},
		},
		{
			name:      "other runtimes are left alone",
			runtime:   jaxRuntime("{numNodes: 1, torch: {}}", "node"),
			trainer:   "{numNodes: 3}",
			wantCount: 1,
			wantEnv:   []corev1.EnvVar{xlaFlags},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tj := pipelinetest.TrainJobOn(t, "jax-distributed", tc.trainer)
			info := pipelinetest.Info(t, tj, pipelinetest.Runtime(t, tc.runtime))
			if err := (&JAX{}).EnforceMLPolicy(info, tj); err != nil {
				t.Fatalf("EnforceMLPolicy: %v", err)
			}
			ps := info.TrainerPodSet()
			if ps.Count != tc.wantCount {
				t.Errorf("trainer count = %d, want %d", ps.Count, tc.wantCount)
			}
			container := tc.container
			if container == "" {
				container = trainer.Node
			}
			c := ps.Container(container)
			if diff := cmp.Diff(tc.wantEnv, c.Env); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantPorts, c.Ports); diff != "" {
				t.Errorf("ports (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateAcceptsEverything(t *testing.T) {
	tj := pipelinetest.TrainJob(t, `
metadata: {name: alpha}
spec:
  runtimeRef: {name: jax-distributed}
  trainer: {numNodes: 2, env: [{name: JAX_NUM_PROCESSES, value: '7'}]}
`)
	info := pipelinetest.Info(t, tj, pipelinetest.Runtime(t, jaxRuntime("{jax: {}}", "node")))
	warnings, errs := (&JAX{}).Validate(context.Background(), info, nil, tj)
	if warnings != nil || errs != nil {
		t.Errorf("Validate = %v, %v; want nothing", warnings, errs)
	}
}
