// Package cli tests the kubectl plugin's commands end to end against a real API server (the local cluster's
// api profile): each command runs in-process exactly as the binary runs it, and what it prints is compared
// with golden files under testdata/. Refresh them with `go test ./test/integration/cli/ -update`, never by
// hand, and read the diff before committing it. Times are compared as offsets from a TrainJob's creation
// (Normalizer), so golden files hold what the test set, not when it ran. Most tests share one API server
// (sharedCluster), each in namespaces of its own; a test whose output depends on what is cluster-wide starts
// its own (apiCluster).
package cli

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-trainjob/kubectl-trainjob/cmd/kubectl-trainjob/app"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/scheme"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/golden"
)

// apiCluster starts a local cluster of the api profile (etcd, kube-apiserver, CRDs) for one test, which its
// subtests share, each in a namespace of its own: for a test whose output depends on what is cluster-wide
// (cluster-scoped objects it makes or lists, -A, Nodes), which the shared API server's other tests would change.
// Every other test takes sharedCluster.
func apiCluster(t *testing.T) *cluster.Cluster {
	t.Helper()
	return cluster.StartForTest(t, cluster.Options{Profile: cluster.ProfileAPI})
}

// shared is the API server of the tests that read and write only objects of namespaces of their own (and
// cluster-scoped objects that they only make sure exist, of a name no other test gives another spec):
// started by the first of them, stopped by TestMain. Starting one takes 12-18 s of the package's time.
var shared struct {
	once   sync.Once
	c      *cluster.Cluster
	logDir string
	err    error
	failed atomic.Bool
}

// sharedCluster is the package's shared API server (shared), started on the first call.
func sharedCluster(t *testing.T) *cluster.Cluster {
	t.Helper()
	shared.once.Do(func() {
		if shared.logDir, shared.err = os.MkdirTemp("", "trainjob-cli-shared-"); shared.err != nil {
			return
		}
		begin := time.Now()
		// Not the test's context: the cluster outlives the test that starts it.
		shared.c, shared.err = cluster.Start(context.Background(), cluster.Options{Profile: cluster.ProfileAPI, LogDir: shared.logDir})
		t.Logf("shared API server started in %v; logs in %s", time.Since(begin).Round(time.Millisecond), shared.logDir)
	})
	if shared.err != nil {
		t.Fatalf("shared API server: %v\ncomponent logs kept in %s", shared.err, shared.logDir)
	}
	t.Cleanup(func() {
		if t.Failed() {
			shared.failed.Store(true)
			t.Logf("the shared API server's logs are kept in %s", shared.logDir)
		}
	})
	return shared.c
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.c == nil {
		os.Exit(code)
	}
	if shared.failed.Load() {
		shared.c.DumpLogs(os.Stderr, 40)
	}
	if err := shared.c.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stop the shared API server: %v\n", err)
		code = cmp.Or(code, 1)
	}
	if shared.failed.Load() || code != 0 {
		fmt.Fprintf(os.Stderr, "the shared API server's logs are kept in %s\n", shared.logDir)
	} else {
		_ = os.RemoveAll(shared.logDir)
	}
	os.Exit(code)
}

