package kueue

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubectl-trainjob/kubectl-trainjob/plugin"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
	createcmd "github.com/kubectl-trainjob/kubectl-trainjob/plugin/create"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/fit"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/list"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/status"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/golden"
)

// The CLI's goldens (testdata/*.golden) are what `list` and `status` print of the TrainJobs of these tests,
// run in-process as the binary runs them with their clock pinned (inProcess), and normalized: what changes
// from run to run (the namespace, Workload names, UIDs, times) becomes a placeholder. Refresh them with
// `go test ./test/e2e/kueue/ -update`, and read the diff.

// sinceCreation is how long after the newest TrainJob's creation `list` and `status` are run, as their clocks
// say: ages then read the same in every run ("10h") as long as the TrainJobs are made within 30 minutes.
const sinceCreation = 10*time.Hour + 30*time.Minute

// inProcess runs `kubectl trainjob ARGS… -n ns` (list, status, create or fit) in-process as the binary does,
// with the clocks of list and status at now, and returns its output as a golden file holds it.
func inProcess(t *testing.T, ns string, now time.Time, args ...string) string {
	t.Helper()
	clock := clocktesting.NewFakePassiveClock(now)
	terminal := false
	var out, errOut bytes.Buffer
	streams := cmdutil.Streams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}
	root := plugin.NewRootCommand(cmdutil.NewFactory(), streams,
		func(f cmdutil.Factory, s cmdutil.Streams) *cobra.Command {
			o := list.NewListOptions(s)
			o.Clock = clock
			return list.NewCmdListWithOptions(f, o)
		},
		func(f cmdutil.Factory, s cmdutil.Streams) *cobra.Command {
			o := status.NewStatusOptions(s)
			o.Clock, o.Terminal = clock, &terminal
			return status.NewCmdStatusWithOptions(f, o)
		},
		createcmd.NewCmdCreate, fit.NewCmd(nil))
	root.SetArgs(append(args, "-n", ns, "--kubeconfig", suite.cluster.KubeconfigPath))
	code := cmdutil.CheckErr(&errOut, root.ExecuteContext(t.Context()))
	return fmt.Sprintf("exit code: %d\n--- stdout\n%s--- stderr\n%s", code, out.String(), errOut.String())
}

var (
	uidRe       = regexp.MustCompile(`\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`)
	workloadRe  = regexp.MustCompile(`\b(trainjob-[a-z0-9-]+)-[0-9a-f]{5}\b`)
	timestampRe = regexp.MustCompile(`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})`)
	// sinceRe is an offset from the TrainJob's creation that ends a field of status's Queue section.
	sinceRe = regexp.MustCompile(`(?m)^(  (?:Admitted|Evicted):\s+)\+[0-9hms]+\b`)
)

// normalize makes the output of a command comparable across runs: the test's namespace, the random part of
// Workload names, UIDs, timestamps and the offsets of admissions and evictions become placeholders.
func normalize(ns, out string) string {
	out = strings.ReplaceAll(out, ns, "<ns>")
	out = workloadRe.ReplaceAllString(out, "$1-<hash>")
	out = uidRe.ReplaceAllString(out, "<uid>")
	out = timestampRe.ReplaceAllString(out, "<time>")
	return sinceRe.ReplaceAllString(out, "$1<since>")
}

// assertGolden compares got with testdata/NAME.golden (test/golden: -update rewrites it).
func assertGolden(t *testing.T, name, got string) {
	t.Helper()
	golden.Assert(t, filepath.Join("testdata", name+".golden"), []byte(got))
}

// summary is `status NAME -o json` of a TrainJob of ns.
func summary(t *testing.T, ns, name string) *status.Summary {
	t.Helper()
	out := inProcess(t, ns, time.Now(), "status", name, "-o", "json")
	_, stdout, _ := strings.Cut(out, "--- stdout\n")
	stdout, _, _ = strings.Cut(stdout, "--- stderr\n")
	s := &status.Summary{}
	if err := json.Unmarshal([]byte(stdout), s); err != nil {
		t.Fatalf("status %s -o json: %v\n%s", name, err, out)
	}
	return s
}

// hasTimeline tells whether s's timeline has an entry of source whose What() is what and whose reason is reason.
func hasTimeline(s *status.Summary, source, what, reason string) bool {
	for _, e := range s.Timeline {
		if e.Source == source && e.What() == what && e.Reason == reason {
			return true
		}
	}
	return false
}
