package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
)

// TestMakeDevClusterKueue runs what docs/kueue.md shows a user: `make dev-cluster KUEUE=1` (here with the
// operator, OPERATOR=1, and without the real node, which test/realnode covers), the export line it prints, the
// objects for topology-aware placement docs/gpus.md says it sets up (checkTopology), and a TrainJob created with
// `--queue gpu`, which Kueue admits and the operator runs to Complete. Ctrl-C then stops everything and removes
// the kubeconfig.
func TestMakeDevClusterKueue(t *testing.T) {
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	toolsBin := os.Getenv(cluster.ToolsEnv)
	if toolsBin == "" {
		toolsBin = filepath.Join(root, "bin", "tools")
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()

	makeCmd := exec.Command("make", "--no-print-directory", "-C", root, "dev-cluster", "KUEUE=1", "OPERATOR=1",
		"TOOLS_BIN="+toolsBin, "DEV_CLUSTER_DIR="+dir, "DEV_CLUSTER_FLAGS=-real-node=false")
	// Its own process group, as a terminal's foreground job: Ctrl-C reaches make and dev-cluster alike.
	makeCmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stdout, stderr cluster.SyncBuffer
	makeCmd.Stdout, makeCmd.Stderr = &stdout, &stderr
	if err := makeCmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var exitErr error
	go func() { exitErr = makeCmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-makeCmd.Process.Pid, syscall.SIGINT)
		select {
		case <-done:
		case <-time.After(2 * time.Minute):
			_ = syscall.Kill(-makeCmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})

	// The export line comes once the cluster, Kueue and the operator are up.
	kubeconfig := ""
	err = wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(context.Context) (bool, error) {
		select {
		case <-done:
			return false, fmt.Errorf("make dev-cluster ended: %v", exitErr)
		default:
		}
		for line := range strings.Lines(stdout.String()) {
			if k, ok := strings.CutPrefix(strings.TrimSpace(line), "export KUBECONFIG="); ok {
				kubeconfig = k
			}
		}
		return kubeconfig != "", nil
	})
	if err != nil {
		t.Fatalf("no export line from make dev-cluster: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	if want := filepath.Join(dir, "kubeconfig"); kubeconfig != want {
		t.Errorf("export KUBECONFIG=%s, want %s", kubeconfig, want)
	}
	for _, want := range []string{"Kueue: LocalQueue default/gpu", "the operator is ready"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("make dev-cluster did not print %q:\n%s", want, stdout.String())
		}
	}

	run := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", filepath.Base(name), strings.Join(args, " "), err, out.String(), errOut.String())
		}
		return out.String()
	}
	// The binary the operator runs from: $KUBECTL_TRAINJOB_BIN (make test), else the one make dev-cluster built.
	trainjob := os.Getenv("KUBECTL_TRAINJOB_BIN")
	if trainjob == "" {
		trainjob = filepath.Join(root, "bin", "kubectl-trainjob")
	}
	kubectl := filepath.Join(toolsBin, "kubectl")
	checkTopology(t, run, kubectl)

	run(trainjob, "create", "my-job", "--runtime", "torch-distributed", "--queue", "gpu", "--nodes", "2", "--gpus-per-node", "8")
	run(trainjob, "wait", "my-job", "--for=Complete", "--timeout=3m")
	if out := run(kubectl, "get", "workloads.kueue.x-k8s.io", "-n", "default", "-o",
		`jsonpath={range .items[*]}{.metadata.ownerReferences[0].name} {.status.admission.clusterQueue}{"\n"}{end}`); strings.TrimSpace(out) != "my-job gpu-cq" {
		t.Errorf("Kueue's Workloads (owner, ClusterQueue that admitted it) = %q, want \"my-job gpu-cq\"", out)
	}

	if err := syscall.Kill(-makeCmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("make dev-cluster did not stop within 2m of Ctrl-C; stdout:\n%s", stdout.String())
	}
	if !strings.Contains(stdout.String(), "stopping…") {
		t.Errorf("make dev-cluster did not say it was stopping; stdout:\n%s", stdout.String())
	}
	if _, err := os.Stat(kubeconfig); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after Ctrl-C, %s: %v, want it removed", kubeconfig, err)
	}
	if s := stderr.String(); strings.Contains(s, "dev-cluster:") {
		t.Errorf("dev-cluster reported an error on its way out:\n%s", s)
	}
}

