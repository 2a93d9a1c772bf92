package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
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

// RealNodeHere tells whether the real node runs on this machine, for a test that runs everything as processes
// where it cannot. As RequireRealNode, it fails t on a machine that could run it but lacks what `make tools`
// installs: there a fall-back to processes would hide a broken setup.
func RealNodeHere(t testing.TB) bool {
	t.Helper()
	unsupported := RealNodeSupported()
	if unsupported != nil && machineCouldRunContainers() {
		t.Fatal(unsupported)
	}
	return unsupported == nil
}

func requireMachine(t testing.TB, unsupported error) {
	t.Helper()
	if unsupported == nil {
		return
	}
	if !machineCouldRunContainers() {
		t.Skipf("this machine cannot run real containers: %v", unsupported)
	}
	t.Fatal(unsupported)
}

// RequireChromium is the path of Debian's chromium, which `make tools` installs for the dashboard's browser
// tests: it skips t where `make tools` cannot install it (not Linux as root with apt-get), and fails t where
// it could but has not.
func RequireChromium(t testing.TB) string {
	t.Helper()
	path, skip, err := Chromium()
	switch {
	case skip != "":
		t.Skip(skip)
	case err != nil:
		t.Fatal(err)
	}
	return path
}

// Chromium is the path of Debian's chromium; or why a test that needs it is skipped here (a machine where `make
// tools` does not install it); or an error when `make tools` should have installed it.
func Chromium() (path, skip string, err error) {
	path, err = exec.LookPath("chromium")
	if err == nil {
		return path, "", nil
	}
	if _, aptErr := exec.LookPath("apt-get"); !machineCouldRunContainers() || aptErr != nil {
		return "", fmt.Sprintf("no chromium, and `make tools` installs it only on Linux as root with apt-get: %v", err), nil
	}
	return "", "", fmt.Errorf("no chromium: run `make tools`, which installs Debian's (%v)", err)
}

// machineCouldRunContainers: Linux, as root; what else real containers need, `make tools` installs.
func machineCouldRunContainers() bool { return runtime.GOOS == "linux" && os.Geteuid() == 0 }

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

// PollInterval is how often Eventually asks.
const PollInterval = 100 * time.Millisecond

// ErrCannotHappen, wrapped in a condition's error, ends Eventually at once: what it waits for can no longer
// happen.
var ErrCannotHappen = errors.New("cannot happen any more")

// Eventually polls cond every PollInterval until it returns nil, and fails t with cond's last error after
// timeout, or at once when that error wraps ErrCannotHappen. It is the one wait of the tests on the local
// cluster: they wait on conditions with deadlines, never sleep.
func Eventually(t testing.TB, what string, timeout time.Duration, cond func(ctx context.Context) error) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(t.Context(), PollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		err := cond(ctx)
		if last == nil || !EndOfWait(ctx, err) {
			last = err
		}
		if errors.Is(err, ErrCannotHappen) {
			return false, err
		}
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("%s: not within %v: %v", what, timeout, errors.Join(last, err))
	}
}

// EndOfWait tells whether err is only the end of the wait's own deadline, met by cond's last call: it says
// nothing of what was waited for, and the error before it is the one to report. A client's rate limiter refuses
// a request whose turn comes after the deadline before the deadline passes.
func EndOfWait(ctx context.Context, err error) bool {
	return ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) ||
		err != nil && strings.Contains(err.Error(), "would exceed context deadline")
}

// Holds adapts a condition that says whether it holds, as client-go's wait takes it, to Eventually: false is
// not yet, an error ends the wait at once.
func Holds(cond func(ctx context.Context) (bool, error)) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		ok, err := cond(ctx)
		switch {
		case err != nil:
			return fmt.Errorf("%w: %w", ErrCannotHappen, err)
		case !ok:
			return errors.New("not yet")
		}
		return nil
	}
}

// NewNamespace creates a namespace for test t, its name made of prefix, the test's name and a random
// suffix, and deletes it when the test ends; when the test failed, onFailure (if not nil) is called first
// with the namespace's name, to print what it holds.
func NewNamespace(t testing.TB, c client.Client, prefix string, onFailure func(t testing.TB, ns string)) string {
	t.Helper()
	name := prefix + strings.Trim(regexp.MustCompile(`[^a-z0-9]+`).ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: strings.TrimRight(name[:min(len(name), 40)], "-") + "-"}}
	if err := c.Create(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() && onFailure != nil {
			onFailure(t, ns.Name)
		}
		if err := c.Delete(context.Background(), ns); client.IgnoreNotFound(err) != nil {
			t.Errorf("delete namespace %s: %v", ns.Name, err)
		}
	})
	return ns.Name
}

// SetJobSetStatus edits the status of JobSet key as the JobSet controller would write it, again on a
// conflict, within timeout.
func SetJobSetStatus(t testing.TB, c client.Client, key client.ObjectKey, timeout time.Duration, edit func(*jobsetv1alpha2.JobSetStatus)) {
	t.Helper()
	Eventually(t, "write the status of JobSet "+key.String(), timeout, func(ctx context.Context) error {
		js := &jobsetv1alpha2.JobSet{}
		if err := c.Get(ctx, key, js); err != nil {
			return err
		}
		edit(&js.Status)
		return c.Status().Update(ctx, js)
	})
}

// FreePortFor is FreePort for test t, which it fails when there is none.
func FreePortFor(t testing.TB) int {
	t.Helper()
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}
