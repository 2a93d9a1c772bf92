package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
)

func TestFakeNodes(t *testing.T) {
	type node struct {
		Name    string
		GPUs    string
		Product string
		Tainted bool
	}
	summarize := func(nodes []*corev1.Node) []node {
		var out []node
		for _, n := range nodes {
			gpus := n.Status.Allocatable[GPUResource]
			out = append(out, node{Name: n.Name, GPUs: gpus.String(), Product: n.Labels[GPUProductLabel], Tainted: len(n.Spec.Taints) > 0})
		}
		return out
	}
	tests := []struct {
		name string
		opts Options
		want []node
	}{
		{
			name: "defaults: 4 GPU nodes of 8 GPUs, two H100 and two A100, 2 CPU nodes",
			opts: Options{Profile: ProfileFull, GPUNodes: 4, CPUNodes: 2, GPUsPerNode: 8},
			want: []node{
				{"gpu-node-0", "8", GPUProductH100, true}, {"gpu-node-1", "8", GPUProductH100, true},
				{"gpu-node-2", "8", GPUProductA100, true}, {"gpu-node-3", "8", GPUProductA100, true},
				{"cpu-node-0", "0", "", false}, {"cpu-node-1", "0", "", false},
			},
		},
		{
			name: "negative counts mean none; one GPU node is an H100",
			opts: Options{Profile: ProfileFull, GPUNodes: 1, CPUNodes: -1, GPUsPerNode: 4},
			want: []node{{"gpu-node-0", "4", GPUProductH100, true}},
		},
		{
			name: "an odd count: the first half rounded up is H100",
			opts: Options{Profile: ProfileFull, GPUNodes: 3, CPUNodes: -1, GPUsPerNode: 8},
			want: []node{{"gpu-node-0", "8", GPUProductH100, true}, {"gpu-node-1", "8", GPUProductH100, true}, {"gpu-node-2", "8", GPUProductA100, true}},
		},
		{
			name: "with the real node, the CPU nodes are untainted: the real node is the tainted one",
			opts: Options{Profile: ProfileFull, GPUNodes: 1, CPUNodes: 1, GPUsPerNode: 8, RealNode: true},
			want: []node{{"gpu-node-0", "8", GPUProductH100, true}, {"cpu-node-0", "0", "", false}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, summarize(fakeNodes(tt.opts))); diff != "" {
				t.Errorf("nodes (-want +got):\n%s", diff)
			}
		})
	}
}

