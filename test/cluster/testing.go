package cluster

import (
	"bytes"
	"os"
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
	ownLogDir := opts.LogDir == ""
	if ownLogDir {
		dir, err := os.MkdirTemp("", "trainjob-cluster-logs-")
		if err != nil {
			t.Fatal(err)
		}
		opts.LogDir = dir
	}
	begin := time.Now()
	c, err := Start(t.Context(), opts)
	if err != nil {
		t.Fatalf("%v\ncomponent logs kept in %s", err, opts.LogDir)
	}
	t.Logf("local cluster (%s profile) started in %v; kubeconfig %s; logs in %s",
		c.Profile, time.Since(begin).Round(time.Millisecond), c.KubeconfigPath, c.LogDir)
	t.Cleanup(func() {
		if t.Failed() {
			var tails strings.Builder
			c.DumpLogs(&tails, 40)
			t.Logf("local cluster logs (kept in %s):\n%s", c.LogDir, tails.String())
		}
		begin := time.Now()
		if err := c.Stop(); err != nil {
			t.Errorf("stop local cluster: %v", err)
		}
		t.Logf("local cluster stopped in %v", time.Since(begin).Round(time.Millisecond))
		if ownLogDir && !t.Failed() {
			if err := os.RemoveAll(c.LogDir); err != nil {
				t.Error(err)
			}
		}
	})
	return c
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
