package volcano

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	volcanov1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/pipelinetest"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/podgroup/podgrouptest"
)

// cluster is what a test case finds in the API server.
type cluster podgrouptest.Cluster

var gang = podgrouptest.Gang{New: New, AddToScheme: volcanov1beta1.AddToScheme, APIVersion: volcanov1beta1.SchemeGroupVersion.String()}

func (c cluster) plugin(t testing.TB) *Volcano {
	t.Helper()
	return gang.Plugin(t, podgrouptest.Cluster(c)).(*Volcano)
}

// gangRuntime has two initializers and 100 nodes, every pod requesting 1
// CPU and 4Gi; the nodes run at a higher priority.
const gangRuntime = `
kind: ClusterTrainingRuntime
metadata: {name: gang}
spec:
  mlPolicy: {numNodes: 100, torch: {}}
  podGroupPolicy:
    volcano:
      networkTopology: {mode: hard, highestTierAllowed: 2}
  template:
    metadata:
      annotations: {scheduling.volcano.sh/queue-name: research}
    spec:
      replicatedJobs:
      - name: dataset-initializer
        template:
          metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: dataset-initializer}}
          spec: {template: {spec: {priorityClassName: low, containers: [{name: dataset-initializer, image: d:v1, resources: {requests: {cpu: "1", memory: 4Gi}}}]}}}
      - name: model-initializer
        template:
          metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: model-initializer}}
          spec: {template: {spec: {containers: [{name: model-initializer, image: m:v1, resources: {requests: {cpu: "1", memory: 4Gi}}}]}}}
      - name: node
        template:
          metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}
          spec: {template: {spec: {priorityClassName: high, containers: [{name: node, image: pytorch:v1, resources: {requests: {cpu: "1", memory: 4Gi}}}]}}}
`

// queuelessRuntime uses Volcano without naming a queue or a priority.
const queuelessRuntime = `
kind: ClusterTrainingRuntime
metadata: {name: gang}
spec:
  podGroupPolicy: {volcano: {}}
  template:
    spec:
      replicatedJobs:
      - name: node
        template: {spec: {template: {spec: {containers: [{name: node, image: app:v1, resources: {requests: {cpu: "2"}}}]}}}}
`

const plainRuntime = `
kind: ClusterTrainingRuntime
metadata: {name: gang}
spec:
  template:
    metadata:
      annotations: {scheduling.volcano.sh/queue-name: ""}
    spec:
      replicatedJobs:
      - name: node
        template: {spec: {template: {spec: {priorityClassName: missing, containers: [{name: node, image: app:v1}]}}}}
`

