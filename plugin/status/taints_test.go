package status

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-trainjob/kubectl-trainjob/test/golden"
)

// The nodes of the local cluster: GPU nodes (96 CPUs, 8 GPUs, tainted as NVIDIA's GPU operator taints them)
// and CPU nodes (32 CPUs).
var (
	gpuTaint = corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}

	gpuNodes = []corev1.Node{gpuNode("gpu-node-0"), gpuNode("gpu-node-1"), gpuNode("gpu-node-2"), gpuNode("gpu-node-3")}
	cpuNodes = []corev1.Node{cpuNode("cpu-node-0"), cpuNode("cpu-node-1")}
	allNodes = append(append([]corev1.Node{}, gpuNodes...), cpuNodes...)
)

func gpuNode(name string) corev1.Node {
	n := cpuNode(name)
	n.Labels["nvidia.com/gpu.present"] = "true"
	n.Spec.Taints = []corev1.Taint{gpuTaint}
	n.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("96")
	n.Status.Allocatable["nvidia.com/gpu"] = resource.MustParse("8")
	return n
}

func cpuNode(name string) corev1.Node {
	return corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourceMemory: resource.MustParse("128Gi"), corev1.ResourcePods: resource.MustParse("110"),
		}},
	}
}

// unschedulablePod is a trainer pod the scheduler found no node for, asking for resources.
func unschedulablePod(name string, requests corev1.ResourceList, mutate func(*corev1.Pod)) corev1.Pod {
	return pod(name, "node", func(p *corev1.Pod) {
		p.Spec.Containers = []corev1.Container{{Name: "node", Resources: corev1.ResourceRequirements{Requests: requests, Limits: requests}}}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
			Message: "0/6 nodes are available: 2 Insufficient nvidia.com/gpu, 4 node(s) had untolerated taint(s)."}}
		if mutate != nil {
			mutate(p)
		}
	})
}

func resources(pairs ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i < len(pairs); i += 2 {
		l[corev1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return l
}

var (
	eightGPUs    = resources("nvidia.com/gpu", "8")
	sixteenGPUs  = resources("nvidia.com/gpu", "16")
	sixtyFourCPU = resources("cpu", "64")
	tolerateGPUs = func(p *corev1.Pod) {
		p.Spec.Tolerations = []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}}
	}
)

