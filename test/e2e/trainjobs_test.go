package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/stage"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
)

// TestTorchDistributedGPU: 4 nodes × 8 GPUs on the shipped torch-distributed runtime complete, one pod on
// each GPU node, with torchrun's PET_* environment.
func TestTorchDistributedGPU(t *testing.T) {
	t.Parallel()
	useGPUs(t)
	pods := runToCompletion(t, cluster.NewNamespace(t, suite.client, "e2e-", diagnose), "torch-gpu.yaml", "torch-gpu")
	nodes := podsOf(pods, "node")
	if len(nodes) != 4 {
		t.Fatalf("%d pods of replicated job node, want 4", len(nodes))
	}
	gpuNodes := map[string]bool{}
	for i := range 4 {
		gpuNodes[cluster.GPUNodeName(i)] = true
	}
	landed := map[string]string{}
	for _, p := range nodes {
		if p.Status.Phase != corev1.PodSucceeded {
			t.Errorf("pod %s is %s, want Succeeded", p.Name, p.Status.Phase)
		}
		if !gpuNodes[p.Spec.NodeName] {
			t.Errorf("pod %s ran on %q, not on a GPU node", p.Name, p.Spec.NodeName)
		}
		if other, ok := landed[p.Spec.NodeName]; ok {
			t.Errorf("pods %s and %s both ran on %s", other, p.Name, p.Spec.NodeName)
		}
		landed[p.Spec.NodeName] = p.Name

		c := container(t, &p, "node")
		if gpus := c.Resources.Limits["nvidia.com/gpu"]; gpus.Value() != 8 {
			t.Errorf("pod %s: nvidia.com/gpu limit %s, want 8", p.Name, gpus.String())
		}
		env := map[string]corev1.EnvVar{}
		for _, e := range c.Env {
			env[e.Name] = e
		}
		for name, want := range map[string]string{
			"PET_NNODES": "4",
			// With GPUs, torchrun starts one process per GPU itself (upstream's value).
			"PET_NPROC_PER_NODE": "auto",
			"PET_MASTER_ADDR":    "torch-gpu-node-0-0.torch-gpu",
			"PET_MASTER_PORT":    "29500",
		} {
			if got, ok := env[name]; !ok || got.Value != want {
				t.Errorf("pod %s: %s = %q (set: %v), want %q", p.Name, name, got.Value, ok, want)
			}
		}
		if rank, ok := env["PET_NODE_RANK"]; !ok || rank.ValueFrom == nil || rank.ValueFrom.FieldRef == nil ||
			rank.ValueFrom.FieldRef.FieldPath != "metadata.annotations['batch.kubernetes.io/job-completion-index']" {
			t.Errorf("pod %s: PET_NODE_RANK = %+v, want the Job's completion index", p.Name, rank)
		}
	}
}

// statusSummary is the part of `kubectl trainjob status -o json` (a TrainJobStatusSummary) the tests read.
type statusSummary struct {
	Kind   string `json:"kind"`
	Stage  string `json:"stage"`
	Reason string `json:"reason"`
	// BlockedByTaint is set when taints alone keep the pods off the nodes.
	BlockedByTaint *struct {
		Pods              int      `json:"pods"`
		Taints            []string `json:"taints"`
		Nodes             []string `json:"nodes"`
		ExtendedResources []string `json:"extendedResources"`
		WayOut            string   `json:"wayOut"`
	} `json:"blockedByTaint"`
	Stages []struct {
		Name     string     `json:"name"`
		Start    *time.Time `json:"start"`
		End      *time.Time `json:"end"`
		Duration string     `json:"duration"`
	} `json:"stages"`
}

// status runs `kubectl trainjob status NAME -o json`.
func status(ctx context.Context, ns, name string) (*statusSummary, error) {
	cmd, stdout, stderr := command(ctx, "status", "-n", ns, name, "-o", "json")
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("kubectl trainjob status -o json: %w: %s", err, stderr)
	}
	s := &statusSummary{}
	if err := json.Unmarshal(stdout.Bytes(), s); err != nil {
		return nil, fmt.Errorf("kubectl trainjob status -o json: %w:\n%s", err, stdout)
	}
	return s, nil
}

// pipelineOrder ranks the stages a TrainJob goes through, in order.
var pipelineOrder = []string{"Pending", "Initializing", "Training", "Complete"}

