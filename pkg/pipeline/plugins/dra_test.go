package plugins_test

import (
	"context"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/pipelinetest"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/plugins"
)

// claimTemplate is a ResourceClaimTemplate in namespace default asking for
// count devices of class.
func claimTemplate(name, class string, count int64) *resourcev1.ResourceClaimTemplate {
	t := &resourcev1.ResourceClaimTemplate{}
	t.Name, t.Namespace = name, "default"
	t.Spec.Spec.Devices.Requests = []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{
		DeviceClassName: class, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: count,
	}}}
	return t
}

// TestBuildCountsDRAGPUs: GPUs asked for through DRA claims (KEP-2782) count
// as nvidia.com/gpu does, from the claim's ResourceClaimTemplate, when the
// device class's name contains "gpu"; extended resources take priority.
func TestBuildCountsDRAGPUs(t *testing.T) {
	objs := []client.Object{claimTemplate("gpu-8", "gpu.example.com", 8), claimTemplate("nic-8", "nic.example.com", 8)}
	tests := []struct {
		name, mlPolicy, pod, trainJob string
		wantTorch                     string // PET_NPROC_PER_NODE
		wantMPI                       int32  // slots (numProcPerNode)
	}{{
		name:      "claim in the runtime",
		mlPolicy:  `{numNodes: 2, torch: {}}`,
		pod:       `{resourceClaims: [{name: gpu, resourceClaimTemplateName: gpu-8}], containers: [{name: node, image: img, resources: {requests: {cpu: "4"}, claims: [{name: gpu}]}}]}`,
		wantTorch: "auto",
	}, {
		name:     "claim from a runtimePatch",
		mlPolicy: `{numNodes: 2, torch: {}}`,
		pod:      `{containers: [{name: node, image: img, resources: {requests: {cpu: "4"}}}]}`,
		trainJob: `{runtimePatches: [{manager: user, trainingRuntimeSpec: {template: {spec: {replicatedJobs: [{name: node, template: {spec: {template: {spec: {
                    resourceClaims: [{name: gpu, resourceClaimTemplateName: gpu-8}]}}}}}]}}}}]}`,
		wantTorch: "auto",
	}, {
		name:      "a device class that is not a GPU's",
		mlPolicy:  `{numNodes: 2, torch: {}}`,
		pod:       `{resourceClaims: [{name: nic, resourceClaimTemplateName: nic-8}], containers: [{name: node, image: img, resources: {requests: {cpu: "4"}}}]}`,
		wantTorch: "4",
	}, {
		name:      "a template that does not exist",
		mlPolicy:  `{numNodes: 2, torch: {}}`,
		pod:       `{resourceClaims: [{name: gpu, resourceClaimTemplateName: missing}], containers: [{name: node, image: img, resources: {requests: {cpu: "4"}}}]}`,
		wantTorch: "4",
	}, {
		name:     "MPI slots",
		mlPolicy: `{numNodes: 2, mpi: {mpiImplementation: OpenMPI, runLauncherAsNode: false}}`,
		pod:      `{resourceClaims: [{name: gpu, resourceClaimTemplateName: gpu-8}], containers: [{name: node, image: img, resources: {claims: [{name: gpu}]}}]}`,
		wantMPI:  8,
	}, {
		name:     "MPI: extended resources before claims",
		mlPolicy: `{numNodes: 2, mpi: {mpiImplementation: OpenMPI, runLauncherAsNode: false}}`,
		pod:      `{resourceClaims: [{name: gpu, resourceClaimTemplateName: gpu-8}], containers: [{name: node, image: img, resources: {limits: {nvidia.com/gpu: "2"}}}]}`,
		wantMPI:  2,
	}}
	fw, err := plugins.NewFramework(context.Background(), plugins.Config{}, pipeline.OfflineHandle(pipeline.OperatorInfo{}, objs...))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rt := pipelinetest.TrainerRuntime{Name: "dra", MLPolicy: tc.mlPolicy, Pod: tc.pod}.Runtime(t)
			tj := pipelinetest.TrainJob(t, `{metadata: {name: job}, spec: {runtimeRef: {name: dra}, trainer: {}}}`)
			if tc.trainJob != "" {
				tj.Spec.RuntimePatches = pipelinetest.Decode[struct {
					RuntimePatches []trainer.RuntimePatch `json:"runtimePatches"`
				}](t, tc.trainJob).RuntimePatches
			}
			info, err := fw.RuntimeInfo(context.Background(), tj, rt, pipeline.BuildOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantMPI != 0 {
				if got := ptr.Deref(info.RuntimePolicy.MLPolicy.MPI.NumProcPerNode, 0); got != tc.wantMPI {
					t.Errorf("MPI numProcPerNode = %d, want %d", got, tc.wantMPI)
				}
				return
			}
			got := ""
			for _, e := range info.TrainerPodSet().Container("node").Env {
				if e.Name == "PET_NPROC_PER_NODE" {
					got = e.Value
				}
			}
			if got != tc.wantTorch {
				t.Errorf("PET_NPROC_PER_NODE = %q, want %q", got, tc.wantTorch)
			}
		})
	}
}
