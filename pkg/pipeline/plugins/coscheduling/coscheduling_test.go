package coscheduling

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/pipelinetest"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/podgroup/podgrouptest"
)

var gang = podgrouptest.Gang{New: New, AddToScheme: schedv1alpha1.AddToScheme, APIVersion: schedv1alpha1.SchemeGroupVersion.String()}

// gangRuntime is the runtime of spec §6.1: two initializers and 100 nodes,
// every pod requesting 1 CPU and 4Gi.
const gangRuntime = `
kind: ClusterTrainingRuntime
metadata: {name: gang}
spec:
  mlPolicy: {numNodes: 100, torch: {}}
  podGroupPolicy:
    coscheduling: {scheduleTimeoutSeconds: 100}
  template:
    spec:
      replicatedJobs:
      - name: dataset-initializer
        template:
          metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: dataset-initializer}}
          spec: {template: {spec: {containers: [{name: dataset-initializer, image: d:v1, resources: {requests: {cpu: "1", memory: 4Gi}}}]}}}
      - name: model-initializer
        template:
          metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: model-initializer}}
          spec: {template: {spec: {containers: [{name: model-initializer, image: m:v1, resources: {requests: {cpu: "1", memory: 4Gi}}}]}}}
      - name: node
        template:
          metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}
          spec: {template: {spec: {containers: [{name: node, image: pytorch:v1, resources: {requests: {cpu: "1", memory: 4Gi}}}]}}}
`

const plainRuntime = `
kind: ClusterTrainingRuntime
metadata: {name: gang}
spec:
  template:
    spec:
      replicatedJobs:
      - name: node
        template: {spec: {template: {spec: {containers: [{name: node, image: app:v1}]}}}}
`

func TestEnforcePodGroupPolicy(t *testing.T) {
	cases := map[string]struct {
		runtime string
		labels  map[string]string
		want    map[string]string
	}{
		"pods join the TrainJob's PodGroup": {
			runtime: gangRuntime,
			labels:  map[string]string{"team": "ml"},
			want:    map[string]string{"team": "ml", "scheduling.x-k8s.io/pod-group": "alpha"},
		},
		"runtime without coscheduling policy labels nothing": {
			runtime: plainRuntime,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tj := pipelinetest.TrainJob(t, `{metadata: {name: alpha}, spec: {runtimeRef: {name: gang}}}`)
			info := pipelinetest.Info(t, tj, pipelinetest.Runtime(t, tc.runtime))
			info.Scheduler.PodLabels = tc.labels
			if err := gang.Plugin(t, podgrouptest.Cluster{Offline: true}).(*CoScheduling).EnforcePodGroupPolicy(info, tj); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, info.Scheduler.PodLabels); diff != "" {
				t.Errorf("pod labels (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBuild(t *testing.T) {
	const gangPodGroup = `{minMember: 102, minResources: {cpu: "102", memory: 408Gi}, scheduleTimeoutSeconds: 100}`
	podgrouptest.CheckBuild[schedv1alpha1.PodGroup](t, gang, gangRuntime, plainRuntime, gangPodGroup, map[string]podgrouptest.BuildCase{
		"PodGroup gangs every pod, initializers included": {
			Runtime:  gangRuntime,
			TrainJob: podgrouptest.RunningTrainJob,
			Want:     gangPodGroup,
		},
		"counts set by the ML plugins decide the gang": {
			Runtime:  gangRuntime,
			TrainJob: podgrouptest.RunningTrainJob,
			Before: func(info *pipeline.RuntimeInfo) {
				info.TrainerPodSet().Count = 4
			},
			Want: `{minMember: 6, minResources: {cpu: "6", memory: 24Gi}, scheduleTimeoutSeconds: 100}`,
		},
	})
}

func TestReconcilerBuilders(t *testing.T) {
	gang.CheckReconcilerBuilders(t)
}
