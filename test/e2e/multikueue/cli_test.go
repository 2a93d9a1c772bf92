package multikueue

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubectl-trainjob/kubectl-trainjob/plugin"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/status"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/golden"
)

// The goldens (testdata/*.golden) are what `status` and `logs` print through the management cluster's
// kubeconfig, normalized: what changes from run to run (the namespace, Workload and pod names, nodes, times)
// becomes a placeholder. Refresh them with `go test ./test/e2e/multikueue/ -update`, and read the diff.

// sinceCreation is how long after a TrainJob's creation status runs, as its clock says: its age then reads
// the same in every run ("10h").
const sinceCreation = 10*time.Hour + 30*time.Minute

// cliTimeout bounds a command of the real binary; `logs -f` runs until its TrainJob ends.
const cliTimeout = 3 * time.Minute

// statusAt runs `kubectl trainjob status ARGS… -n ns` in-process as the binary does, against the management
// cluster, with its clock at now, and returns what it did as a golden holds it.
func statusAt(t *testing.T, ns string, now time.Time, args ...string) string {
	t.Helper()
	return statusWith(t, cmdutil.NewFactory(), ns, now, args...)
}

// statusWith is statusAt with the factory f.
func statusWith(t *testing.T, f *cmdutil.ConfigFactory, ns string, now time.Time, args ...string) string {
	t.Helper()
	clock := clocktesting.NewFakePassiveClock(now)
	terminal := false
	var out, errOut bytes.Buffer
	streams := cmdutil.Streams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}
	root := plugin.NewRootCommand(f, streams, func(f cmdutil.Factory, s cmdutil.Streams) *cobra.Command {
		o := status.NewStatusOptions(s)
		o.Clock, o.Terminal = clock, &terminal
		return status.NewCmdStatusWithOptions(f, o)
	})
	root.SetArgs(append([]string{"status"}, append(args, "-n", ns, "--kubeconfig", suite.clusters.Manager.KubeconfigPath)...))
	code := cmdutil.ExitOK
	if err := root.ExecuteContext(t.Context()); err != nil {
		fmt.Fprintln(&errOut, "error:", err)
		code = cmdutil.ExitCode(err)
	}
	return result(code, out.String(), errOut.String())
}

// command is `kubectl trainjob ARGS…` from the real binary, with the management cluster's kubeconfig alone.
func command(ctx context.Context, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	cmd := exec.CommandContext(ctx, suite.binary, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+suite.clusters.Manager.KubeconfigPath, "NO_COLOR=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	return cmd, &stdout, &stderr
}

// cli runs `kubectl trainjob ARGS…` from the real binary to its end and returns what it did as a golden holds
// it; it fails the test only when the command cannot run or does not end within cliTimeout.
func cli(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), cliTimeout)
	defer cancel()
	cmd, stdout, stderr := command(ctx, args...)
	return ran(t, cmd, cmd.Run(), stdout, stderr)
}

// ran is what a command of the real binary that ended with err did, as a golden holds it.
func ran(t *testing.T, cmd *exec.Cmd, err error, stdout, stderr *bytes.Buffer) string {
	t.Helper()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("%s: %v\n%s%s", strings.Join(cmd.Args, " "), err, stdout, stderr)
	}
	return result(cmd.ProcessState.ExitCode(), stdout.String(), stderr.String())
}

func result(code int, stdout, stderr string) string {
	return fmt.Sprintf("exit code: %d\n--- stdout\n%s--- stderr\n%s", code, stdout, stderr)
}

var (
	uidRe       = regexp.MustCompile(`\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`)
	workloadRe  = regexp.MustCompile(`\b(trainjob-[a-z0-9-]+)-[0-9a-f]{5}\b`)
	podRe       = regexp.MustCompile(`\b([a-z0-9-]+-(?:node|dataset-initializer|model-initializer|launcher)-\d+-\d+)-[a-z0-9]{5}\b`)
	nodeRe      = regexp.MustCompile(`\b((?:gpu|cpu)-node)-\d+\b`)
	timestampRe = regexp.MustCompile(`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})`)
	// offsetRe is a time from the TrainJob's creation, as the screen writes it ("+12s").
	offsetRe = regexp.MustCompile(`\+\d+[0-9a-z]*\b`)
)

// normalize makes the output of a command comparable across runs: the test's namespace, the random parts of
// Workload and pod names, the node a pod landed on, UIDs, timestamps and offsets become placeholders.
func normalize(ns, out string) string {
	out = strings.ReplaceAll(out, ns, "<ns>")
	out = workloadRe.ReplaceAllString(out, "$1-<hash>")
	out = podRe.ReplaceAllString(out, "$1-<pod>")
	out = nodeRe.ReplaceAllString(out, "$1-<n>")
	out = uidRe.ReplaceAllString(out, "<uid>")
	out = timestampRe.ReplaceAllString(out, "<time>")
	return offsetRe.ReplaceAllString(out, "+<t>")
}

// screen keeps of a status screen its head (what the TrainJob is, its stage and why, where it runs), its Queue
// and its Pods sections. The others (when each stage and Job started and ended, how many times Kueue and the
// controllers retried) differ from run to run and become "…"; the tests check them through `status -o json`.
func screen(out string) string {
	before, rest, ok := strings.Cut(out, "--- stdout\n")
	if !ok {
		return out
	}
	stdout, stderr, _ := strings.Cut(rest, "--- stderr\n")
	var kept []string
	for i, part := range strings.Split(strings.TrimSuffix(stdout, "\n"), "\n\n") {
		title, _, _ := strings.Cut(part, "\n")
		switch {
		case i == 0 || title == "Queue:" || title == "Pods:":
			kept = append(kept, part)
		case kept[len(kept)-1] != "…":
			kept = append(kept, "…")
		}
	}
	return before + "--- stdout\n" + strings.Join(kept, "\n\n") + "\n--- stderr\n" + stderr
}

// requestsOf runs `kubectl trainjob status ARGS… -n ns` in-process and returns the requests it sent to the
// management cluster, "METHOD PATH?QUERY", sorted (it makes some at once).
func requestsOf(t *testing.T, ns string, args ...string) []string {
	t.Helper()
	var mu sync.Mutex
	var requests []string
	f := cmdutil.NewFactory()
	f.ConfigFlags.WrapConfigFn = func(cfg *rest.Config) *rest.Config {
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
				line := r.Method + " " + r.URL.Path
				if r.URL.RawQuery != "" {
					line += "?" + r.URL.RawQuery
				}
				mu.Lock()
				requests = append(requests, line)
				mu.Unlock()
				return rt.RoundTrip(r)
			})
		})
		return cfg
	}
	if out := statusWith(t, f, ns, time.Now(), args...); !strings.HasPrefix(out, "exit code: 0\n") {
		t.Fatalf("status %s:\n%s", strings.Join(args, " "), out)
	}
	slices.Sort(requests)
	return requests
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// assertGolden compares got with testdata/NAME.golden (test/golden: -update rewrites it).
func assertGolden(t *testing.T, name, got string) {
	t.Helper()
	golden.Assert(t, filepath.Join("testdata", name+".golden"), []byte(got))
}