// TestGPUNodeLabels: a GPU node carries the labels NVIDIA's GPU feature discovery gives, those of its product.
func TestGPUNodeLabels(t *testing.T) {
	nodes := fakeNodes(Options{Profile: ProfileFull, GPUNodes: 4, CPUNodes: -1, GPUsPerNode: 8})
	want := map[string]string{
		"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB", "nvidia.com/gpu.family": "ampere", "nvidia.com/gpu.memory": "81920",
		"nvidia.com/gpu.count": "8", "nvidia.com/gpu.compute.major": "8", "nvidia.com/gpu.compute.minor": "0",
		"nvidia.com/cuda.driver.major": "550", "nvidia.com/cuda.driver.minor": "54", "nvidia.com/cuda.driver.rev": "15",
		"nvidia.com/cuda.runtime.major": "12", "nvidia.com/cuda.runtime.minor": "4",
		"nvidia.com/gpu.sharing-strategy": "none", "nvidia.com/mig.capable": "true", "nvidia.com/gpu.present": "true",
	}
	got := map[string]string{}
	for k, v := range nodes[3].Labels {
		if strings.HasPrefix(k, "nvidia.com/") {
			got[k] = v
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GFD labels of %s (-want +got):\n%s", nodes[3].Name, diff)
	}
	if got := nodes[0].Labels["nvidia.com/gpu.family"]; got != "hopper" {
		t.Errorf("%s: nvidia.com/gpu.family = %q, want hopper", nodes[0].Name, got)
	}
}

// TestGPUNodeTopology: the GPU nodes of 8 make 2 blocks of 2 racks of 2 hosts, labelled as Kueue's Topology of
// the cluster reads them; CPU nodes are in no rack.
func TestGPUNodeTopology(t *testing.T) {
	var got []string
	for _, n := range fakeNodes(Options{Profile: ProfileFull, GPUNodes: 8, CPUNodes: 1, GPUsPerNode: 8}) {
		got = append(got, n.Name+" "+n.Labels[TopologyBlockLabel]+" "+n.Labels[TopologyRackLabel]+" "+n.Labels[corev1.LabelHostname])
	}
	want := []string{
		"gpu-node-0 block-0 rack-0 gpu-node-0", "gpu-node-1 block-0 rack-0 gpu-node-1",
		"gpu-node-2 block-0 rack-1 gpu-node-2", "gpu-node-3 block-0 rack-1 gpu-node-3",
		"gpu-node-4 block-1 rack-2 gpu-node-4", "gpu-node-5 block-1 rack-2 gpu-node-5",
		"gpu-node-6 block-1 rack-3 gpu-node-6", "gpu-node-7 block-1 rack-3 gpu-node-7",
		"cpu-node-0   cpu-node-0",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("node, block, rack, host (-want +got):\n%s", diff)
	}
}

// TestGPUNodeResourceSlice: each simulated GPU node publishes its GPUs through DRA as NVIDIA's driver does, one
// ResourceSlice of 8 devices under the driver's name, each with the node's product name, memory and NVLink
// clique (the product and memory those of the node's GFD labels: 81559 and 81920 MiB).
func TestGPUNodeResourceSlice(t *testing.T) {
	type device struct{ Name, Product, Clique, Memory string }
	for i, want := range []struct{ node, product, memory string }{
		{"gpu-node-0", "NVIDIA-H100-80GB-HBM3", "81559Mi"},
		{"gpu-node-3", "NVIDIA-A100-SXM4-80GB", "80Gi"},
	} {
		n := []int{0, 3}[i]
		s := draSlice(n, 4, 8)
		if s.Spec.Driver != DRADriver || s.Spec.Pool.Name != want.node || s.Spec.NodeName == nil || *s.Spec.NodeName != want.node {
			t.Errorf("slice %s: driver %s, pool %s, node %v; want %s and %s", s.Name, s.Spec.Driver, s.Spec.Pool.Name, s.Spec.NodeName, DRADriver, want.node)
		}
		var got []device
		for _, d := range s.Spec.Devices {
			mem := d.Capacity["memory"].Value
			got = append(got, device{d.Name, *d.Attributes["productName"].StringValue, *d.Attributes[DRACliqueAttribute].StringValue, mem.String()})
		}
		var wantDevices []device
		for g := range 8 {
			wantDevices = append(wantDevices, device{"gpu-" + strconv.Itoa(g), want.product, DRACliqueOf(n), want.memory})
		}
		if diff := cmp.Diff(wantDevices, got); diff != "" {
			t.Errorf("devices of %s (-want +got):\n%s", want.node, diff)
		}
		if label := fakeNodes(Options{Profile: ProfileFull, GPUNodes: 4, CPUNodes: -1, GPUsPerNode: 8})[n].Labels[GPUProductLabel]; label != want.product {
			t.Errorf("%s: GFD product label %q, its devices' productName %q", want.node, label, want.product)
		}
	}
}

func TestGPUNodeMatchesDocumentedShape(t *testing.T) {
	n := fakeNode("gpu-node-0", 8)
	if got := n.Labels[GPUPresentLabel]; got != "true" {
		t.Errorf("label %s = %q, want true", GPUPresentLabel, got)
	}
	want := []corev1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}}
	if diff := cmp.Diff(want, n.Spec.Taints); diff != "" {
		t.Errorf("taints (-want +got):\n%s", diff)
	}
	if tol := GPUToleration(); !tol.ToleratesTaint(klog.Background(), &n.Spec.Taints[0], false) {
		t.Error("GPUToleration does not tolerate the GPU taint")
	}
	if diff := cmp.Diff(n.Status.Capacity, n.Status.Allocatable); diff != "" {
		t.Errorf("allocatable differs from capacity (-capacity +allocatable):\n%s", diff)
	}
}

func TestJobSetWebhooks(t *testing.T) {
	mutating, validating, err := jobSetWebhooks()
	if err != nil {
		t.Fatal(err)
	}
	type hook struct {
		Config, Name string
		Selector     *metav1.LabelSelector
	}
	var got []hook
	for _, c := range mutating {
		for _, w := range c.Webhooks {
			got = append(got, hook{c.Name, w.Name, w.ObjectSelector})
		}
	}
	for _, c := range validating {
		for _, w := range c.Webhooks {
			got = append(got, hook{c.Name, w.Name, w.ObjectSelector})
		}
	}
	onlyJobSetPods := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "jobset.sigs.k8s.io/jobset-name", Operator: metav1.LabelSelectorOpExists},
	}}
	want := []hook{
		{"jobset-mutating-webhook-configuration", "mjobset.kb.io", nil},
		{"jobset-mutating-webhook-configuration", "mpod.kb.io", onlyJobSetPods},
		{"jobset-validating-webhook-configuration", "vjobset.kb.io", nil},
		{"jobset-validating-webhook-configuration", "vpod.kb.io", onlyJobSetPods},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("webhooks (-want +got):\n%s", diff)
	}
}

func TestAlive(t *testing.T) {
	if !alive(os.Getpid()) {
		t.Error("alive(own pid) = false")
	}
	// A child that has exited but was not waited for is a zombie: dead for our purpose.
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	if err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		return !alive(pid), nil
	}); err != nil {
		t.Errorf("exited child %d still counts as alive", pid)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if alive(pid) {
		t.Errorf("reaped child %d counts as alive", pid)
	}
}