// checkTopology checks what docs/gpus.md says `make dev-cluster KUEUE=1` sets up for topology-aware placement:
// the GPU nodes' place (two nodes a rack, two racks a block, the host by its name), the Topology gpu-topology of
// those labels (block, rack, host: the host lowest), the ResourceFlavor gpu-node-tas that names it and selects
// the GPU nodes, the ClusterQueue gpu-tas-cq over it with every GPU of the cluster (4 nodes × 8), Active, and the
// LocalQueue default/gpu-tas that feeds it.
func checkTopology(t *testing.T, run func(string, ...string) string, kubectl string) {
	t.Helper()
	nodes := run(kubectl, "get", "nodes", "-l", "nvidia.com/gpu.present=true", "-o", `jsonpath={range .items[*]}{.metadata.name} `+
		`{.metadata.labels.cloud\.provider\.com/topology-block} {.metadata.labels.cloud\.provider\.com/topology-rack} `+
		`{.metadata.labels.kubernetes\.io/hostname}{"\n"}{end}`)
	if want := "gpu-node-0 block-0 rack-0 gpu-node-0\ngpu-node-1 block-0 rack-0 gpu-node-1\n" +
		"gpu-node-2 block-0 rack-1 gpu-node-2\ngpu-node-3 block-0 rack-1 gpu-node-3\n"; nodes != want {
		t.Errorf("GPU nodes (name, block, rack, hostname):\n%s\nwant:\n%s", nodes, want)
	}

	var list struct {
		Items []struct {
			Kind     string
			Metadata struct{ Name string }
			Spec     struct {
				Levels         []struct{ NodeLabel string }
				TopologyName   string
				NodeLabels     map[string]string
				Tolerations    []corev1.Toleration
				ResourceGroups []struct {
					Flavors []struct {
						Name      string
						Resources []struct{ Name, NominalQuota string }
					}
				}
				ClusterQueue string
			}
			Status struct{ Conditions []metav1.Condition }
		}
	}
	out := run(kubectl, "get", "-n", "default", "-o", "json", "topologies.kueue.x-k8s.io/gpu-topology",
		"resourceflavors.kueue.x-k8s.io/gpu-node-tas", "clusterqueues.kueue.x-k8s.io/gpu-tas-cq", "localqueues.kueue.x-k8s.io/gpu-tas")
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("kubectl get -o json: %v\n%s", err, out)
	}
	var got []string
	for _, o := range list.Items {
		line := o.Kind + " " + o.Metadata.Name + ":"
		for _, l := range o.Spec.Levels {
			line += " level " + l.NodeLabel
		}
		if o.Spec.TopologyName != "" {
			line += " topology " + o.Spec.TopologyName
		}
		for k, v := range o.Spec.NodeLabels {
			line += " node label " + k + "=" + v
		}
		for _, tol := range o.Spec.Tolerations {
			line += fmt.Sprintf(" tolerates %s=%s:%s", tol.Key, tol.Value, tol.Effect)
		}
		for _, g := range o.Spec.ResourceGroups {
			for _, f := range g.Flavors {
				line += " flavor " + f.Name
				for _, r := range f.Resources {
					if r.Name == "nvidia.com/gpu" {
						line += " nvidia.com/gpu " + r.NominalQuota
					}
				}
			}
		}
		if o.Spec.ClusterQueue != "" {
			line += " ClusterQueue " + o.Spec.ClusterQueue
		}
		if c := meta.FindStatusCondition(o.Status.Conditions, "Active"); c != nil {
			line += " Active " + string(c.Status)
		}
		got = append(got, line)
	}
	want := []string{
		"Topology gpu-topology: level cloud.provider.com/topology-block level cloud.provider.com/topology-rack level kubernetes.io/hostname",
		"ResourceFlavor gpu-node-tas: topology gpu-topology node label nvidia.com/gpu.present=true tolerates nvidia.com/gpu=present:NoSchedule",
		"ClusterQueue gpu-tas-cq: flavor gpu-node-tas nvidia.com/gpu 32 Active True",
		"LocalQueue gpu-tas: ClusterQueue gpu-tas-cq Active True",
	}
	if !slices.Equal(got, want) {
		t.Errorf("Kueue's topology objects:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
