package xgboost

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/pipelinetest"
)

// xgboostRuntime has the shape of the shipped xgboost-distributed runtime;
// network and resources are flow mappings.
func xgboostRuntime(t *testing.T, mlPolicy, network, resources string) *pipeline.Runtime {
	t.Helper()
	return pipelinetest.TrainerRuntime{
		Name: "xgboost-distributed", MLPolicy: mlPolicy, Network: network,
		Pod: `{containers: [{name: node, image: ghcr.io/kubeflow/trainer/xgboost-runtime, resources: ` + resources + `}]}`,
	}.Runtime(t)
}

// trainJob is the TrainJob `alpha`; trainerSpec is a flow mapping for
// spec.trainer, or "" for none.
func trainJob(t *testing.T, trainerSpec string) *trainer.TrainJob {
	t.Helper()
	return pipelinetest.TrainJobOn(t, "xgboost-distributed", trainerSpec)
}

func dmlcEnv(trackerURI, numWorker string) []corev1.EnvVar {
	return []corev1.EnvVar{
		{Name: "DMLC_TRACKER_URI", Value: trackerURI},
		{Name: "DMLC_TRACKER_PORT", Value: "29500"},
		{Name: "DMLC_TASK_ID", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
			FieldPath: "metadata.annotations['batch.kubernetes.io/job-completion-index']",
		}}},
		{Name: "DMLC_NUM_WORKER", Value: numWorker},
	}
}

func TestEnforceMLPolicy(t *testing.T) {
	trackerPort := []corev1.ContainerPort{{ContainerPort: 29500}}
	cases := []struct {
		name      string
		mlPolicy  string
		network   string
		resources string
		trainer   string
		wantCount int32
		wantEnv   []corev1.EnvVar
		wantPorts []corev1.ContainerPort
	}{
		{
			name:      "CPU nodes run one worker each",
			mlPolicy:  "{numNodes: 1, xgboost: {}}",
			resources: "{requests: {cpu: 4}}",
			trainer:   "{numNodes: 3}",
			wantCount: 3,
			wantEnv:   dmlcEnv("alpha-node-0-0.alpha", "3"),
			wantPorts: trackerPort,
		},
		{
			name:      "GPU nodes of the TrainJob run one worker per GPU",
			mlPolicy:  "{numNodes: 1, xgboost: {}}",
			trainer:   "{numNodes: 2, resourcesPerNode: {limits: {nvidia.com/gpu: 4}}}",
			wantCount: 2,
			wantEnv:   dmlcEnv("alpha-node-0-0.alpha", "8"),
			wantPorts: trackerPort,
		},
		{
			name:      "runtime GPUs count when the TrainJob sets only CPU",
			mlPolicy:  "{numNodes: 1, xgboost: {}}",
			resources: "{limits: {nvidia.com/gpu: 2}}",
			trainer:   "{numNodes: 3, resourcesPerNode: {requests: {cpu: 8}}}",
			wantCount: 3,
			wantEnv:   dmlcEnv("alpha-node-0-0.alpha", "6"),
			wantPorts: trackerPort,
		},
		{
			name:      "TrainJob GPUs replace the runtime's",
			mlPolicy:  "{numNodes: 1, xgboost: {}}",
			resources: "{limits: {nvidia.com/gpu: 2}}",
			trainer:   "{resourcesPerNode: {limits: {nvidia.com/gpu: 8}}}",
			wantCount: 1,
			wantEnv:   dmlcEnv("alpha-node-0-0.alpha", "8"),
			wantPorts: trackerPort,
		},
		{
			name:      "runtime numNodes when the TrainJob sets none",
			mlPolicy:  "{numNodes: 4, xgboost: {}}",
			trainer:   "{image: my-xgboost}",
			wantCount: 4,
			wantEnv:   dmlcEnv("alpha-node-0-0.alpha", "4"),
			wantPorts: trackerPort,
		},
		{
			name:      "tracker is reached through the JobSet subdomain",
			mlPolicy:  "{numNodes: 2, xgboost: {}}",
			network:   "{subdomain: xgb}",
			trainer:   "{image: my-xgboost}",
			wantCount: 2,
			wantEnv:   dmlcEnv("alpha-node-0-0.xgb", "2"),
			wantPorts: trackerPort,
		},
		{
			name:      "without spec.trainer only the count is set",
			mlPolicy:  "{numNodes: 2, xgboost: {}}",
			wantCount: 2,
		},
		{
			name:      "other runtimes are left alone",
			mlPolicy:  "{numNodes: 2}",
			trainer:   "{numNodes: 5}",
			wantCount: 2,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tj := trainJob(t, tc.trainer)
			info := pipelinetest.Info(t, tj, xgboostRuntime(t, tc.mlPolicy, orEmpty(tc.network), orEmpty(tc.resources)))
			if err := (&XGBoost{}).EnforceMLPolicy(info, tj); err != nil {
				t.Fatalf("EnforceMLPolicy: %v", err)
			}
			ps := info.TrainerPodSet()
			if ps.Count != tc.wantCount {
				t.Errorf("trainer count = %d, want %d", ps.Count, tc.wantCount)
			}
			c := ps.Container(trainer.Node)
			if diff := cmp.Diff(tc.wantEnv, c.Env); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantPorts, c.Ports); diff != "" {
				t.Errorf("ports (-want +got):\n%s", diff)
			}
		})
	}
}