// inPipelineOrder checks the stages a TrainJob with initializers was seen in, one entry per change: each of
// Initializing, Training and Complete, in that order, and no stage after a later one. The one step back
// that pkg/stage allows is to Pending: when a Job's last pod has succeeded and the Job counts it neither
// ready nor succeeded yet (the Job controller counts it in a second status write), its counts are those of
// a Job whose pods wait for a node. After the initializers, the trainer's Job reads Training even then
// (stage.Begun), so Initializing never comes back after Training.
func inPipelineOrder(seen []string) error {
	var order []string
	for _, s := range seen {
		if (s == "Pending" && len(order) > 0) || (len(order) > 0 && order[len(order)-1] == s) {
			continue
		}
		order = append(order, s)
	}
	for i := 1; i < len(order); i++ {
		if slices.Index(pipelineOrder, order[i]) <= slices.Index(pipelineOrder, order[i-1]) {
			return fmt.Errorf("stage %s seen after %s: %v", order[i], order[i-1], seen)
		}
	}
	for _, want := range pipelineOrder[1:] {
		if !slices.Contains(order, want) {
			return fmt.Errorf("stage %s never seen: %v", want, seen)
		}
	}
	return nil
}

// TestInitializerStages: a torch TrainJob with dataset and model initializers is seen, in every version a
// watch delivers, Initializing, then Training, then Complete (the stages `kubectl trainjob status` shows, of
// pkg/stage), and the summary of `kubectl trainjob status -o json` gives each of those stages a start and an
// end, in order.
func TestInitializerStages(t *testing.T) {
	t.Parallel()
	useGPUs(t)
	ns := cluster.NewNamespace(t, suite.client, "e2e-", diagnose)
	apply(t, ns, testdata("torch-with-initializers.yaml"))
	// Every version of the TrainJob, watched from before its creation: its stages last seconds, and a sample
	// now and then could miss one.
	watcher, err := client.NewWithWatch(suite.cluster.Config, client.Options{Scheme: suite.client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), runTimeout)
	defer cancel()
	w, err := watcher.Watch(ctx, &trainer.TrainJobList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	mustKubectlTrainJob(t, "create", "-n", ns, "-f", testdata("stages.yaml"))

	var seen []string
	for last := ""; last != string(stage.Complete); {
		var e watch.Event
		select {
		case e = <-w.ResultChan():
		case <-ctx.Done():
			t.Fatalf("TrainJob stages: not Complete within %v; seen %v", runTimeout, seen)
		}
		tj, ok := e.Object.(*trainer.TrainJob)
		if !ok || tj.Name != "stages" {
			t.Fatalf("watching TrainJob stages: %s %T, seen %v", e.Type, e.Object, seen)
		}
		if last = string(stage.Of(tj)); len(seen) == 0 || seen[len(seen)-1] != last {
			seen = append(seen, last)
		}
		if last == string(stage.Failed) || last == string(stage.Suspended) {
			t.Fatalf("TrainJob stages is %s: %+v", last, tj.Status.Conditions)
		}
	}
	final, err := status(t.Context(), ns, "stages")
	if err != nil {
		t.Fatal(err)
	}
	if final.Stage != string(stage.Complete) {
		t.Fatalf("kubectl trainjob status -o json says stage %s (%s), want Complete", final.Stage, final.Reason)
	}

	t.Logf("stages seen: %v", seen)
	if err := inPipelineOrder(seen); err != nil {
		t.Error(err)
	}

	var names []string
	for _, sp := range final.Stages {
		names = append(names, sp.Name)
	}
	var prevEnd *time.Time
	prevName := ""
	for _, want := range pipelineOrder[1:] {
		i := slices.Index(names, want)
		if i < 0 {
			t.Errorf("summary stages %v lack %s", names, want)
			continue
		}
		sp := final.Stages[i]
		switch {
		case sp.Start == nil || sp.End == nil:
			t.Errorf("stage %s: start %v, end %v; want both", want, sp.Start, sp.End)
			continue
		case sp.End.Before(*sp.Start):
			t.Errorf("stage %s ends (%v) before it starts (%v)", want, sp.End, sp.Start)
		case prevEnd != nil && sp.Start.Before(*prevEnd):
			t.Errorf("stage %s starts (%v) before %s ends (%v)", want, sp.Start, prevName, prevEnd)
		}
		prevEnd, prevName = sp.End, want
	}
	if i, j := slices.Index(names, "Initializing"), slices.Index(names, "Training"); i > j {
		t.Errorf("summary stages out of order: %v", names)
	}
}

// TestInPipelineOrder: the order check of TestInitializerStages agrees with pkg/stage.
func TestInPipelineOrder(t *testing.T) {
	for _, tc := range []struct {
		seen []string
		ok   bool
	}{
		{[]string{"Pending", "Initializing", "Training", "Complete"}, true},
		{[]string{"Initializing", "Training", "Complete"}, true},
		{[]string{"Pending", "Initializing", "Pending", "Initializing", "Training", "Pending", "Training", "Complete"}, true},
		{[]string{"Pending", "Initializing", "Training", "Initializing", "Complete"}, false},
		{[]string{"Pending", "Training", "Complete"}, false},
		{[]string{"Pending", "Initializing", "Complete"}, false},
		{[]string{"Pending", "Training", "Initializing", "Complete"}, false},
	} {
		if err := inPipelineOrder(tc.seen); (err == nil) != tc.ok {
			t.Errorf("inPipelineOrder(%v) = %v, want ok=%v", tc.seen, err, tc.ok)
		}
	}
}

// TestDeepSpeedMPI: on the shipped deepspeed-distributed runtime (MPI, runLauncherAsNode) the launcher and
// the nodes run with the SSH keys mounted, the launcher with the hostfile, which lists every pod, and the
// TrainJob completes.
func TestDeepSpeedMPI(t *testing.T) {
	t.Parallel()
	useGPUs(t)
	ns := cluster.NewNamespace(t, suite.client, "e2e-", diagnose)
	pods := runToCompletion(t, ns, "deepspeed.yaml", "deepspeed")
	launchers, nodes := podsOf(pods, "launcher"), podsOf(pods, "node")
	if len(launchers) != 1 || len(nodes) != 3 {
		t.Fatalf("%d launcher and %d node pods, want 1 and 3 (the launcher is node 0)", len(launchers), len(nodes))
	}

	var hostfile corev1.ConfigMap
	if err := suite.client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "deepspeed-mpi-hostfile"}, &hostfile); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(hostfile.Data["hostfile"]), "\n")
	hostLine := regexp.MustCompile(`^(\S+) slots=2$`)
	var hosts []string
	for _, l := range lines {
		m := hostLine.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("hostfile line %q, want `<host> slots=2`", l)
			continue
		}
		hosts = append(hosts, m[1])
	}
	if len(hosts) != 4 {
		t.Errorf("hostfile lists %d hosts, want 4:\n%s", len(hosts), hostfile.Data["hostfile"])
	}

	for _, p := range append(launchers, nodes...) {
		if p.Status.StartTime == nil || (p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodRunning) {
			t.Errorf("pod %s did not run: phase %s", p.Name, p.Status.Phase)
		}
		if host := p.Spec.Hostname + "." + p.Spec.Subdomain; !slices.Contains(hosts, host) {
			t.Errorf("pod %s (%s) is not in the hostfile %v", p.Name, host, hosts)
		}
		if !mounts(&p, "node", "mpi-ssh-auth", "/home/mpiuser/.ssh") {
			t.Errorf("pod %s does not mount its SSH keys (volume mpi-ssh-auth) at /home/mpiuser/.ssh", p.Name)
		}
	}
	// resourcesPerNode applies to the job named node only, even when the launcher is node 0 (upstream's
	// rule): only the nodes ask for GPUs.
	for _, p := range nodes {
		if !isGPUNode(p.Spec.NodeName) {
			t.Errorf("pod %s ran on %q, not on a GPU node", p.Name, p.Spec.NodeName)
		}
	}
	launcher := launchers[0]
	if !mounts(&launcher, "node", "mpi-hostfile", "/etc/mpi") {
		t.Errorf("the launcher does not mount the hostfile (volume mpi-hostfile) at /etc/mpi")
	}
	for _, v := range launcher.Spec.Volumes {
		if v.Name == "mpi-hostfile" && (v.ConfigMap == nil || v.ConfigMap.Name != "deepspeed-mpi-hostfile") {
			t.Errorf("volume mpi-hostfile of the launcher is %+v, want ConfigMap deepspeed-mpi-hostfile", v.VolumeSource)
		}
	}
}

// mounts tells whether a container of p mounts volume at path.
func mounts(p *corev1.Pod, containerName, volume, path string) bool {
	for _, c := range p.Spec.Containers {
		if c.Name != containerName {
			continue
		}
		for _, m := range c.VolumeMounts {
			if m.Name == volume && m.MountPath == path {
				return slices.ContainsFunc(p.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == volume })
			}
		}
	}
	return false
}
