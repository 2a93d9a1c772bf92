package jobset

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/pipelinetest"
)

// torchDistributed is a one-job runtime with an init container and a sidecar.
const torchDistributed = `
kind: ClusterTrainingRuntime
metadata: {name: torch-distributed}
spec:
  mlPolicy: {numNodes: 1, torch: {}}
  template:
    spec:
      replicatedJobs:
      - name: node
        template:
          metadata:
            labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}
          spec:
            template:
              spec:
                initContainers:
                - {name: preflight, image: preflight:v1}
                containers:
                - {name: node, image: pytorch:v1}
                - {name: sidecar, image: proxy:v1}
`

func TestValidate(t *testing.T) {
	torchRef := trainer.RuntimeRef{Name: "torch-distributed"}
	patchesPath := field.NewPath("spec", "runtimePatches")
	job0 := patchesPath.Index(0).Child("trainingRuntimeSpec", "template", "spec", "replicatedJobs").Index(0)
	pod0 := job0.Child("template", "spec", "template", "spec")
	jobSet := func(active map[string]int32) *jobsetv1alpha2.JobSet {
		js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "alpha", Namespace: "default", OwnerReferences: pipelinetest.ControlledBy("alpha")}}
		for _, name := range []string{trainer.DatasetInitializerName, trainer.Node} {
			js.Status.ReplicatedJobsStatus = append(js.Status.ReplicatedJobsStatus, jobsetv1alpha2.ReplicatedJobStatus{Name: name, Active: active[name]})
		}
		return js
	}
	const (
		patchedSA = `
metadata: {name: alpha}
spec:
  runtimeRef: {name: torch-distributed}
  suspend: %s
  runtimePatches:
  - manager: kueue.k8s.io/manager
    trainingRuntimeSpec:
      template:
        spec:
          replicatedJobs:
          - name: node
            template: {spec: {template: {spec: {serviceAccountName: %s}}}}`
	)
	trainJob := func(suspend, serviceAccount string) string {
		return fmt.Sprintf(patchedSA, suspend, serviceAccount)
	}
	changedWhileRunning := field.ErrorList{field.Forbidden(patchesPath, "RuntimePatches can only be modified when the TrainJob is suspended before or after the update")}

	cases := map[string]struct {
		runtime string
		oldObj  string
		newObj  string
		cluster cluster
		want    field.ErrorList
	}{
		"dataset initializer needs a dataset-initializer job": {
			runtime: torchDistributed,
			newObj:  `{metadata: {name: alpha}, spec: {runtimeRef: {name: torch-distributed}, initializer: {dataset: {storageUri: "hf://a/b"}}}}`,
			want: field.ErrorList{field.Invalid(runtimeRefPath, torchRef,
				"must have dataset-initializer job when trainJob is configured with input datasetConfig")},
		},
		"model initializer needs a model-initializer job": {
			runtime: torchDistributed,
			newObj:  `{metadata: {name: alpha}, spec: {runtimeRef: {name: torch-distributed}, initializer: {model: {}}}}`,
			want: field.ErrorList{field.Invalid(runtimeRefPath, torchRef,
				"must have model-initializer job when trainJob is configured with input modelConfig")},
		},
		"initializer job needs its same-named container, which mounts the initializer volume": {
			runtime: `
kind: ClusterTrainingRuntime
metadata: {name: torch-distributed}
spec:
  template:
    spec:
      replicatedJobs:
      - name: dataset-initializer
        template: {spec: {template: {spec: {containers: [{name: downloader, image: d:v1}]}}}}
      - name: model-initializer
        template: {spec: {template: {spec: {containers: [{name: model-initializer, image: m:v1, volumeMounts: [{name: cache, mountPath: /cache}]}]}}}}`,
			newObj: `{metadata: {name: alpha}, spec: {runtimeRef: {name: torch-distributed}, initializer: {dataset: {}, model: {}}}}`,
			want: field.ErrorList{
				field.Invalid(runtimeRefPath, torchRef, "must have container with name - dataset-initializer in the dataset-initializer job"),
				field.Invalid(runtimeRefPath, torchRef, "must have volumeMount with name - initializer in container model-initializer of the model-initializer job"),
			},
		},
		"runtime with two replicated jobs of one name": {
			runtime: torchDistributed + `
      - name: node
        template: {spec: {template: {spec: {containers: [{name: node, image: pytorch:v1}]}}}}`,
			newObj: `{metadata: {name: alpha}, spec: {runtimeRef: {name: torch-distributed}}}`,
			want: field.ErrorList{field.Invalid(runtimeRefPath, torchRef,
				"must not have replicated job node twice in the runtime job template")},
		},
		"runtime with both initializers accepts both": {
			runtime: torchRuntime,
			newObj:  `{metadata: {name: alpha}, spec: {runtimeRef: {name: torch-with-initializers}, initializer: {dataset: {storageUri: "hf://a/b"}, model: {}}}}`,
		},
		"manager must be a domain-prefixed path": {
			runtime: torchDistributed,
			newObj: `
metadata: {name: alpha}
spec:
  runtimeRef: {name: torch-distributed}
  runtimePatches:
  - manager: kueue.k8s.io/
    trainingRuntimeSpec: {template: {metadata: {labels: {a: b}}}}`,
			want: field.ErrorList{field.Invalid(patchesPath.Index(0).Child("manager"), "kueue.k8s.io/", `must be a domain-prefixed path (such as "acme.io/foo")`)},
		},
		"patches from two managers on one job, with env for a sidecar and an init container, are accepted": {
			runtime: torchDistributed,
			newObj: `
metadata: {name: alpha}
spec:
  runtimeRef: {name: torch-distributed}
  runtimePatches:
  - manager: kueue.k8s.io/manager
    trainingRuntimeSpec:
      template:
        spec:
          replicatedJobs:
          - name: node
            template: {spec: {template: {spec: {nodeSelector: {pool: a100}}}}}
  - manager: example.io/team
    trainingRuntimeSpec:
      template:
        spec:
          replicatedJobs:
          - name: node
            template:
              spec:
                template:
                  spec:
                    serviceAccountName: training-sa
                    initContainers: [{name: preflight, env: [{name: CHECK, value: nccl}]}]
                    containers:
                    - {name: sidecar, env: [{name: PROXY, value: "on"}]}
                    - {name: node, volumeMounts: [{name: data, mountPath: /data}]}`,
		},
		"patch naming a replicated job the runtime lacks is rejected": {
			runtime: torchDistributed,
			newObj: `
metadata: {name: alpha}
spec:
  runtimeRef: {name: torch-distributed}
  runtimePatches:
  - manager: kueue.k8s.io/manager
    trainingRuntimeSpec:
      template:
        spec:
          replicatedJobs:
          - name: invalid
            template: {spec: {template: {spec: {nodeSelector: {pool: a100}}}}}`,
			want: field.ErrorList{field.Invalid(job0.Child("name"), "invalid", "must not have replicated job that doesn't exist in the runtime job template")},
		},
		"patch adding a trainer job is rejected although resourcesPerNode reached it": {
			runtime: `
kind: ClusterTrainingRuntime
metadata: {name: torch-distributed}
spec:
  mlPolicy: {numNodes: 1, torch: {}}
  template:
    spec:
      replicatedJobs:
      - name: worker
        template: {spec: {template: {spec: {containers: [{name: node, image: pytorch:v1}]}}}}`,
			newObj: `
metadata: {name: alpha}
spec:
  runtimeRef: {name: torch-distributed}
  trainer: {resourcesPerNode: {requests: {cpu: "2"}}}
  runtimePatches:
  - manager: example.io/team
    trainingRuntimeSpec:
      template:
        spec:
          replicatedJobs:
          - name: node
            template:
              metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}
              spec: {template: {spec: {containers: [{name: node, volumeMounts: [{name: data, mountPath: /data}]}]}}}`,
			want: field.ErrorList{field.Invalid(job0.Child("name"), "node", "must not have replicated job that doesn't exist in the runtime job template")},
		},
		"patch naming a container or init container the runtime lacks is rejected": {
			runtime: torchDistributed,
			newObj: `
metadata: {name: alpha}
spec:
  runtimeRef: {name: torch-distributed}
  runtimePatches:
  - manager: example.io/team
    trainingRuntimeSpec:
      template:
        spec:
          replicatedJobs:
          - name: node
            template:
              spec:
                template:
                  spec:
                    initContainers: [{name: invalid-init, env: [{name: A, value: b}]}]
                    containers: [{name: invalid, volumeMounts: [{name: data, mountPath: /data}]}]`,
			want: field.ErrorList{
				field.Invalid(pod0.Child("initContainers").Index(0).Child("name"), "invalid-init", "must not have initContainer that doesn't exist in the runtime job node"),
				field.Invalid(pod0.Child("containers").Index(0).Child("name"), "invalid", "must not have container that doesn't exist in the runtime job node"),
			},
		},
		"patch adding the node container is rejected although resourcesPerNode reached it": {
			runtime: `
kind: ClusterTrainingRuntime
metadata: {name: torch-distributed}
spec:
  mlPolicy: {numNodes: 1, torch: {}}
  template:
    spec:
      replicatedJobs:
      - name: trainer
        template:
          metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}
          spec: {template: {spec: {containers: [{name: main, image: pytorch:v1}]}}}`,
			newObj: `
metadata: {name: alpha}
spec:
  runtimeRef: {name: torch-distributed}
  trainer: {resourcesPerNode: {limits: {nvidia.com/gpu: "8"}}}
  runtimePatches:
  - manager: example.io/team
    trainingRuntimeSpec:
      template:
        spec:
          replicatedJobs:
          - name: trainer
            template: {spec: {template: {spec: {containers: [{name: node, volumeMounts: [{name: data, mountPath: /data}]}]}}}}`,
			want: field.ErrorList{field.Invalid(pod0.Child("containers").Index(0).Child("name"), "node", "must not have container that doesn't exist in the runtime job trainer")},
		},
		"env patches are forbidden for the node and initializer containers": {
			runtime: torchRuntime,
			newObj: `
metadata: {name: alpha}
spec:
  runtimeRef: {name: torch-with-initializers}
  runtimePatches:
  - manager: example.io/team
    trainingRuntimeSpec:
      template:
        spec:
          replicatedJobs:
          - name: dataset-initializer
            template: {spec: {template: {spec: {containers: [{name: dataset-initializer, env: [{name: HF_TOKEN, value: x}]}]}}}}
          - name: node
            template: {spec: {template: {spec: {containers: [{name: node, env: [{name: PET_NNODES, value: "9"}]}]}}}}`,
			want: field.ErrorList{
				field.Forbidden(job0.Child("template", "spec", "template", "spec", "containers").Index(0).Child("env"),
					"must not have envs for the dataset-initializer, model-initializer, node containers"),
				field.Forbidden(patchesPath.Index(0).Child("trainingRuntimeSpec", "template", "spec", "replicatedJobs").Index(1).Child("template", "spec", "template", "spec", "containers").Index(0).Child("env"),
					"must not have envs for the dataset-initializer, model-initializer, node containers"),
			},
		},
		"unchanged patches of a running TrainJob are accepted": {
			runtime: torchDistributed,
			oldObj:  trainJob("false", "sa"),
			newObj:  trainJob("false", "sa"),
			cluster: cluster{objs: []client.Object{jobSet(map[string]int32{"node": 2})}},
		},
		"changing the patches of a running TrainJob is forbidden": {
			runtime: torchDistributed,
			oldObj:  trainJob("false", "sa"),
			newObj:  trainJob("false", "other-sa"),
			cluster: cluster{objs: []client.Object{jobSet(nil)}},
			want:    changedWhileRunning,
		},
		"changing the patches of a suspended TrainJob without a JobSet is accepted": {
			runtime: torchDistributed,
			oldObj:  trainJob("true", "sa"),
			newObj:  trainJob("true", "other-sa"),
		},
		"changing the patches and unsuspending in one request is accepted": {
			runtime: torchDistributed,
			oldObj:  trainJob("true", "sa"),
			newObj:  trainJob("false", "other-sa"),
			cluster: cluster{objs: []client.Object{jobSet(nil)}},
		},
		"changing the patches and suspending in one request is accepted when no job is active": {
			runtime: torchDistributed,
			oldObj:  trainJob("false", "sa"),
			newObj:  trainJob("true", "other-sa"),
			cluster: cluster{objs: []client.Object{jobSet(nil)}},
		},
		"changing the patches and suspending in one request is rejected while jobs are active": {
			runtime: torchDistributed,
			oldObj:  trainJob("false", "sa"),
			newObj:  trainJob("true", "other-sa"),
			cluster: cluster{objs: []client.Object{jobSet(map[string]int32{"dataset-initializer": 1, "node": 2})}},
			want: field.ErrorList{
				field.Forbidden(patchesPath, "RuntimePatches cannot be modified when the JobSet's ReplicatedJob dataset-initializer is still active"),
				field.Forbidden(patchesPath, "RuntimePatches cannot be modified when the JobSet's ReplicatedJob node is still active"),
			},
		},
		"JobSet that cannot be read makes a change of patches an internal error": {
			runtime: torchDistributed,
			oldObj:  trainJob("true", "sa"),
			newObj:  trainJob("true", "other-sa"),
			cluster: cluster{getErr: errors.New("connection refused")},
			want:    field.ErrorList{field.InternalError(patchesPath, errors.New("connection refused"))},
		},
		"offline, the patches of a suspended TrainJob may change": {
			runtime: torchDistributed,
			oldObj:  trainJob("true", "sa"),
			newObj:  trainJob("true", "other-sa"),
			cluster: cluster{offline: true},
		},
		"offline, the patches of a running TrainJob may not change": {
			runtime: torchDistributed,
			oldObj:  trainJob("false", "sa"),
			newObj:  trainJob("false", "other-sa"),
			cluster: cluster{offline: true},
			want:    changedWhileRunning,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			newObj := pipelinetest.TrainJob(t, tc.newObj)
			var oldObj *trainer.TrainJob
			if tc.oldObj != "" {
				oldObj = pipelinetest.TrainJob(t, tc.oldObj)
			}
			info := pipelinetest.Info(t, newObj, pipelinetest.Runtime(t, tc.runtime))
			warnings, got := tc.cluster.plugin(t).Validate(context.Background(), info, oldObj, newObj)
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
