package fit

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/golden"
)

// The nodes of the local cluster: four GPU nodes of 8 GPUs, tainted as NVIDIA's GPU operator taints them, two
// H100 and two A100, and two CPU nodes.
var (
	gpuTaint = corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}

	h100, a100 = "NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-80GB"
)

func nodes() []corev1.Node {
	return []corev1.Node{
		gpuNode("gpu-node-0", h100), gpuNode("gpu-node-1", h100), gpuNode("gpu-node-2", a100), gpuNode("gpu-node-3", a100),
		cpuNode("cpu-node-0"), cpuNode("cpu-node-1"),
	}
}

func gpuNode(name, product string) corev1.Node {
	n := cpuNode(name)
	n.Labels["nvidia.com/gpu.present"] = "true"
	n.Labels["nvidia.com/gpu.product"] = product
	n.Spec.Taints = []corev1.Taint{gpuTaint}
	n.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("96")
	n.Status.Allocatable[corev1.ResourceMemory] = resource.MustParse("1Ti")
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

// rackLabel places a node in a rack, as the local cluster's GPU nodes are: two nodes a rack.
const rackLabel = "cloud.provider.com/topology-rack"

// racked puts the GPU nodes in racks of two, in order: gpu-node-0 and gpu-node-1 in rack-0, and so on.
func racked(nodes []corev1.Node) []corev1.Node {
	k := 0
	for i := range nodes {
		if nodes[i].Labels["nvidia.com/gpu.present"] == "true" {
			nodes[i].Labels[rackLabel] = fmt.Sprintf("rack-%d", k/2)
			k++
		}
	}
	return nodes
}

// askingFor annotates a pod as asking Kueue for one domain of level.
func askingFor(annotation, level string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Annotations = map[string]string{annotation: level} }
}

func resources(pairs ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i < len(pairs); i += 2 {
		l[corev1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return l
}

// podSet is a pod set of count pods of one container with requests (and the same limits), changed by mutate.
func podSet(name, ancestor string, count int, requests corev1.ResourceList, mutate func(*corev1.Pod)) PodSet {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: name, Resources: corev1.ResourceRequirements{Requests: requests, Limits: requests}}}}}
	if mutate != nil {
		mutate(pod)
	}
	return NewPodSet(name, ancestor, count, count, pod)
}

func trainerPods(count int, requests corev1.ResourceList, mutate func(*corev1.Pod)) PodSet {
	return podSet(trainer.Node, trainer.AncestorTrainer, count, requests, mutate)
}

func selecting(label, value string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{label: value} }
}

var (
	eightGPUs   = resources("nvidia.com/gpu", "8", "cpu", "16", "memory", "64Gi")
	sixteenGPUs = resources("nvidia.com/gpu", "16")
	// busy is what pods already request on gpu-node-0 and gpu-node-2: all their GPUs.
	busy = map[string]corev1.ResourceList{
		"gpu-node-0": resources("nvidia.com/gpu", "8", "cpu", "8", "pods", "1"),
		"gpu-node-2": resources("nvidia.com/gpu", "8", "cpu", "8", "pods", "1"),
	}
)

