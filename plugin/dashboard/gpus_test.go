package dashboard

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/scheme"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/fit"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/kueue/kueuetest"
)

// gpuNode is a node of 8 nvidia.com/gpu.
func gpuNode(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8"), corev1.ResourceCPU: resource.MustParse("96"),
			corev1.ResourceMemory: resource.MustParse("1Ti"), corev1.ResourcePods: resource.MustParse("110")}}}
}

// lineage are TrainJob name of namespace, the JobSet it controls and that JobSet's Job JOBSET-node-0: the
// controller chain of the TrainJob's pods (gpuPod).
func lineage(namespace, name string) []client.Object {
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID("uid-tj-" + name)}}
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID("uid-js-" + name),
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(tj, trainer.GroupVersion.WithKind(trainer.TrainJobKind))}}}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name + "-node-0", UID: types.UID("uid-job-" + name),
		Labels:          map[string]string{jobsetv1alpha2.JobSetNameKey: name},
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(js, jobsetv1alpha2.GroupVersion.WithKind("JobSet"))}}}
	return []client.Object{tj, js, job}
}

// gpuPod is pod name of namespace on node, requesting gpus nvidia.com/gpu, of the TrainJob trainJob's JobSet when
// it is set: it carries the JobSet's label and its controller is the Job lineage makes.
func gpuPod(namespace, name, node, trainJob string, gpus string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{}}, Spec: corev1.PodSpec{NodeName: node,
		Containers: []corev1.Container{{Name: "node", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse(gpus)}}}}}}
	if trainJob != "" {
		p.Labels[jobsetv1alpha2.JobSetNameKey] = trainJob
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: trainJob + "-node-0",
			UID: types.UID("uid-job-" + trainJob), Controller: ptr.To(true)}}
	}
	p.Status.Phase = corev1.PodRunning
	return p
}

// gpuServer is a read-only dashboard of team-a on a cluster of two GPU nodes: on gpu-a TrainJob llama holds 6
// GPUs with two pods (3 and 2), a pod that carries llama's JobSet label but is no Job's 1 and another team's
// pod 2; gpu-b is empty but for a DRA claim of TrainJob dra's pod that holds 2 of its 4 DRA GPU devices. The API server's field selectors (which the fake client does not serve
// but for exact matches) are applied by hand.
func gpuServer(t *testing.T) *Server {
	t.Helper()
	slice := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "gpu-b-gpu.nvidia.com"}, Spec: resourcev1.ResourceSliceSpec{
		Driver: "gpu.nvidia.com", Pool: resourcev1.ResourcePool{Name: "gpu-b", ResourceSliceCount: 1}, NodeName: ptr.To("gpu-b"),
		Devices: []resourcev1.Device{{Name: "gpu-0"}, {Name: "gpu-1"}, {Name: "gpu-2"}, {Name: "gpu-3"}}}}
	claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "dra-node-0-0-gpus"}}
	claim.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
		{Request: "gpus", Driver: "gpu.nvidia.com", Pool: "gpu-b", Device: "gpu-0"}, {Request: "gpus", Driver: "gpu.nvidia.com", Pool: "gpu-b", Device: "gpu-1"}}}}
	claim.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "dra-node-0-0-x", UID: "uid-dra-pod"}}
	draPod := gpuPod("team-a", "dra-node-0-0-x", "gpu-b", "dra", "0")
	draPod.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
	stray := gpuPod("team-a", "llama-node-0-1-stray", "gpu-a", "llama", "1")
	stray.OwnerReferences = nil
	objs := []client.Object{gpuNode("gpu-a"), gpuNode("gpu-b"), slice, claim, torch(), draPod,
		gpuPod("team-a", "llama-node-0-0-x", "gpu-a", "llama", "3"), gpuPod("team-a", "llama-node-0-1-x", "gpu-a", "llama", "2"),
		gpuPod("team-b", "busy", "gpu-a", "", "2"), stray}
	objs = append(append(objs, lineage("team-a", "llama")...), lineage("team-a", "dra")...)
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*corev1.PodList); ok {
				// fit lists the pods bound to a node and not ended: every pod here is.
				opts = slices.DeleteFunc(slices.Clone(opts), func(o client.ListOption) bool { _, ok := o.(client.MatchingFieldsSelector); return ok })
			}
			return c.List(ctx, list, opts...)
		}}).Build()
	s := clusterServer(t, &kueuetest.API{Versions: []string{"v1beta2"}})
	s.Client = c
	return s
}

