package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
)

// TestMakeDevClusterKueue runs what docs/kueue.md shows a user: `make dev-cluster KUEUE=1` (here with the
// operator, OPERATOR=1, and without the real node, which test/realnode covers), the export line it prints, and a
// TrainJob created with `--queue gpu`, which Kueue admits and the operator runs to Complete. Ctrl-C then stops
// everything and removes the kubeconfig.
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
	run(trainjob, "create", "my-job", "--runtime", "torch-distributed", "--queue", "gpu", "--nodes", "2", "--gpus-per-node", "8")
	run(trainjob, "wait", "my-job", "--for=Complete", "--timeout=3m")
	if out := run(filepath.Join(toolsBin, "kubectl"), "get", "workloads.kueue.x-k8s.io", "-n", "default", "-o",
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