// TestCompute places pod sets on the local cluster's nodes and checks the verdict, the counts and what is said
// of the pods that do not fit; the text of each case is a golden file (testdata/NAME.golden).
func TestCompute(t *testing.T) {
	cordoned := nodes()
	cordoned[1].Spec.Unschedulable = true
	tests := []struct {
		name     string
		sets     []PodSet
		nodes    []corev1.Node
		used     map[string]corev1.ResourceList
		verdict  Verdict
		now      int
		empty    int
		blockers []Blocker // of the first replicated job
	}{{
		name:    "fits",
		sets:    []PodSet{trainerPods(4, eightGPUs, nil)},
		nodes:   nodes(),
		verdict: Fits, now: 4, empty: 4,
	}, {
		name:    "two-of-four-now",
		sets:    []PodSet{trainerPods(4, eightGPUs, nil)},
		nodes:   nodes(),
		used:    busy,
		verdict: NotNow, now: 2, empty: 4,
		blockers: []Blocker{
			{Reason: ReasonResources, Nodes: []string{"cpu-node-0", "cpu-node-1"}, Message: "cpu-node-0, cpu-node-1 have no nvidia.com/gpu"},
			{Reason: ReasonResources, Nodes: []string{"gpu-node-0", "gpu-node-2"}, Message: "gpu-node-0, gpu-node-2 have 0 of their 8 nvidia.com/gpu free (8 requested by pods already there)"},
			{Reason: ReasonResources, Nodes: []string{"gpu-node-1", "gpu-node-3"}, Message: "gpu-node-1, gpu-node-3 have 0 of their 8 nvidia.com/gpu free (8 taken by this TrainJob)"},
		},
	}, {
		name:    "more-gpus-than-a-node-has",
		sets:    []PodSet{trainerPods(2, sixteenGPUs, nil)},
		nodes:   nodes(),
		verdict: Nowhere, now: 0, empty: 0,
		blockers: []Blocker{
			{Reason: ReasonResources, Nodes: []string{"cpu-node-0", "cpu-node-1"}, Message: "cpu-node-0, cpu-node-1 have no nvidia.com/gpu"},
			{Reason: ReasonResources, Nodes: []string{"gpu-node-0", "gpu-node-1", "gpu-node-2", "gpu-node-3"}, Message: "gpu-node-0, gpu-node-1, gpu-node-2, gpu-node-3 have only 8 nvidia.com/gpu in all"},
		},
	}, {
		name:    "a100-only",
		sets:    []PodSet{trainerPods(4, eightGPUs, selecting("nvidia.com/gpu.product", a100))},
		nodes:   nodes(),
		verdict: Nowhere, now: 2, empty: 2,
		blockers: []Blocker{
			{Reason: ReasonNodeAffinity, Nodes: []string{"cpu-node-0", "cpu-node-1"}, Message: "cpu-node-0, cpu-node-1 lack the label nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB that the trainer selects"},
			{Reason: ReasonNodeAffinity, Nodes: []string{"gpu-node-0", "gpu-node-1"}, Message: "gpu-node-0, gpu-node-1 have nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3, not NVIDIA-A100-SXM4-80GB"},
			{Reason: ReasonResources, Nodes: []string{"gpu-node-2", "gpu-node-3"}, Message: "gpu-node-2, gpu-node-3 have 0 of their 8 nvidia.com/gpu free (8 taken by this TrainJob)"},
		},
	}, {
		name:    "gpu-nodes-without-gpus-tainted",
		sets:    []PodSet{trainerPods(2, resources("cpu", "64"), selecting("nvidia.com/gpu.present", "true"))},
		nodes:   nodes(),
		verdict: Nowhere, now: 0, empty: 0,
		blockers: []Blocker{
			{Reason: ReasonNodeAffinity, Nodes: []string{"cpu-node-0", "cpu-node-1"}, Message: "cpu-node-0, cpu-node-1 lack the label nvidia.com/gpu.present=true that the trainer selects"},
			{Reason: ReasonTaint, Nodes: []string{"gpu-node-0", "gpu-node-1", "gpu-node-2", "gpu-node-3"}, Message: "gpu-node-0, gpu-node-1, gpu-node-2, gpu-node-3 are tainted nvidia.com/gpu=present:NoSchedule, which the trainer does not tolerate"},
		},
	}, {
		name:    "cordoned",
		sets:    []PodSet{trainerPods(4, eightGPUs, nil)},
		nodes:   cordoned,
		verdict: Nowhere, now: 3, empty: 3,
		blockers: []Blocker{
			{Reason: ReasonResources, Nodes: []string{"cpu-node-0", "cpu-node-1"}, Message: "cpu-node-0, cpu-node-1 have no nvidia.com/gpu"},
			{Reason: ReasonResources, Nodes: []string{"gpu-node-0", "gpu-node-2", "gpu-node-3"}, Message: "gpu-node-0, gpu-node-2, gpu-node-3 have 0 of their 8 nvidia.com/gpu free (8 taken by this TrainJob)"},
			{Reason: ReasonCordoned, Nodes: []string{"gpu-node-1"}, Message: "gpu-node-1 is cordoned"},
		},
	}, {
		name: "initializers-and-trainer-together",
		sets: []PodSet{
			podSet(trainer.DatasetInitializerName, trainer.AncestorDatasetInitializer, 1, resources("cpu", "20", "memory", "64Gi"), nil),
			podSet(trainer.ModelInitializerName, trainer.AncestorModelInitializer, 1, resources("cpu", "20", "memory", "64Gi"), nil),
			trainerPods(2, eightGPUs, nil),
		},
		nodes:   nodes(),
		verdict: Fits, now: 4, empty: 4,
	}, {
		name: "several-pods-a-node-and-its-most-pods",
		sets: []PodSet{podSet("workers", "", 5, resources("cpu", "8"), nil)},
		nodes: func() []corev1.Node {
			n := cpuNode("cpu-node-0")
			n.Status.Allocatable[corev1.ResourcePods] = resource.MustParse("3")
			return []corev1.Node{n}
		}(),
		used:    map[string]corev1.ResourceList{"cpu-node-0": resources("cpu", "4", "pods", "1")},
		verdict: Nowhere, now: 2, empty: 3,
		blockers: []Blocker{{Reason: ReasonResources, Nodes: []string{"cpu-node-0"}, Message: "cpu-node-0 has room for no more pods (3 at most)"}},
	}, {
		name:    "one-rack-now",
		sets:    []PodSet{trainerPods(2, eightGPUs, askingFor("kueue.x-k8s.io/podset-required-topology", rackLabel))},
		nodes:   racked(nodes()),
		verdict: Fits, now: 2, empty: 2,
	}, {
		name:    "no-rack-now",
		sets:    []PodSet{trainerPods(2, eightGPUs, askingFor("kueue.x-k8s.io/podset-required-topology", rackLabel))},
		nodes:   racked(nodes()),
		used:    busy,
		verdict: NotNow, now: 2, empty: 2,
	}, {
		name:    "no-rack-now-preferred",
		sets:    []PodSet{trainerPods(2, eightGPUs, askingFor("kueue.x-k8s.io/podset-preferred-topology", rackLabel))},
		nodes:   racked(nodes()),
		used:    busy,
		verdict: Fits, now: 2, empty: 2,
	}, {
		name:    "no-nodes",
		sets:    []PodSet{trainerPods(2, eightGPUs, nil)},
		verdict: Nowhere, now: 0, empty: 0,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := Compute("team", "llama", tt.sets, &Cluster{Nodes: tt.nodes, Used: tt.used})
			if f.Verdict != tt.verdict || f.FitNow != tt.now || f.FitEmpty != tt.empty {
				t.Errorf("verdict %s, %d fit now, %d on emptied nodes; want %s, %d, %d", f.Verdict, f.FitNow, f.FitEmpty, tt.verdict, tt.now, tt.empty)
			}
			if diff := cmp.Diff(tt.blockers, f.ReplicatedJobs[0].Blocked); diff != "" {
				t.Errorf("blockers of %s (-want +got):\n%s", f.ReplicatedJobs[0].Name, diff)
			}
			var out bytes.Buffer
			if err := f.WriteText(&out); err != nil {
				t.Fatal(err)
			}
			golden.Assert(t, filepath.Join("testdata", tt.name+".golden"), out.Bytes())
		})
	}
}