// TestGPUs: the GPUs view shows every node's GPUs as fit counts them — the extended resource's allocatable,
// used and free, and the DRA devices and those allocated — and who holds them: a TrainJob's pods (summed),
// another pod (one that only carries a TrainJob's JobSet label too), a DRA claim of a TrainJob's pod.
func TestGPUs(t *testing.T) {
	got := getJSON[GPUs](t, gpuServer(t), "/api/gpus")
	want := []fit.NodeGPUs{
		{Node: "gpu-a", Product: "NVIDIA-H100-80GB-HBM3", Resource: "nvidia.com/gpu", Allocatable: 8, Used: 8, Free: 0,
			Holders: []fit.GPUHolder{{Namespace: "team-a", Pod: "llama-node-0-1-stray", GPUs: 1}, {Namespace: "team-a", TrainJob: "llama", GPUs: 5},
				{Namespace: "team-b", Pod: "busy", GPUs: 2}}},
		{Node: "gpu-b", Product: "NVIDIA-H100-80GB-HBM3", Resource: "nvidia.com/gpu", Allocatable: 8, Free: 8, Devices: 4, DevicesAllocated: 2,
			Holders: []fit.GPUHolder{{Namespace: "team-a", TrainJob: "dra", Devices: 2}}},
	}
	if len(got.Nodes) != len(want) {
		t.Fatalf("nodes %+v, want %+v", got.Nodes, want)
	}
	for i := range want {
		g, w := got.Nodes[i], want[i]
		if g.Node != w.Node || g.Product != w.Product || g.Resource != w.Resource || g.Allocatable != w.Allocatable || g.Used != w.Used ||
			g.Free != w.Free || g.Devices != w.Devices || g.DevicesAllocated != w.DevicesAllocated || !slices.Equal(g.Holders, w.Holders) {
			t.Errorf("node %d: %+v, want %+v", i, g, w)
		}
	}
}

// TestFitPasted: a TrainJob pasted on the GPUs view is placed as fit -f places it, on the nodes as they are
// now; it writes nothing, so a read-only dashboard answers it, but only to its own page (its Origin); YAML that
// holds no TrainJob is a 400 that says why.
func TestFitPasted(t *testing.T) {
	s := gpuServer(t)
	const yaml = `apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: pasted
spec:
  runtimeRef:
    name: torch
`
	post := func(body, origin string) *http.Response {
		req := httptest.NewRequest("POST", "/api/fit", strings.NewReader(body))
		req.Host = testHost
		req.AddCookie(&http.Cookie{Name: cookieName, Value: testToken})
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, req)
		return rec.Result()
	}
	resp := post(yaml, "http://"+testHost)
	b := body(t, resp)
	var got FitResult
	if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(b), &got) != nil || got.Fit == nil {
		t.Fatalf("POST /api/fit: %d %s", resp.StatusCode, b)
	}
	// torch: 2 pods of 4 GPUs; gpu-a has none free, gpu-b takes both.
	if got.Fit.Verdict != fit.Fits || len(got.Fit.ReplicatedJobs) != 1 || !slices.Equal(placed(got.Fit.ReplicatedJobs[0]), []string{"gpu-b", "gpu-b"}) {
		t.Errorf("the pasted TrainJob: %s, %+v; want it to fit on gpu-b twice", got.Fit.Message, got.Fit.ReplicatedJobs)
	}
	if resp := post(yaml, ""); resp.StatusCode != http.StatusForbidden {
		t.Errorf("POST /api/fit without an Origin: %d, want 403", resp.StatusCode)
	}
	resp = post("kind: ConfigMap\n", "http://"+testHost)
	if b := body(t, resp); resp.StatusCode != http.StatusBadRequest || !strings.Contains(b, "TrainJob") {
		t.Errorf("POST /api/fit of a ConfigMap: %d %s, want 400 saying it holds no TrainJob", resp.StatusCode, b)
	}
}

func placed(j fit.JobFit) []string {
	var nodes []string
	for _, p := range j.Placements {
		nodes = append(nodes, p.Node)
	}
	return nodes
}
