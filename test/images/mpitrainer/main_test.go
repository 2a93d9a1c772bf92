package main

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubectl-trainjob/kubectl-trainjob/test/images/sgd"

	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
)

func TestReadHostfile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "hostfile")
	if err := os.WriteFile(file, []byte("job-node-0-0.job slots=1\n\n# the launcher runs as a node\njob-launcher-0-0.job slots=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hosts, err := readHostfile(file)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(hosts, " "), "job-node-0-0.job job-launcher-0-0.job"; got != want {
		t.Errorf("hosts %q, want %q", got, want)
	}
	if err := os.WriteFile(file, []byte("job-node-0-0.job slots=2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readHostfile(file); err == nil || !strings.Contains(err.Error(), "one rank per host") {
		t.Errorf("two slots: %v, want refused", err)
	}
}

// workersPort is a port of cluster.FreePort that is free on 127.0.0.2 and 127.0.0.3 too, the workers'
// addresses.
func workersPort(t *testing.T) string {
	t.Helper()
	for range 20 {
		port := strconv.Itoa(cluster.FreePortFor(t))
		if freeOn(port, "127.0.0.2", "127.0.0.3") {
			return port
		}
	}
	t.Fatal("no port free on both 127.0.0.2 and 127.0.0.3")
	return ""
}

// freeOn tells whether port can be bound on every address.
func freeOn(port string, addrs ...string) bool {
	for _, addr := range addrs {
		l, err := net.Listen("tcp", net.JoinHostPort(addr, port))
		if err != nil {
			return false
		}
		l.Close()
	}
	return true
}

// The launcher (127.0.0.1, last in the hostfile as with runLauncherAsNode) reaches the two workers by the
// names in the hostfile, and the three ranks train together.
func TestLauncherAndWorkersTrainTogether(t *testing.T) {
	port := workersPort(t)
	hosts := []string{"127.0.0.2", "127.0.0.3", "127.0.0.1"}
	outs, errs := make([]bytes.Buffer, 3), make([]error, 3)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() { errs[i] = work(net.JoinHostPort(hosts[i], port), 30*time.Second, &outs[i]) })
	}
	wg.Go(func() {
		errs[2] = runLauncher(hosts, "127.0.0.1", port, sgd.Options{Steps: 6, Timeout: 30 * time.Second}, &outs[2])
	})
	wg.Wait()
	want := strings.Join(sgd.StepLines(outs[2].String()), "\n")
	for i := range 3 {
		if errs[i] != nil {
			t.Fatalf("rank %d: %v\n%s", i, errs[i], outs[i].String())
		}
		steps := sgd.StepLines(outs[i].String())
		if len(steps) != 6 {
			t.Errorf("rank %d printed %d steps, want 6:\n%s", i, len(steps), outs[i].String())
		}
		if got := strings.Join(steps, "\n"); got != want {
			t.Errorf("rank %d's steps differ from the launcher's:\n%s\n---\n%s", i, got, want)
		}
	}
	if !strings.Contains(outs[0].String(), "worker, rank 0 of 3") || !strings.Contains(outs[2].String(), "launcher, rank 2 of 3") {
		t.Errorf("ranks not as in the hostfile:\n%s\n%s", outs[0].String(), outs[2].String())
	}
}

func TestUnreachableWorkerFailsTheLauncher(t *testing.T) {
	port := workersPort(t)
	err := runLauncher([]string{"127.0.0.2", "127.0.0.1"}, "127.0.0.1", port, sgd.Options{Steps: 1, Timeout: time.Second}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "host 127.0.0.2 (rank 0) at 127.0.0.2:"+port+" unreachable") {
		t.Errorf("got %v, want the worker unreachable", err)
	}
}

func TestWorkerWithoutLauncherFails(t *testing.T) {
	port := workersPort(t)
	err := work("127.0.0.2:"+port, time.Second, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "no launcher reached") {
		t.Errorf("got %v, want no launcher", err)
	}
}