// TestExtendedResourceToleration: a pod that requests an extended resource gets the toleration the admission
// plugin gives, once; one that requests only native resources gets none.
func TestExtendedResourceToleration(t *testing.T) {
	gpu := corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	tests := []struct {
		name     string
		requests corev1.ResourceList
		has      []corev1.Toleration
		want     []corev1.Toleration
	}{
		{"GPUs", resources("nvidia.com/gpu", "8", "cpu", "4"), nil, []corev1.Toleration{gpu}},
		{"GPUs, tolerated already", resources("nvidia.com/gpu", "8"), []corev1.Toleration{gpu}, []corev1.Toleration{gpu}},
		{"two extended resources, in order", resources("vendor.example/fpga", "1", "example.com/nic", "2"), nil, []corev1.Toleration{
			{Key: "example.com/nic", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
			{Key: "vendor.example/fpga", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}},
		{"native resources, and kubernetes.io's", resources("cpu", "4", "memory", "1Gi", "hugepages-2Mi", "1Gi", "kubernetes.io/batteries", "1"), nil, nil},
		{"zero GPUs", resources("nvidia.com/gpu", "0"), nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ps := trainerPods(1, tt.requests, func(p *corev1.Pod) { p.Spec.Tolerations = tt.has })
			if diff := cmp.Diff(tt.want, ps.Pod.Spec.Tolerations); diff != "" {
				t.Errorf("tolerations (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCountOf: the verdict's counts read as English.
func TestCountOf(t *testing.T) {
	for _, tt := range []struct {
		k, n int
		want string
	}{
		{4, 4, "all 4 pods fit"}, {0, 2, "none of its 2 pods fits"}, {1, 3, "1 of its 3 pods fits"}, {2, 4, "2 of its 4 pods fit"},
		{1, 1, "its pod fits"}, {0, 1, "its pod does not fit"},
	} {
		if got := countOf(tt.k, tt.n, "fits", "fit"); got != tt.want {
			t.Errorf("countOf(%d, %d) = %q, want %q", tt.k, tt.n, got, tt.want)
		}
	}
}

// TestJobMessage: the sentence of -o json's replicatedJobs[].message names what the pods need, what fits and
// why the rest does not.
func TestJobMessage(t *testing.T) {
	f := Compute("team", "llama", []PodSet{trainerPods(4, eightGPUs, nil)}, &Cluster{Nodes: nodes(), Used: busy})
	want := "the trainer needs 4 pods of 8 nvidia.com/gpu, 16 cpu, 64Gi memory each; 2 fit now, on gpu-node-1, gpu-node-3: " +
		"cpu-node-0, cpu-node-1 have no nvidia.com/gpu; gpu-node-0, gpu-node-2 have 0 of their 8 nvidia.com/gpu free (8 requested by pods already there); " +
		"gpu-node-1, gpu-node-3 have 0 of their 8 nvidia.com/gpu free (8 taken by this TrainJob)"
	if got := f.ReplicatedJobs[0].Message; got != want {
		t.Errorf("message:\n got %s\nwant %s", got, want)
	}
	if !strings.Contains(strings.Join(f.Notes, "\n"), "ExtendedResourceToleration") {
		t.Errorf("no note that the GPU pods are taken to tolerate the GPU taint: %q", f.Notes)
	}
}

// TestFromJobSet: a replicated job makes replicas Jobs of parallelism pods, fewer when completions is less,
// and its pods are named after their step.
func TestFromJobSet(t *testing.T) {
	job := func(name, ancestor string, replicas int32, parallelism, completions *int32) jobsetv1alpha2.ReplicatedJob {
		rj := jobsetv1alpha2.ReplicatedJob{Name: name, Replicas: replicas}
		rj.Template.Labels = map[string]string{trainer.AncestorLabel: ancestor}
		rj.Template.Spec.Parallelism, rj.Template.Spec.Completions = parallelism, completions
		rj.Template.Spec.Template.Spec.Containers = []corev1.Container{{Name: name}}
		return rj
	}
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "llama"}, Spec: jobsetv1alpha2.JobSetSpec{ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{
		job(trainer.DatasetInitializerName, trainer.AncestorDatasetInitializer, 1, nil, nil),
		job(trainer.Launcher, "", 1, ptr.To[int32](1), ptr.To[int32](1)),
		job(trainer.Node, trainer.AncestorTrainer, 2, ptr.To[int32](4), ptr.To[int32](3)),
	}}}
	type got struct {
		Name, Who, Namespace string
		Count, PerJob        int
	}
	var sets []got
	for _, ps := range FromJobSet(js) {
		sets = append(sets, got{ps.Name, ps.Who, ps.Pod.Namespace, ps.Count, ps.PerJob})
	}
	want := []got{
		{trainer.DatasetInitializerName, "the dataset initializer", "team", 1, 1},
		{trainer.Launcher, "the pods of launcher", "team", 1, 1},
		{trainer.Node, "the trainer", "team", 6, 3},
	}
	if diff := cmp.Diff(want, sets); diff != "" {
		t.Errorf("pod sets (-want +got):\n%s", diff)
	}
	p := place(FromJobSet(js)[2:], []corev1.Node{cpuNode("cpu-node-0")}, nil, nil, nil)
	var names []string
	for _, pl := range p.placed[0] {
		names = append(names, pl.Pod)
	}
	if diff := cmp.Diff([]string{"node-0-0", "node-0-1", "node-0-2", "node-1-0", "node-1-1", "node-1-2"}, names); diff != "" {
		t.Errorf("pod names (-want +got):\n%s", diff)
	}
}
