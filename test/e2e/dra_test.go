package e2e

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
)

// TestTorchDRA: a torch TrainJob whose trainer pods claim 8 GPUs each through DRA (a runtimePatch's
// resourceClaims, KEP-2782) completes on the simulated GPU nodes: the kube-scheduler allocates each pod's claim
// from its node's ResourceSlice, at most one such pod per node, and the pipeline counts the claimed GPUs as it counts nvidia.com/gpu (torchrun
// starts one process per GPU: PET_NPROC_PER_NODE=auto, where a CPU pod gets its CPU count).
func TestTorchDRA(t *testing.T) {
	t.Parallel()
	useGPUs(t)
	ns := cluster.NewNamespace(t, suite.client, "e2e-", diagnose)
	tmpl := &resourcev1.ResourceClaimTemplate{}
	tmpl.Name, tmpl.Namespace = "gpu-8", ns
	tmpl.Spec.Spec.Devices.Requests = []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{
		DeviceClassName: cluster.DRADeviceClass, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 8,
	}}}
	if err := suite.client.Create(t.Context(), tmpl); err != nil {
		t.Fatal(err)
	}

	pods := podsOf(runToCompletion(t, ns, "torch-dra.yaml", "torch-dra"), "node")
	if len(pods) != 2 {
		t.Fatalf("%d pods of replicated job node, want 2", len(pods))
	}
	nodes := map[string]string{}
	for _, p := range pods {
		if p.Status.Phase != corev1.PodSucceeded {
			t.Errorf("pod %s is %s, want Succeeded", p.Name, p.Status.Phase)
		}
		// A pod whose claim the scheduler did not allocate on its node is never bound to it.
		if !strings.HasPrefix(p.Spec.NodeName, "gpu-node-") || len(p.Status.ResourceClaimStatuses) != 1 {
			t.Errorf("pod %s ran on %q with claims %v, want a GPU node and the claim of template gpu-8", p.Name, p.Spec.NodeName, p.Status.ResourceClaimStatuses)
		}
		if other, ok := nodes[p.Spec.NodeName]; ok {
			t.Errorf("pods %s and %s both ran on %s: 16 GPUs claimed of its 8", other, p.Name, p.Spec.NodeName)
		}
		nodes[p.Spec.NodeName] = p.Name
		c := container(t, &p, "node")
		if _, ok := c.Resources.Limits[cluster.GPUResource]; ok {
			t.Errorf("pod %s asks for %s too: %v", p.Name, cluster.GPUResource, c.Resources.Limits)
		}
		for _, e := range c.Env {
			if e.Name == "PET_NPROC_PER_NODE" && e.Value != "auto" {
				t.Errorf("pod %s: PET_NPROC_PER_NODE = %q, want auto (one process per claimed GPU)", p.Name, e.Value)
			}
		}
	}
}