func orEmpty(flow string) string {
	if flow == "" {
		return "{}"
	}
	return flow
}

func TestValidate(t *testing.T) {
	envPath := field.NewPath("spec", "trainer", "env")
	cases := []struct {
		name     string
		mlPolicy string
		trainer  string
		want     field.ErrorList
	}{
		{
			name:     "each reserved DMLC env is forbidden at its index",
			mlPolicy: "{xgboost: {}}",
			trainer:  "{env: [{name: DMLC_NUM_WORKER, value: '4'}, {name: EPOCHS, value: '3'}, {name: DMLC_TRACKER_URI, value: x}]}",
			want: field.ErrorList{
				field.Forbidden(envPath.Index(0), "DMLC_NUM_WORKER is reserved for the XGBoost runtime"),
				field.Forbidden(envPath.Index(2), "DMLC_TRACKER_URI is reserved for the XGBoost runtime"),
			},
		},
		{
			name:     "every reserved name is caught",
			mlPolicy: "{xgboost: {}}",
			trainer:  "{env: [{name: DMLC_TRACKER_PORT, value: '1'}, {name: DMLC_TASK_ID, value: '0'}]}",
			want: field.ErrorList{
				field.Forbidden(envPath.Index(0), "DMLC_TRACKER_PORT is reserved for the XGBoost runtime"),
				field.Forbidden(envPath.Index(1), "DMLC_TASK_ID is reserved for the XGBoost runtime"),
			},
		},
		{
			name:     "other DMLC settings are allowed",
			mlPolicy: "{xgboost: {}}",
			trainer:  "{env: [{name: DMLC_WORKER_CONNECT_RETRY, value: '5'}]}",
		},
		{
			name:     "TrainJob without trainer is fine",
			mlPolicy: "{xgboost: {}}",
		},
		{
			name:     "other runtimes are not checked",
			mlPolicy: "{torch: {}}",
			trainer:  "{env: [{name: DMLC_NUM_WORKER, value: '4'}]}",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tj := trainJob(t, tc.trainer)
			info := pipelinetest.Info(t, tj, xgboostRuntime(t, tc.mlPolicy, "{}", "{}"))
			warnings, errs := (&XGBoost{}).Validate(context.Background(), info, nil, tj)
			if len(warnings) != 0 {
				t.Errorf("warnings = %v, want none", warnings)
			}
			if diff := cmp.Diff(tc.want, errs); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}
