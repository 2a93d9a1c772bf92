package cluster

import corev1 "k8s.io/api/core/v1"

// SimulatedGPUNode is a GPU node of gpus nvidia.com/gpu as the full profile makes them (labels, taint,
// capacity), for a test to create next to them: KWOK runs its pods once it exists. A test that makes its GPUs
// sick (docs/gpus.md) does so on a node of its own, which no other test's pods share.
func SimulatedGPUNode(name string, gpus int) *corev1.Node {
	node := fakeNode(name, gpus)
	gfdLabels(node, gpuModels[GPUProductH100], gpus)
	return node
}
