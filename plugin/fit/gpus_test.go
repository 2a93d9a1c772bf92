package fit

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/gpuhealth"
)

// TestGPUs counts each node's GPUs of a cluster as ReadCluster reads it (what it reads, against a real API
// server, is test/integration/cli.TestFit/dashboard-browser's): the extended resource's allocatable, used and
// free, and the DRA devices of a GPU driver and those allocated; and who holds them: a TrainJob's pods (summed),
// another pod, a claim of a TrainJob's pod. Pure logic: no client.
func TestGPUs(t *testing.T) {
	gpus := func(n string) corev1.ResourceList { return resources("nvidia.com/gpu", n) }
	slice := resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "gpu-node-1-gpu.nvidia.com"}, Spec: resourcev1.ResourceSliceSpec{
		Driver: "gpu.nvidia.com", Pool: resourcev1.ResourcePool{Name: "gpu-node-1", ResourceSliceCount: 1}, NodeName: ptr.To("gpu-node-1"),
		Devices: []resourcev1.Device{{Name: "gpu-0"}, {Name: "gpu-1"}, {Name: "gpu-2"}, {Name: "gpu-3"}}}}
	claim := resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "dra-node-0-0-gpus"}}
	claim.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
		{Request: "gpus", Driver: "gpu.nvidia.com", Pool: "gpu-node-1", Device: "gpu-0"}, {Request: "gpus", Driver: "gpu.nvidia.com", Pool: "gpu-node-1", Device: "gpu-1"}}}}
	claim.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "dra-node-0-0-x", UID: "uid-dra-pod"}}
	cl := &Cluster{Nodes: []corev1.Node{gpuNode("gpu-node-1", h100), gpuNode("gpu-node-0", h100)},
		Used: map[string]corev1.ResourceList{"gpu-node-0": gpus("8")},
		Pods: map[string][]NodePod{
			"gpu-node-0": {{Namespace: "team-a", Name: "llama-node-0-0-x", TrainJob: "llama", Requests: gpus("3")},
				{Namespace: "team-a", Name: "llama-node-0-1-x", TrainJob: "llama", Requests: gpus("2")},
				// It carries llama's JobSet label but is no Job's: ReadCluster credits it to no TrainJob.
				{Namespace: "team-a", Name: "llama-node-0-1-stray", Requests: gpus("1")},
				{Namespace: "team-b", Name: "busy", Requests: gpus("2")}},
			"gpu-node-1": {{Namespace: "team-a", Name: "dra-node-0-0-x", TrainJob: "dra"}},
		},
		Devices: gpuhealth.Devices{Slices: []resourcev1.ResourceSlice{slice}}, Claims: []resourcev1.ResourceClaim{claim}}
	got := GPUs(cl)
	want := []NodeGPUs{
		{Node: "gpu-node-0", Product: h100, Resource: "nvidia.com/gpu", Allocatable: 8, Used: 8, Free: 0,
			Holders: []GPUHolder{{Namespace: "team-a", Pod: "llama-node-0-1-stray", GPUs: 1}, {Namespace: "team-a", TrainJob: "llama", GPUs: 5},
				{Namespace: "team-b", Pod: "busy", GPUs: 2}}},
		{Node: "gpu-node-1", Product: h100, Resource: "nvidia.com/gpu", Allocatable: 8, Free: 8, Devices: 4, DevicesAllocated: 2,
			Holders: []GPUHolder{{Namespace: "team-a", TrainJob: "dra", Devices: 2}}},
	}
	if len(got) != len(want) {
		t.Fatalf("nodes %+v, want %+v", got, want)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Node != w.Node || g.Product != w.Product || g.Resource != w.Resource || g.Allocatable != w.Allocatable || g.Used != w.Used ||
			g.Free != w.Free || g.Devices != w.Devices || g.DevicesAllocated != w.DevicesAllocated || !slices.Equal(g.Holders, w.Holders) {
			t.Errorf("node %d: %+v, want %+v", i, g, w)
		}
	}
}