// TestFreePortReserves: a port FreePort hands out is below the ephemeral range and reserved for this
// process; a reservation of a running process is respected, one of a process that is gone is taken over.
func TestFreePortReserves(t *testing.T) {
	// portDir is the process's: give it back, or every later FreePort of this package's tests reserves in a
	// folder deleted with this test (and made again, left behind in the temporary folder).
	saved := portDir
	portDir = t.TempDir()
	t.Cleanup(func() { portDir = saved })
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	ephemeralFirst, ephemeralLast, err := ephemeralPorts()
	if err != nil {
		t.Fatal(err)
	}
	if port >= ephemeralFirst && port <= ephemeralLast {
		t.Errorf("port %d in the ephemeral range %d–%d", port, ephemeralFirst, ephemeralLast)
	}
	if reservePort(port) {
		t.Errorf("port %d reserved twice by one process", port)
	}
	done := exec.Command("true")
	if err := done.Run(); err != nil {
		t.Fatal(err)
	}
	alive := exec.Command("sleep", "60")
	if err := alive.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = alive.Process.Kill(); _ = alive.Wait() })
	for _, tc := range []struct {
		name string
		port int
		pid  int
		want bool
	}{
		{"held by a running process", port + 1, alive.Process.Pid, false},
		{"held by a process that is gone", port + 2, done.Process.Pid, true},
	} {
		p := tc.port
		if err := os.WriteFile(filepath.Join(portDir, strconv.Itoa(p)), []byte(strconv.Itoa(tc.pid)), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := reservePort(p); got != tc.want {
			t.Errorf("%s: reservePort = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestFreePortRange: FreePort's ports lie outside the ephemeral range the kernel says it has, wherever it is.
func TestFreePortRange(t *testing.T) {
	for _, tc := range []struct {
		name, ipLocalPortRange string
		first, last            int
		err                    bool
	}{
		{name: "Linux's default", ipLocalPortRange: "32768\t60999\n", first: 20000, last: 32767},
		{name: "a range that starts low", ipLocalPortRange: "15000 60999", first: 10000, last: 14999},
		{name: "a range that starts too low", ipLocalPortRange: "1024 40000", first: 40001, last: 52768},
		{name: "every port", ipLocalPortRange: "1024 65535", err: true},
		{name: "not a range", ipLocalPortRange: "32768", err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ipLocalPortRange = filepath.Join(t.TempDir(), "ip_local_port_range")
			t.Cleanup(func() { ipLocalPortRange = "/proc/sys/net/ipv4/ip_local_port_range" })
			if err := os.WriteFile(ipLocalPortRange, []byte(tc.ipLocalPortRange), 0o644); err != nil {
				t.Fatal(err)
			}
			first, last, err := freePortRange()
			if (err != nil) != tc.err || first != tc.first || last != tc.last {
				t.Errorf("freePortRange() = %d, %d, %v; want %d, %d, error %v", first, last, err, tc.first, tc.last, tc.err)
			}
		})
	}
}

// TestProcessRestarts: a component that exits on its own is started again, as the kubelet restarts a static
// pod's container, until restartLimit restarts; then exited says so. One that is stopped is not started again.
func TestProcessRestarts(t *testing.T) {
	backoff := restartBackoff
	restartBackoff = 10 * time.Millisecond
	t.Cleanup(func() { restartBackoff = backoff })
	dir := t.TempDir()
	c := &Cluster{LogDir: dir}

	// Each start of the component appends a line to starts, then runs until killed.
	starts := filepath.Join(dir, "starts")
	p, err := c.startProcess("sleeper", "/bin/sh", []string{"-c", "echo started >> " + starts + "; exec sleep 600"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.stop() })
	waitStarts := func(want int) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			data, _ := os.ReadFile(starts)
			return strings.Count(string(data), "started") == want, nil
		}); err != nil {
			data, _ := os.ReadFile(starts)
			t.Fatalf("starts of the component: %q, want %d", data, want)
		}
	}
	waitStarts(1)
	for i := 1; i <= restartLimit; i++ {
		if err := c.KillComponent(t.Context(), "sleeper"); err != nil {
			t.Fatal(err)
		}
		waitStarts(1 + i)
		if err := p.exited(); err != nil {
			t.Fatalf("after %d kills: %v, want the component running again", i, err)
		}
	}
	if err := c.KillComponent(t.Context(), "sleeper"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("killed a %d-th time: still not given up", restartLimit+1)
	}
	if err := p.exited(); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("after %d restarts", restartLimit)) {
		t.Errorf("exited() = %v, want it to name the %d restarts", err, restartLimit)
	}
	log, err := os.ReadFile(filepath.Join(dir, "sleeper.log"))
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("# restart %d of %d", restartLimit, restartLimit); !strings.Contains(string(log), want) {
		t.Errorf("the component's log lacks %q:\n%s", want, log)
	}

	// Stopped, it stays stopped.
	q, err := c.startProcess("stopped", "/bin/sh", []string{"-c", "exec sleep 600"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.stop(); err != nil {
		t.Fatal(err)
	}
	q.mu.Lock()
	restarts := q.restarts
	q.mu.Unlock()
	if restarts != 0 || q.exited() == nil {
		t.Errorf("a stopped component: %d restarts, exited() = %v; want 0 and an error", restarts, q.exited())
	}
}
