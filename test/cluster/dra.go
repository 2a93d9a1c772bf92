package cluster

import (
	"context"
	"fmt"
	"strconv"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The simulated GPU nodes also publish their GPUs through Dynamic Resource Allocation (resource.k8s.io/v1), as
// NVIDIA's DRA driver does: one ResourceSlice per node, under the driver's name, with a DeviceClass that selects
// its devices. The real kube-scheduler allocates the claims; KWOK runs the pods, as it does any pod. The same
// GPUs are also the nodes' nvidia.com/gpu capacity: a cluster serves one or the other, a test uses one.
const (
	// DRADriver is the name of the simulated DRA driver, NVIDIA's.
	DRADriver = "gpu.nvidia.com"
	// DRADeviceClass selects every device of DRADriver: the class a ResourceClaimTemplate asks for GPUs of.
	DRADeviceClass = "gpu.nvidia.com"
	// DRACliqueAttribute is the NVLink clique of a GPU: the GPUs of one node share one.
	DRACliqueAttribute = "cliqueId"
)

// DRACliqueOf is the NVLink clique id of the GPUs of the i-th GPU node.
func DRACliqueOf(i int) string { return fmt.Sprintf("kwok-%d", i) }

// NewDRADeviceClass is the DeviceClass DRADeviceClass: every device of the simulated driver.
func NewDRADeviceClass() *resourcev1.DeviceClass {
	return &resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: DRADeviceClass},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{
			CEL: &resourcev1.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q", DRADriver)},
		}}},
	}
}

// NewGPUClaimTemplate is the ResourceClaimTemplate name in namespace ns of gpus devices of DRADeviceClass,
// request gpu: what a pod claims a simulated GPU node's GPUs with (the shipped runtime torch-distributed-dra
// claims them from one named trainer-gpus).
func NewGPUClaimTemplate(ns, name string, gpus int64) *resourcev1.ResourceClaimTemplate {
	tmpl := &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	tmpl.Spec.Spec.Devices.Requests = []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{
		DeviceClassName: DRADeviceClass, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: gpus,
	}}}
	return tmpl
}

// draSlice is the ResourceSlice of the i-th of n GPU nodes: its gpus GPUs, gpu-0.., with the product and
// memory GPU feature discovery labels the node with, and the node's NVLink clique.
func draSlice(i, n, gpus int) *resourcev1.ResourceSlice {
	node := GPUNodeName(i)
	m := gpuModels[GPUProductOf(i, n)]
	memMiB, _ := strconv.ParseInt(m.memoryMiB, 10, 64)
	s := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-" + DRADriver},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:   DRADriver,
			Pool:     resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
			NodeName: ptr.To(node),
		},
	}
	for g := range gpus {
		s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{
			Name: fmt.Sprintf("gpu-%d", g),
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
				"productName":      {StringValue: ptr.To(m.product)},
				"architecture":     {StringValue: ptr.To(m.family)},
				"index":            {IntValue: ptr.To(int64(g))},
				"uuid":             {StringValue: ptr.To(fmt.Sprintf("GPU-%s-%d", node, g))},
				DRACliqueAttribute: {StringValue: ptr.To(DRACliqueOf(i))},
			},
			Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{
				"memory": {Value: *resource.NewQuantity(memMiB<<20, resource.BinarySI)},
			},
		})
	}
	return s
}

// createDRA creates the DeviceClass and each GPU node's ResourceSlice.
func (c *Cluster) createDRA(ctx context.Context) error {
	n := max(c.opts.GPUNodes, 0)
	if n == 0 || c.opts.GPUsPerNode <= 0 {
		return nil
	}
	api := c.client.ResourceV1()
	if _, err := api.DeviceClasses().Create(ctx, NewDRADeviceClass(), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create DeviceClass %s: %w", DRADeviceClass, err)
	}
	for i := range n {
		s := draSlice(i, n, c.opts.GPUsPerNode)
		if _, err := api.ResourceSlices().Create(ctx, s, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create ResourceSlice %s: %w", s.Name, err)
		}
	}
	return nil
}