func TestTaintBlock(t *testing.T) {
	cases := []struct {
		name  string
		pods  []corev1.Pod
		nodes []corev1.Node
		// want is nil when the pods are not blocked by taints alone.
		want *TaintBlock
	}{{
		name:  "GPU pods on a cluster that does not add the GPU toleration: ExtendedResourceToleration is a way out",
		pods:  []corev1.Pod{unschedulablePod("p0", eightGPUs, nil), unschedulablePod("p1", eightGPUs, nil)},
		nodes: allNodes,
		want: &TaintBlock{Pods: 2, Taints: []string{"nvidia.com/gpu=present:NoSchedule"}, Nodes: []string{"gpu-node-0", "gpu-node-1", "gpu-node-2", "gpu-node-3"},
			ExtendedResources: []string{"nvidia.com/gpu"}},
	}, {
		name:  "CPU pods too big for the CPU nodes, that only the tainted GPU nodes could hold: a toleration is the way out",
		pods:  []corev1.Pod{unschedulablePod("p0", sixtyFourCPU, nil)},
		nodes: allNodes,
		want:  &TaintBlock{Pods: 1, Taints: []string{"nvidia.com/gpu=present:NoSchedule"}, Nodes: []string{"gpu-node-0", "gpu-node-1", "gpu-node-2", "gpu-node-3"}},
	}, {
		name:  "a taint without a value, and one of several that the pod does not tolerate",
		pods:  []corev1.Pod{unschedulablePod("p0", sixtyFourCPU, tolerateGPUs)},
		nodes: withTaint(gpuNodes[:1], corev1.Taint{Key: "dedicated", Effect: corev1.TaintEffectNoExecute}),
		want:  &TaintBlock{Pods: 1, Taints: []string{"dedicated:NoExecute"}, Nodes: []string{"gpu-node-0"}},
	}, {
		name:  "more GPUs than any node has: no taint is to blame",
		pods:  []corev1.Pod{unschedulablePod("p0", sixteenGPUs, nil)},
		nodes: allNodes,
	}, {
		name:  "pods that tolerate the taint and wait for room on the GPU nodes",
		pods:  []corev1.Pod{unschedulablePod("p0", eightGPUs, tolerateGPUs)},
		nodes: allNodes,
	}, {
		name:  "pods that fit a CPU node they tolerate wait for room there, whatever the GPU nodes' taint",
		pods:  []corev1.Pod{unschedulablePod("p0", resources("cpu", "20"), nil)},
		nodes: allNodes,
	}, {
		name: "pods whose node selector excludes the tainted nodes",
		pods: []corev1.Pod{unschedulablePod("p0", sixtyFourCPU, func(p *corev1.Pod) {
			p.Spec.NodeSelector = map[string]string{"node-type": "training"}
		})},
		nodes: allNodes,
	}, {
		name:  "a node that is not ready is not a place to suggest",
		pods:  []corev1.Pod{unschedulablePod("p0", eightGPUs, tolerateGPUs)},
		nodes: withTaint(gpuNodes[:1], corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}),
	}, {
		name: "a cordoned node neither",
		pods: []corev1.Pod{unschedulablePod("p0", eightGPUs, nil)},
		nodes: func() []corev1.Node {
			n := gpuNode("gpu-node-0")
			n.Spec.Unschedulable = true
			return []corev1.Node{n}
		}(),
	}, {
		name:  "one pod blocked by the taint, another by its size: the scheduler's message says more",
		pods:  []corev1.Pod{unschedulablePod("p0", eightGPUs, nil), unschedulablePod("p1", sixteenGPUs, nil)},
		nodes: allNodes,
	}, {
		name: "nodes that could not be read",
		pods: []corev1.Pod{unschedulablePod("p0", eightGPUs, nil)},
	}, {
		name:  "no unschedulable pod",
		pods:  []corev1.Pod{pod("p0", "node", nil)},
		nodes: allNodes,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := taintBlock(trainJob(), tc.pods, tc.nodes)
			if got != nil {
				if got.WayOut == "" {
					t.Errorf("no way out")
				}
				got.WayOut = ""
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("taintBlock (-want +got):\n%s", diff)
			}
		})
	}
}

func withTaint(nodes []corev1.Node, t corev1.Taint) []corev1.Node {
	var out []corev1.Node
	for _, n := range nodes {
		n = *n.DeepCopy()
		n.Spec.Taints = append(n.Spec.Taints, t)
		out = append(out, n)
	}
	return out
}

// TestTaintBlockScreen: the status screen and -o json of a TrainJob whose pods only a taint keeps off the
// nodes say so, name the taint and the way out.
func TestTaintBlockScreen(t *testing.T) {
	active := func() Objects {
		return Objects{TrainJob: withJobs(trainJob(), counts("node", 0, 1, 0)), Nodes: allNodes}
	}
	for _, tc := range []struct {
		name string
		pods []corev1.Pod
	}{
		{"taint-gpu-pods", []corev1.Pod{unschedulablePod("tj-node-0-0-a", eightGPUs, nil), unschedulablePod("tj-node-0-1-b", eightGPUs, nil)}},
		{"taint-cpu-pods", []corev1.Pod{unschedulablePod("tj-node-0-0-a", sixtyFourCPU, nil)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := active()
			in.Pods = tc.pods
			now := created.Add(2 * time.Minute)
			s := Summarize(in, now)
			var out bytes.Buffer
			if err := Render(&out, s, now, false); err != nil {
				t.Fatal(err)
			}
			out.WriteString("--- -o json\n")
			if err := writeJSON(&out, s.BlockedByTaint); err != nil {
				t.Fatal(err)
			}
			golden.Assert(t, filepath.Join("testdata", tc.name+".golden"), out.Bytes())
		})
	}
}
