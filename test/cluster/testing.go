package cluster

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// StartForTest starts a cluster for a test and stops it when the test ends. The components' logs go to a
// temporary folder (unless opts.LogDir is set) that is removed when the test passes; when it fails, the tail
// of every log is printed and the folder kept. Missing binaries fail the test with a hint to run `make tools`.
func StartForTest(t testing.TB, opts Options) *Cluster {
	t.Helper()
	logDir, own := testLogDir(t, opts.LogDir)
	opts.LogDir = logDir
	begin := time.Now()
	c, err := Start(t.Context(), opts)
	if err != nil {
		t.Fatalf("%v\ncomponent logs kept in %s", err, logDir)
	}
	t.Logf("local cluster (%s profile) started in %v; kubeconfig %s; logs in %s",
		c.Profile, time.Since(begin).Round(time.Millisecond), c.KubeconfigPath, c.LogDir)
	stopWithTest(t, "local cluster", c.Stop, c.DumpLogs, logDir, own)
	return c
}

// StartMultiKueueForTest is StartForTest for StartMultiKueue: each cluster logs to a folder of its own
// (manager/, worker/) in the temporary folder, unless its Options.LogDir is set.
func StartMultiKueueForTest(t testing.TB, opts MultiKueueOptions) *MultiKueue {
	t.Helper()
	logDir, own := testLogDir(t, "")
	for _, o := range []struct {
		opts *Options
		dir  string
	}{{&opts.Manager, "manager"}, {&opts.Worker, "worker"}} {
		if o.opts.LogDir == "" {
			o.opts.LogDir = filepath.Join(logDir, o.dir)
		}
	}
	begin := time.Now()
	m, err := StartMultiKueue(t.Context(), opts)
	if err != nil {
		t.Fatalf("%v\ncomponent logs kept in %s", err, logDir)
	}
	t.Logf("MultiKueue clusters started and connected in %v; kubeconfigs %s (manager), %s (worker); logs in %s",
		time.Since(begin).Round(time.Millisecond), m.Manager.KubeconfigPath, m.Worker.KubeconfigPath, logDir)
	stopWithTest(t, "MultiKueue clusters", m.Stop, m.DumpLogs, logDir, own)
	return m
}

// testLogDir is logDir, or when empty a new temporary folder, which the test then owns.
func testLogDir(t testing.TB, logDir string) (string, bool) {
	t.Helper()
	if logDir != "" {
		return logDir, false
	}
	dir, err := os.MkdirTemp("", "trainjob-cluster-logs-")
	if err != nil {
		t.Fatal(err)
	}
	return dir, true
}

// stopWithTest stops what was started (what names it) when the test ends: on failure it prints the tails of
// the logs and keeps logDir, else it removes logDir if the test owns it.
func stopWithTest(t testing.TB, what string, stop func() error, dumpLogs func(io.Writer, int), logDir string, own bool) {
	t.Cleanup(func() {
		if t.Failed() {
			var tails strings.Builder
			dumpLogs(&tails, 40)
			t.Logf("%s logs (kept in %s):\n%s", what, logDir, tails.String())
		}
		begin := time.Now()
		if err := stop(); err != nil {
			t.Errorf("stop %s: %v", what, err)
		}
		t.Logf("%s stopped in %v", what, time.Since(begin).Round(time.Millisecond))
		if own && !t.Failed() {
			if err := os.RemoveAll(logDir); err != nil {
				t.Error(err)
			}
		}
	})
}

// RequireRealNode skips t on a machine that cannot run the real node at all (not Linux, or not root) and
// fails it on one that could but lacks what `make tools` installs: there a skip would hide a broken setup.
func RequireRealNode(t testing.TB) {
	t.Helper()
	requireMachine(t, RealNodeSupported())
}

// RequireRealContainers is RequireRealNode for tests that only run containerd.
func RequireRealContainers(t testing.TB) {
	t.Helper()
	requireMachine(t, RealContainersSupported())
}

func requireMachine(t testing.TB, unsupported error) {
	t.Helper()
	if unsupported == nil {
		return
	}
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		t.Skipf("this machine cannot run real containers: %v", unsupported)
	}
	t.Fatal(unsupported)
}

// SyncBuffer is a bytes.Buffer that a command and its goroutines write to while a test reads it.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
