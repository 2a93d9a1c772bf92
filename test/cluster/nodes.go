package cluster

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The fake GPU nodes look like nodes of a GPU cluster run with NVIDIA's GPU operator.
const (
	// GPUResource is the extended resource GPU nodes offer.
	GPUResource corev1.ResourceName = "nvidia.com/gpu"
	// GPUPresentLabel is set to "true" on GPU nodes.
	GPUPresentLabel = "nvidia.com/gpu.present"
	// GPUTaintKey taints GPU nodes (value "present", effect NoSchedule): only pods that tolerate it land there.
	GPUTaintKey = "nvidia.com/gpu"
	// GPUProductLabel names the GPU model of a GPU node, as NVIDIA's GPU feature discovery (GFD) labels it.
	GPUProductLabel = "nvidia.com/gpu.product"
	// GPUProductH100 is the GPU model of the first half of the fake GPU nodes (gpu-node-0 and gpu-node-1 of
	// four), GPUProductA100 that of the rest: a cluster of two products, as clusters grow.
	GPUProductH100 = "NVIDIA-H100-80GB-HBM3"
	GPUProductA100 = "NVIDIA-A100-SXM4-80GB"

	// TopologyBlockLabel and TopologyRackLabel place a GPU node in the data centre, as a cloud provider labels
	// its nodes for Kueue's topology-aware scheduling (Kueue's documentation spells them so); the host level is
	// the node's kubernetes.io/hostname. GPUNodesPerRack nodes make a rack, RacksPerBlock racks a block: the
	// i-th GPU node is in rack-(i/2) of block-(i/4).
	TopologyBlockLabel = "cloud.provider.com/topology-block"
	TopologyRackLabel  = "cloud.provider.com/topology-rack"
	GPUNodesPerRack    = 2
	RacksPerBlock      = 2

	// kwokNodeAnnotation marks the nodes KWOK manages.
	kwokNodeAnnotation = "kwok.x-k8s.io/node"
)

// GPUNodeName is the name of the i-th GPU node.
func GPUNodeName(i int) string { return fmt.Sprintf("gpu-node-%d", i) }

// CPUNodeName is the name of the i-th CPU-only node.
func CPUNodeName(i int) string { return fmt.Sprintf("cpu-node-%d", i) }

// RackOf and BlockOf are the rack and the block of the i-th GPU node.
func RackOf(i int) string  { return fmt.Sprintf("rack-%d", i/GPUNodesPerRack) }
func BlockOf(i int) string { return fmt.Sprintf("block-%d", i/(GPUNodesPerRack*RacksPerBlock)) }

// TopologyLevels are the node labels of the levels of Kueue's Topology KueueTopology, highest first.
func TopologyLevels() []string {
	return []string{TopologyBlockLabel, TopologyRackLabel, corev1.LabelHostname}
}

// GPUToleration tolerates the taint of the GPU nodes.
func GPUToleration() corev1.Toleration {
	return corev1.Toleration{Key: GPUTaintKey, Operator: corev1.TolerationOpEqual, Value: "present", Effect: corev1.TaintEffectNoSchedule}
}

// gpuModel is what GPU feature discovery says of a node's GPUs, beside their count.
type gpuModel struct {
	product, family   string
	memoryMiB         string
	computeMajorMinor [2]string
}

// gpuModels are the products of the fake GPU nodes, labelled as GFD labels an H100 and an A100 node. The
// driver and CUDA labels are the same on every node: one driver version across a cluster is the rule.
var gpuModels = map[string]gpuModel{
	GPUProductH100: {product: GPUProductH100, family: "hopper", memoryMiB: "81559", computeMajorMinor: [2]string{"9", "0"}},
	GPUProductA100: {product: GPUProductA100, family: "ampere", memoryMiB: "81920", computeMajorMinor: [2]string{"8", "0"}},
}

// GPUProductOf is the GPU model of the i-th of n GPU nodes: the first half (rounded up) H100, the rest A100.
func GPUProductOf(i, n int) string {
	if i < (n+1)/2 {
		return GPUProductH100
	}
	return GPUProductA100
}

// fakeNodes are the nodes the full profile creates for KWOK to run.
func fakeNodes(o Options) []*corev1.Node {
	var nodes []*corev1.Node
	n := max(o.GPUNodes, 0)
	for i := range n {
		node := fakeNode(GPUNodeName(i), o.GPUsPerNode)
		node.Labels[TopologyBlockLabel], node.Labels[TopologyRackLabel] = BlockOf(i), RackOf(i)
		if o.GPUsPerNode > 0 {
			gfdLabels(node, gpuModels[GPUProductOf(i, n)], o.GPUsPerNode)
		}
		nodes = append(nodes, node)
	}
	for i := range max(o.CPUNodes, 0) {
		nodes = append(nodes, fakeNode(CPUNodeName(i), 0))
	}
	return nodes
}

// fakeNode is a node with gpus GPUs (a GPU node: 96 CPUs, 1Ti memory) or none (a CPU node: 32 CPUs, 128Gi).
func fakeNode(name string, gpus int) *corev1.Node {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				corev1.LabelHostname:   name,
				corev1.LabelOSStable:   "linux",
				corev1.LabelArchStable: "amd64",
				"type":                 "kwok",
			},
			Annotations: map[string]string{kwokNodeAnnotation: "fake"},
		},
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("32"),
		corev1.ResourceMemory:           resource.MustParse("128Gi"),
		corev1.ResourceEphemeralStorage: resource.MustParse("1Ti"),
		corev1.ResourcePods:             resource.MustParse("110"),
	}
	if gpus > 0 {
		capacity[corev1.ResourceCPU] = resource.MustParse("96")
		capacity[corev1.ResourceMemory] = resource.MustParse("1Ti")
		capacity[GPUResource] = *resource.NewQuantity(int64(gpus), resource.DecimalSI)
		node.Labels[GPUPresentLabel] = "true"
		node.Spec.Taints = []corev1.Taint{{Key: GPUTaintKey, Value: "present", Effect: corev1.TaintEffectNoSchedule}}
	}
	node.Status.Capacity = capacity
	node.Status.Allocatable = capacity.DeepCopy()
	return node
}

// gfdLabels labels a GPU node as NVIDIA's GPU feature discovery does: product, memory (MiB), family, count,
// compute capability, and the versions of the driver and of CUDA.
func gfdLabels(node *corev1.Node, m gpuModel, gpus int) {
	for k, v := range map[string]string{
		GPUProductLabel:                   m.product,
		"nvidia.com/gpu.family":           m.family,
		"nvidia.com/gpu.memory":           m.memoryMiB,
		"nvidia.com/gpu.count":            strconv.Itoa(gpus),
		"nvidia.com/gpu.compute.major":    m.computeMajorMinor[0],
		"nvidia.com/gpu.compute.minor":    m.computeMajorMinor[1],
		"nvidia.com/cuda.driver.major":    "550",
		"nvidia.com/cuda.driver.minor":    "54",
		"nvidia.com/cuda.driver.rev":      "15",
		"nvidia.com/cuda.runtime.major":   "12",
		"nvidia.com/cuda.runtime.minor":   "4",
		"nvidia.com/gpu.sharing-strategy": "none",
		"nvidia.com/mig.capable":          "true",
	} {
		node.Labels[k] = v
	}
}
