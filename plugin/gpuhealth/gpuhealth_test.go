package gpuhealth

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	resourcev1beta2 "k8s.io/api/resource/v1beta2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestOf(t *testing.T) {
	gpuNode := func(mutate func(*corev1.Node)) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-node-1"}}
		n.Spec.Taints = []corev1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		if mutate != nil {
			mutate(n)
		}
		return n
	}
	slice := func(node string, devices ...resourcev1.Device) resourcev1.ResourceSlice {
		return resourcev1.ResourceSlice{Spec: resourcev1.ResourceSliceSpec{
			Driver: "gpu.example.com", Pool: resourcev1.ResourcePool{Name: node}, NodeName: ptr.To(node), Devices: devices,
		}}
	}
	rule := func(device string) resourcev1beta2.DeviceTaintRule {
		return resourcev1beta2.DeviceTaintRule{Spec: resourcev1beta2.DeviceTaintRuleSpec{
			DeviceSelector: &resourcev1beta2.DeviceTaintSelector{Driver: ptr.To("gpu.example.com"), Device: ptr.To(device)},
			Taint:          resourcev1beta2.DeviceTaint{Key: "gpu.example.com/maintenance", Effect: resourcev1beta2.DeviceTaintEffectNoSchedule},
		}}
	}
	tests := []struct {
		name    string
		node    *corev1.Node
		devices Devices
		want    []string
	}{
		{name: "a healthy GPU node: the GPU operator's taint says it has GPUs, not that they are sick", node: gpuNode(nil)},
		{
			name: "a GPU health condition that is True, with its reason and message",
			node: gpuNode(func(n *corev1.Node) {
				n.Status.Conditions = append(n.Status.Conditions,
					corev1.NodeCondition{Type: "GpuXidError", Status: corev1.ConditionTrue, Reason: "GpuXidErrorIsNotHealthy", Message: "Xid 79: GPU has fallen off the bus"},
					corev1.NodeCondition{Type: "GpuThermalWatch", Status: corev1.ConditionFalse})
			}),
			want: []string{"condition GpuXidError=True (GpuXidErrorIsNotHealthy: Xid 79: GPU has fallen off the bus)"},
		},
		{
			name: "node-problem-detector's upper-case condition",
			node: gpuNode(func(n *corev1.Node) {
				n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: "GPUXidError", Status: corev1.ConditionTrue})
			}),
			want: []string{"condition GPUXidError=True"},
		},
		{
			name: "taints of NVIDIA's fault quarantine",
			node: gpuNode(func(n *corev1.Node) {
				n.Spec.Taints = append(n.Spec.Taints,
					corev1.Taint{Key: "nvidia.com/gpu-error", Value: "fatal", Effect: corev1.TaintEffectNoSchedule},
					corev1.Taint{Key: "AggregatedNodeHealth", Value: "False", Effect: corev1.TaintEffectNoSchedule},
					corev1.Taint{Key: "dedicated", Value: "ml", Effect: corev1.TaintEffectNoSchedule})
			}),
			want: []string{"taint nvidia.com/gpu-error=fatal:NoSchedule", "taint AggregatedNodeHealth=False:NoSchedule"},
		},
		{
			name: "a DRA device taint in the node's ResourceSlice, and one of a DeviceTaintRule; other nodes' slices do not count",
			node: gpuNode(nil),
			devices: Devices{
				Slices: []resourcev1.ResourceSlice{
					slice("gpu-node-1",
						resourcev1.Device{Name: "gpu-0"},
						resourcev1.Device{Name: "gpu-3", Taints: []resourcev1.DeviceTaint{{Key: "gpu.example.com/unhealthy", Value: "ecc", Effect: resourcev1.DeviceTaintEffectNoExecute}}},
						resourcev1.Device{Name: "gpu-5"}),
					slice("gpu-node-2", resourcev1.Device{Name: "gpu-0", Taints: []resourcev1.DeviceTaint{{Key: "gpu.example.com/unhealthy", Effect: resourcev1.DeviceTaintEffectNoExecute}}}),
				},
				Rules: []resourcev1beta2.DeviceTaintRule{rule("gpu-5")},
			},
			want: []string{
				"device gpu-3 of gpu.example.com tainted gpu.example.com/unhealthy=ecc:NoExecute",
				"device gpu-5 of gpu.example.com tainted gpu.example.com/maintenance:NoSchedule",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Of(tt.node, tt.devices)
			var got []string
			if s != nil {
				got = s.Signs
				if s.Node != tt.node.Name {
					t.Errorf("node %q, want %q", s.Node, tt.node.Name)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("signs (-want +got):\n%s", diff)
			}
		})
	}
}