func TestEnforcePodGroupPolicy(t *testing.T) {
	cases := map[string]struct {
		runtime string
		want    map[string]string
	}{
		"pods join the TrainJob's PodGroup": {
			runtime: gangRuntime,
			want:    map[string]string{"scheduling.k8s.io/group-name": "alpha"},
		},
		"runtime without volcano policy annotates nothing": {
			runtime: plainRuntime,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tj := pipelinetest.TrainJob(t, `{metadata: {name: alpha}, spec: {runtimeRef: {name: gang}}}`)
			info := pipelinetest.Info(t, tj, pipelinetest.Runtime(t, tc.runtime))
			if err := gang.Plugin(t, podgrouptest.Cluster{Offline: true}).(*Volcano).EnforcePodGroupPolicy(info, tj); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, info.Scheduler.PodAnnotations); diff != "" {
				t.Errorf("pod annotations (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBuild(t *testing.T) {
	const gangPodGroup = `{minMember: 102, minResources: {cpu: "102", memory: 408Gi}, queue: research, priorityClassName: high, networkTopology: {mode: hard, highestTierAllowed: 2}}`
	podgrouptest.CheckBuild[volcanov1beta1.PodGroup](t, gang, gangRuntime, plainRuntime, gangPodGroup, map[string]podgrouptest.BuildCase{
		"PodGroup gangs every pod in the runtime's queue, at the last priority class, within the policy's topology": {
			Runtime:  gangRuntime,
			TrainJob: podgrouptest.RunningTrainJob,
			Want:     gangPodGroup,
		},
		"queue named by a runtimePatch wins over the runtime's": {
			Runtime: gangRuntime,
			TrainJob: `
metadata: {name: alpha}
spec:
  runtimeRef: {name: gang}
  runtimePatches:
  - manager: kueue.k8s.io/manager
    trainingRuntimeSpec:
      template:
        metadata:
          annotations: {scheduling.volcano.sh/queue-name: urgent}`,
			Cluster: podgrouptest.Cluster{Offline: true},
			Want:    `{minMember: 102, minResources: {cpu: "102", memory: 408Gi}, queue: urgent, priorityClassName: high, networkTopology: {mode: hard, highestTierAllowed: 2}}`,
		},
		"runtime without queue, priority or topology": {
			Runtime:  queuelessRuntime,
			TrainJob: podgrouptest.RunningTrainJob,
			Want:     `{minMember: 1, minResources: {cpu: "2"}}`,
		},
	})
}

func TestValidate(t *testing.T) {
	high := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000}
	low := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "low"}, Value: 10}
	pcPath := field.NewPath("spec", "templateSpec", "priorityClassName")
	withPriority := func(names ...string) func(*pipeline.RuntimeInfo) {
		return func(info *pipeline.RuntimeInfo) {
			for k, n := range names {
				info.Template.ReplicatedJobs[k].Template.Spec.Template.Spec.PriorityClassName = n
			}
		}
	}
	cases := map[string]struct {
		runtime  string
		trainJob string
		cluster  cluster
		edit     func(*pipeline.RuntimeInfo)
		want     field.ErrorList
	}{
		"queue and priority classes that exist are accepted": {
			runtime: gangRuntime,
			cluster: cluster{Objs: []client.Object{high, low}},
		},
		"empty queue in the runtime is invalid": {
			runtime: queuelessRuntime,
			edit: func(info *pipeline.RuntimeInfo) {
				info.Annotations = map[string]string{volcanov1beta1.QueueNameAnnotationKey: ""}
			},
			want: field.ErrorList{field.Invalid(field.NewPath("spec", "runtimeRef"), "", "Volcano queue name must not be empty")},
		},
		"empty queue in a runtimePatch is invalid there": {
			runtime: gangRuntime,
			trainJob: `
metadata: {name: alpha}
spec:
  runtimeRef: {name: gang}
  runtimePatches:
  - manager: kueue.k8s.io/manager
    trainingRuntimeSpec:
      template:
        metadata:
          annotations: {scheduling.volcano.sh/queue-name: ""}`,
			cluster: cluster{Objs: []client.Object{high, low}},
			want: field.ErrorList{field.Invalid(
				field.NewPath("spec", "runtimePatches").Index(0).Child("trainingRuntimeSpec", "template", "metadata", "annotations").Key("scheduling.volcano.sh/queue-name"),
				"", "Volcano queue name must not be empty")},
		},
		"priority class that does not exist is invalid, once however many jobs use it": {
			runtime: gangRuntime,
			cluster: cluster{Objs: []client.Object{low}},
			edit:    withPriority("low", "high", "high"),
			want: field.ErrorList{field.Invalid(pcPath, "high",
				`PriorityClass "high" doesn't exist: priorityclasses.scheduling.k8s.io "high" not found`)},
		},
		"built-in priority classes need no object": {
			runtime: gangRuntime,
			edit:    withPriority("system-node-critical", "", "system-cluster-critical"),
		},
		"priority class that cannot be read is an internal error": {
			runtime: gangRuntime,
			cluster: cluster{GetErr: errors.New("connection refused")},
			edit:    withPriority("", "", "high"),
			want:    field.ErrorList{field.InternalError(pcPath, errors.New("connection refused"))},
		},
		"offline, priority classes are those of the input files": {
			runtime: gangRuntime,
			cluster: cluster{Offline: true, Objs: []client.Object{low}},
			edit:    withPriority("low", "high", "high"),
			want: field.ErrorList{field.Invalid(pcPath, "high",
				`PriorityClass "high" doesn't exist: priorityclasses.scheduling.k8s.io "high" not found`)},
		},
		"runtime without volcano policy is not checked": {
			runtime: plainRuntime,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			doc := tc.trainJob
			if doc == "" {
				doc = `{metadata: {name: alpha}, spec: {runtimeRef: {name: gang}}}`
			}
			tj := pipelinetest.TrainJob(t, doc)
			info := pipelinetest.Info(t, tj, pipelinetest.Runtime(t, tc.runtime))
			if tc.edit != nil {
				tc.edit(info)
			}
			warnings, got := tc.cluster.plugin(t).Validate(context.Background(), info, nil, tj)
			if len(warnings) != 0 {
				t.Errorf("Validate warnings = %v, want none", warnings)
			}
			// An internal error carries the client's error as its bad value.
			sameMessage := cmp.Comparer(func(a, b error) bool { return a.Error() == b.Error() })
			if diff := cmp.Diff(tc.want, got, sameMessage); diff != "" {
				t.Errorf("Validate (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReconcilerBuilders(t *testing.T) {
	gang.CheckReconcilerBuilders(t)
}
