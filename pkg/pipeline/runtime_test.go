package pipeline_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/pipelinetest"
)

const initializerRuntime = `
kind: ClusterTrainingRuntime
metadata: {name: torch, labels: {from: runtime}}
spec:
  mlPolicy: {numNodes: 3, torch: {}}
  template:
    metadata: {labels: {team: runtime, keep: "yes"}}
    spec:
      replicatedJobs:
      - name: dataset-initializer
        template:
          metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: dataset-initializer}}
          spec: {template: {spec: {containers: [{name: dataset-initializer, image: init}]}}}
      - name: node
        template:
          metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}
          spec:
            parallelism: 7
            template:
              spec:
                containers:
                - name: node
                  image: img
                  resources:
                    requests: {cpu: "1", memory: 2Gi}
                    limits: {nvidia.com/gpu: "8"}
`

func TestNewRuntimeInfo(t *testing.T) {
	tj := pipelinetest.TrainJob(t, `
metadata: {name: job}
spec:
  runtimeRef: {name: torch}
  trainer:
    resourcesPerNode:
      requests: {cpu: "4"}
  runtimePatches:
  - manager: example.com/first
    trainingRuntimeSpec:
      template:
        metadata: {labels: {team: first}}
        spec:
          replicatedJobs:
          - name: node
            template:
              spec:
                template:
                  spec:
                    nodeSelector: {pool: a}
                    serviceAccountName: first
  - manager: example.com/second
    trainingRuntimeSpec:
      template:
        metadata: {labels: {team: second}, annotations: {note: x}}
        spec:
          replicatedJobs:
          - name: node
            template:
              spec:
                template:
                  spec:
                    serviceAccountName: second
`)
	rt := pipelinetest.Runtime(t, initializerRuntime)
	info := pipelinetest.Info(t, tj, rt)

	if diff := cmp.Diff(map[string]string{"team": "second", "keep": "yes"}, info.Labels); diff != "" {
		t.Errorf("labels: later patches must win (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"note": "x"}, info.Annotations); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}
	if got := []string{info.PodSets[0].Name, info.PodSets[1].Name}; got[0] != "dataset-initializer" || got[1] != "node" {
		t.Errorf("pod sets must keep the runtime's order, got %v", got)
	}
	if info.PodSets[0].Count != 1 || info.PodSets[1].Count != 3 {
		t.Errorf("counts = %d, %d; want 1 (parallelism default) and 3 (mlPolicy.numNodes over parallelism)", info.PodSets[0].Count, info.PodSets[1].Count)
	}
	spec := info.TrainerPodSet().Template.Spec
	if spec.ServiceAccountName != "second" || spec.NodeSelector["pool"] != "a" {
		t.Errorf("patches in list order: serviceAccountName=%q nodeSelector=%v", spec.ServiceAccountName, spec.NodeSelector)
	}
	wantRes := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("2Gi")},
		Limits:   corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")},
	}
	if diff := cmp.Diff(wantRes, spec.Containers[0].Resources); diff != "" {
		t.Errorf("resourcesPerNode merged key by key over the runtime's (-want +got):\n%s", diff)
	}
	if got := pipeline.GPUsPerNode(spec.Containers[0].Resources, nil); got != 8 {
		t.Errorf("GPUsPerNode = %d, want 8 from the runtime's limits", got)
	}
	if got := info.TrainerPodSet().SinglePodRequests; got.Cpu().String() != "4" || got.Name("nvidia.com/gpu", resource.DecimalSI).Value() != 8 {
		t.Errorf("SinglePodRequests = %v", got)
	}
	if rt.Spec.Template.Spec.ReplicatedJobs[1].Template.Spec.Template.Spec.ServiceAccountName != "" ||
		rt.Spec.Template.Spec.ReplicatedJobs[1].Template.Spec.Template.Spec.Containers[0].Resources.Requests.Cpu().String() != "1" {
		t.Error("NewRuntimeInfo modified the runtime")
	}
}

func TestNewRuntimeInfoWithoutMLPolicyKeepsParallelism(t *testing.T) {
	rt := pipelinetest.Runtime(t, `
kind: ClusterTrainingRuntime
metadata: {name: plain}
spec:
  template:
    spec:
      replicatedJobs:
      - name: node
        template:
          metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}
          spec: {parallelism: 4, template: {spec: {containers: [{name: node, image: img}]}}}
`)
	info := pipelinetest.Info(t, pipelinetest.TrainJob(t, `{metadata: {name: j}, spec: {runtimeRef: {name: plain}, trainer: {resourcesPerNode: {limits: {cpu: "2"}}}}}`), rt)
	if info.PodSets[0].Count != 4 {
		t.Errorf("count = %d, want parallelism 4", info.PodSets[0].Count)
	}
	if r := info.PodSets[0].Template.Spec.Containers[0].Resources; len(r.Limits) != 0 {
		t.Errorf("resourcesPerNode applied without an ML policy: %v", r)
	}
}
