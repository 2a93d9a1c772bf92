package fit

import (
	"cmp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
)

// productLabel is the label GPU feature discovery puts on a node: the model of its GPUs.
const productLabel = "nvidia.com/gpu.product"

// NodeGPUs is what a node has of GPUs and who holds them, as fit counts them: its GPU extended resource
// (nvidia.com/gpu), allocatable less what the pods there request, and its DRA devices of a GPU driver (one
// whose name holds "gpu", as a GPU DeviceClass's does), less those allocated to ResourceClaims.
type NodeGPUs struct {
	Node    string `json:"node"`
	Product string `json:"product,omitempty"`
	// Resource is the node's GPU extended resource; Allocatable, Used and Free are counts of it.
	Resource    corev1.ResourceName `json:"resource,omitempty"`
	Allocatable int64               `json:"allocatable"`
	Used        int64               `json:"used"`
	Free        int64               `json:"free"`
	// Devices are the node's DRA GPU devices, DevicesAllocated those allocated to a claim.
	Devices          int `json:"devices"`
	DevicesAllocated int `json:"devicesAllocated"`
	// Holders are who holds the node's GPUs: a TrainJob's pods, or any other pod.
	Holders  []GPUHolder `json:"holders,omitempty"`
	Cordoned bool        `json:"cordoned,omitempty"`
	// Sick says why the node's GPUs are sick (plugin/gpuhealth).
	Sick []string `json:"sick,omitempty"`
}

// GPUHolder is what one TrainJob (or one pod that is no TrainJob's) holds on a node: GPUs of the extended
// resource and DRA devices.
type GPUHolder struct {
	Namespace string `json:"namespace"`
	// TrainJob is the TrainJob whose pods these are (NodePod.TrainJob); Pod the pod when there is none.
	TrainJob string `json:"trainJob,omitempty"`
	Pod      string `json:"pod,omitempty"`
	GPUs     int64  `json:"gpus"`
	Devices  int    `json:"devices"`
}

// GPUs is every node's GPUs and who holds them, by node name, of a Cluster read with Pods (and Claims for the
// DRA devices' holders).
func GPUs(cl *Cluster) []NodeGPUs {
	out := make([]NodeGPUs, 0, len(cl.Nodes))
	at := map[string]int{}
	for _, n := range cl.Nodes {
		g := NodeGPUs{Node: n.Name, Product: n.Labels[productLabel], Resource: pipeline.GPUResourceIn(n.Status.Allocatable),
			Cordoned: n.Spec.Unschedulable}
		g.Allocatable = gpusOf(n.Status.Allocatable)
		g.Used = gpusOf(cl.Used[n.Name])
		g.Free = max(g.Allocatable-g.Used, 0)
		if s := cl.Sick[n.Name]; s != nil {
			g.Sick = s.Signs
		}
		for _, p := range cl.Pods[n.Name] {
			if k := gpusOf(p.Requests); k > 0 {
				holder(&g, p.Namespace, p.TrainJob, p.Name).GPUs += k
			}
		}
		at[n.Name] = len(out)
		out = append(out, g)
	}
	// The DRA devices: each GPU driver's pools, by the node whose slices publish them.
	type pool struct{ driver, pool string }
	nodeOf := map[pool]string{}
	for _, s := range cl.Devices.Slices {
		node := ptr.Deref(s.Spec.NodeName, "")
		i, ok := at[node]
		if !ok || !gpuDriver(s.Spec.Driver) {
			continue
		}
		out[i].Devices += len(s.Spec.Devices)
		nodeOf[pool{s.Spec.Driver, s.Spec.Pool.Name}] = node
	}
	pods := map[string]NodePod{}
	for _, ps := range cl.Pods {
		for _, p := range ps {
			pods[p.Namespace+"/"+p.Name] = p
		}
	}
	for _, c := range cl.Claims {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			i, ok := at[nodeOf[pool{r.Driver, r.Pool}]]
			if !ok || !gpuDriver(r.Driver) {
				continue
			}
			g := &out[i]
			g.DevicesAllocated++
			holder(g, c.Namespace, claimTrainJob(&c, pods), claimPod(&c)).Devices++
		}
	}
	for i := range out {
		slices.SortFunc(out[i].Holders, func(a, b GPUHolder) int {
			return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.TrainJob, b.TrainJob), strings.Compare(a.Pod, b.Pod))
		})
	}
	slices.SortFunc(out, func(a, b NodeGPUs) int { return strings.Compare(a.Node, b.Node) })
	return out
}

// gpusOf is how many GPUs of its GPU resource l holds, as the pipeline counts a TrainJob's.
func gpusOf(l corev1.ResourceList) int64 {
	return pipeline.GPUsPerNode(corev1.ResourceRequirements{Requests: l}, nil)
}

// gpuDriver tells whether a DRA driver's devices are GPUs: its name holds "gpu" (gpu.nvidia.com), as
// pipeline.GPUsPerNode tells a GPU DeviceClass.
func gpuDriver(driver string) bool { return strings.Contains(strings.ToLower(driver), "gpu") }

// holder is g's holder of the TrainJob of namespace, or of pod when there is no TrainJob, added when new.
func holder(g *NodeGPUs, namespace, trainJob, pod string) *GPUHolder {
	if trainJob != "" {
		pod = ""
	}
	i := slices.IndexFunc(g.Holders, func(h GPUHolder) bool { return h.Namespace == namespace && h.TrainJob == trainJob && h.Pod == pod })
	if i < 0 {
		g.Holders = append(g.Holders, GPUHolder{Namespace: namespace, TrainJob: trainJob, Pod: pod})
		i = len(g.Holders) - 1
	}
	return &g.Holders[i]
}

// claimPod is the first pod a claim is reserved for, or the claim's own name when none is.
func claimPod(c *resourcev1.ResourceClaim) string {
	for _, r := range c.Status.ReservedFor {
		if r.Resource == "pods" {
			return r.Name
		}
	}
	return "claim " + c.Name
}

// claimTrainJob is the TrainJob of the pod a claim is reserved for, among pods, or "".
func claimTrainJob(c *resourcev1.ResourceClaim, pods map[string]NodePod) string {
	return pods[c.Namespace+"/"+claimPod(c)].TrainJob
}