// adminClient is a client of the cluster administrator with the project's scheme.
func adminClient(t *testing.T, c *cluster.Cluster) client.Client {
	t.Helper()
	cl, err := client.New(c.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// newNamespace creates a namespace for one test, named after it, without cluster.NewNamespace's random suffix:
// a golden's columns are as wide as the names they hold. The name is the test's alone in the shared API server;
// when it is taken, by the same test run again in this process (-count), it gets the first free "-N" suffix.
// Nothing deletes it: no namespace controller runs in the api profile.
func newNamespace(t *testing.T, cl client.Client) string {
	t.Helper()
	name := strings.ToLower(regexp.MustCompile(`[^a-zA-Z0-9]+`).ReplaceAllString(t.Name(), "-"))
	if len(name) > 50 {
		name = name[:50]
	}
	name = strings.Trim(name, "-")
	for n := 1; ; n++ {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if n > 1 {
			ns.Name = fmt.Sprintf("%s-%d", name, n)
		}
		err := cl.Create(t.Context(), ns)
		if err == nil {
			return ns.Name
		}
		if !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
}

// Result is what one run of a command printed and its exit code.
type Result struct {
	Stdout, Stderr string
	Code           int
}

// Run runs `kubectl trainjob ARGS…` in-process with the given commands, as the binary's main does: an error is
// printed as "error: …" on stderr and turned into the exit code. stdin is what the command reads.
func Run(t *testing.T, stdin string, adders []plugin.CommandAdder, args ...string) Result {
	t.Helper()
	return Start(t, stdin, adders, args...).Wait(t)
}

// RunWith is Run with the factory f.
func RunWith(t *testing.T, f cmdutil.Factory, adders []plugin.CommandAdder, args ...string) Result {
	t.Helper()
	return StartWith(t, f, "", adders, args...).Wait(t)
}

// String is the result as a golden file holds it.
func (r Result) String() string {
	return fmt.Sprintf("exit code: %d\n--- stdout\n%s--- stderr\n%s", r.Code, r.Stdout, r.Stderr)
}

// AssertGolden compares got with testdata/NAME.golden, or rewrites it under -update (test/golden).
func AssertGolden(t *testing.T, name, got string) {
	t.Helper()
	golden.Assert(t, filepath.Join("testdata", name+".golden"), []byte(got))
}

// Normalizer makes output that holds server-assigned values comparable across runs: every timestamp becomes
// its offset from Base ("<T+1m30s>"), and UIDs, resourceVersions and the given strings become placeholders.
type Normalizer struct {
	// Base is the time offsets are taken from: usually a TrainJob's creationTimestamp, so that times the
	// test set relative to it come out the same in every run.
	Base time.Time
	// Replace maps literal strings (the kubeconfig path, a namespace) to placeholders.
	Replace map[string]string
}

var (
	rfc3339Re  = regexp.MustCompile(`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})`)
	clockRe    = regexp.MustCompile(`\b\d{2}:\d{2}:\d{2}\b`)
	uidRe      = regexp.MustCompile(`\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`)
	rvRe       = regexp.MustCompile(`("resourceVersion":\s*"|resourceVersion: ")\d+"`)
	rvRawRe    = regexp.MustCompile(`(resourceVersion: )'?\d+'?`)
	continueRe = regexp.MustCompile(`("continue":\s*")[^"]+"`)
)

// Normalize applies n to s.
func (n Normalizer) Normalize(s string) string {
	// Longer strings first: a namespace "x-b" is not "x" followed by "-b".
	from := slices.Collect(maps.Keys(n.Replace))
	slices.SortFunc(from, func(a, b string) int { return cmp.Or(len(b)-len(a), strings.Compare(a, b)) })
	for _, f := range from {
		s = strings.ReplaceAll(s, f, n.Replace[f])
	}
	s = rfc3339Re.ReplaceAllStringFunc(s, func(m string) string {
		ts, err := time.Parse(time.RFC3339Nano, m)
		if err != nil {
			return m
		}
		return n.offset(ts.Sub(n.Base))
	})
	s = clockRe.ReplaceAllStringFunc(s, func(m string) string {
		ts, err := time.ParseInLocation(time.TimeOnly, m, time.Local)
		if err != nil {
			return m
		}
		b := n.Base.In(time.Local)
		ts = time.Date(b.Year(), b.Month(), b.Day(), ts.Hour(), ts.Minute(), ts.Second(), 0, time.Local)
		d := ts.Sub(b.Truncate(time.Second))
		switch { // the nearest day: output may cross midnight
		case d > 12*time.Hour:
			d -= 24 * time.Hour
		case d < -12*time.Hour:
			d += 24 * time.Hour
		}
		return n.offset(d)
	})
	s = uidRe.ReplaceAllString(s, "<uid>")
	s = rvRe.ReplaceAllString(s, `$1<rv>"`)
	s = rvRawRe.ReplaceAllString(s, `$1<rv>`)
	s = continueRe.ReplaceAllString(s, `$1<continue>"`)
	return s
}

func (n Normalizer) offset(d time.Duration) string {
	if d < 0 {
		return "<T-" + (-d).String() + ">"
	}
	return "<T+" + d.String() + ">"
}

// Started is a command running in the background, as Run runs it, whose output can be read while it runs.
type Started struct {
	args   []string
	out    *cluster.SyncBuffer
	errOut *cluster.SyncBuffer
	done   chan Result
	result *Result
}

// Start starts `kubectl trainjob ARGS…` in-process with the given commands; Wait returns its Result.
func Start(t *testing.T, stdin string, adders []plugin.CommandAdder, args ...string) *Started {
	t.Helper()
	return StartWith(t, cmdutil.NewFactory(), stdin, adders, args...)
}

// StartWith is Start with the factory f, as main makes it or with a hook on its REST config.
func StartWith(t *testing.T, f cmdutil.Factory, stdin string, adders []plugin.CommandAdder, args ...string) *Started {
	t.Helper()
	return StartReading(t, f, strings.NewReader(stdin), adders, args...)
}

// StartReading is StartWith whose command reads stdin as the test writes it (a prompt answered later).
func StartReading(t *testing.T, f cmdutil.Factory, stdin io.Reader, adders []plugin.CommandAdder, args ...string) *Started {
	t.Helper()
	return startRoot(t, stdin, func(streams cmdutil.Streams) *cobra.Command { return plugin.NewRootCommand(f, streams, adders...) }, args...)
}

// RunBinary runs `kubectl trainjob ARGS…` in-process as the binary's main of a platform team runs it: every
// command of the binary (app.NewCommand) with opts, such as its own pipeline plugins.
func RunBinary(t *testing.T, opts []app.Option, args ...string) Result {
	t.Helper()
	return startRoot(t, strings.NewReader(""), func(streams cmdutil.Streams) *cobra.Command {
		return app.NewCommand(cmdutil.NewFactory(), streams, opts...)
	}, args...).Wait(t)
}

// startRoot runs the root command newRoot makes with ARGS in the background.
func startRoot(t *testing.T, stdin io.Reader, newRoot func(cmdutil.Streams) *cobra.Command, args ...string) *Started {
	t.Helper()
	s := &Started{args: args, out: &cluster.SyncBuffer{}, errOut: &cluster.SyncBuffer{}, done: make(chan Result, 1)}
	root := newRoot(cmdutil.Streams{In: stdin, Out: s.out, ErrOut: s.errOut})
	root.SetArgs(args)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	go func() {
		defer cancel()
		code := cmdutil.CheckErr(s.errOut, root.ExecuteContext(ctx))
		s.done <- Result{Stdout: s.out.String(), Stderr: s.errOut.String(), Code: code}
	}()
	return s
}

// WaitForOutput waits until the command has printed text on stdout.
func (s *Started) WaitForOutput(t *testing.T, text string) {
	t.Helper()
	deadline := time.After(2 * time.Minute)
	for !strings.Contains(s.out.String(), text) {
		select {
		case r := <-s.done:
			s.result = &r
			t.Fatalf("kubectl trainjob %s ended before printing %q:\n%s", strings.Join(s.args, " "), text, r)
		case <-deadline:
			t.Fatalf("kubectl trainjob %s did not print %q; stdout:\n%s\nstderr:\n%s", strings.Join(s.args, " "), text, s.out.String(), s.errOut.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Wait waits for the command to end.
func (s *Started) Wait(t *testing.T) Result {
	t.Helper()
	if s.result != nil {
		return *s.result
	}
	select {
	case r := <-s.done:
		s.result = &r
		return r
	case <-time.After(2 * time.Minute):
		t.Fatalf("kubectl trainjob %s did not end; stdout:\n%s\nstderr:\n%s", strings.Join(s.args, " "), s.out.String(), s.errOut.String())
	}
	return Result{}
}
