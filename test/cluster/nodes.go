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
	// GPUProductLabel names the GPU model of a GPU node.
	GPUProductLabel = "nvidia.com/gpu.product"
	// GPUProduct is the GPU model of the fake GPU nodes.
	GPUProduct = "NVIDIA-H100-80GB-HBM3"

	// kwokNodeAnnotation marks the nodes KWOK manages.
	kwokNodeAnnotation = "kwok.x-k8s.io/node"
	// SimulatedTaintKey taints the simulated CPU nodes (value "fake", effect NoSchedule, as KWOK's own examples
	// do) when the cluster has the real node: a pod that asks for no GPU then runs for real unless it tolerates
	// being simulated. The GPU nodes need no such taint: only pods that tolerate GPUTaintKey land there.
	SimulatedTaintKey = kwokNodeAnnotation
)

// GPUNodeName is the name of the i-th GPU node.
func GPUNodeName(i int) string { return fmt.Sprintf("gpu-node-%d", i) }

// CPUNodeName is the name of the i-th CPU-only node.
func CPUNodeName(i int) string { return fmt.Sprintf("cpu-node-%d", i) }

// GPUToleration tolerates the taint of the GPU nodes.
func GPUToleration() corev1.Toleration {
	return corev1.Toleration{Key: GPUTaintKey, Operator: corev1.TolerationOpEqual, Value: "present", Effect: corev1.TaintEffectNoSchedule}
}

// SimulatedToleration tolerates the taint of the simulated CPU nodes.
func SimulatedToleration() corev1.Toleration {
	return corev1.Toleration{Key: SimulatedTaintKey, Operator: corev1.TolerationOpEqual, Value: "fake", Effect: corev1.TaintEffectNoSchedule}
}

// fakeNodes are the nodes the full profile creates for KWOK to run.
func fakeNodes(o Options) []*corev1.Node {
	var nodes []*corev1.Node
	for i := range max(o.GPUNodes, 0) {
		nodes = append(nodes, fakeNode(GPUNodeName(i), o.GPUsPerNode))
	}
	for i := range max(o.CPUNodes, 0) {
		node := fakeNode(CPUNodeName(i), 0)
		if o.RealNode {
			t := SimulatedToleration()
			node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect})
		}
		nodes = append(nodes, node)
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
		node.Labels[GPUProductLabel] = GPUProduct
		node.Labels["nvidia.com/gpu.count"] = strconv.Itoa(gpus)
		node.Spec.Taints = []corev1.Taint{{Key: GPUTaintKey, Value: "present", Effect: corev1.TaintEffectNoSchedule}}
	}
	node.Status.Capacity = capacity
	node.Status.Allocatable = capacity.DeepCopy()
	return node
}
