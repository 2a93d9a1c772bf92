// Package readme holds the map from every command the project's documents show (the README, CONTRIBUTING.md,
// test/cluster/README.md and the pages of docs/) to the tests that run it, and from every example output they
// show to the golden file it is taken from. The tests themselves live with what they test; this package only
// checks that the maps are whole and true.
package readme

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
)

// runBy is where a command the documents show is run: a test, as `<package folder>.<TestName>` (subtests after
// a slash), and whether that test runs the command exactly as the documents write it on the local cluster
// (verbatim), or the same command on its own fixture (another namespace, name or image). A verbatim command of
// the local cluster's end-to-end suite is one of readmeTest's commands: each runs there, as written, in order.
type runBy struct {
	tests    []string
	verbatim bool
}

// documents are the files whose commands and example outputs are checked, from the repository's root: the
// README, CONTRIBUTING.md, the local cluster's README and every page of docs/, so that a new page cannot be left
// out.
var documents = append([]string{"README.md", "CONTRIBUTING.md", "test/cluster/README.md"}, docsPages()...)

// docsPages are the Markdown files of docs/, from the repository's root.
func docsPages() []string {
	root, err := cluster.RepoRoot()
	if err != nil {
		panic(err)
	}
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		panic(err)
	}
	for i, p := range pages {
		pages[i] = filepath.ToSlash(strings.TrimPrefix(p, root+string(filepath.Separator)))
	}
	return pages
}

// commands maps each command the documents show to where it runs: the lines of `sh` code blocks, the `$ ` lines
// of `console` blocks, the demo's try-next list, the examples of command tables and whole commands in prose. A verbatim command appears
// as a Go string in the package of its first test; the try-next list is the demo's own
// (TestContributingShowsTryNext).
var commands = map[string]runBy{
	// README: install and quickstart; docs/install.md.
	"kubectl krew install --manifest=trainjob.yaml":                                                                      {tests: []string{"test/integration/krew.TestKrewRelease/validate-krew-manifest installs every platform built"}},
	"kubectl krew install --manifest=trainjob.yaml --archive=kubectl-trainjob_linux_amd64.tar.gz":                        {tests: []string{"test/integration/krew.TestKrewRelease/krew install from the archive, and run it"}},
	`cp "${KREW_ROOT:-$HOME/.krew}/store/trainjob/<version>/kubectl_complete-trainjob" "${KREW_ROOT:-$HOME/.krew}/bin/"`: {tests: []string{"test/integration/krew.TestKrewRelease/krew install from the archive, and run it", "test/integration/cli.TestCompletionShim"}},
	"kubectl trainjob version --client":                                                                                  {tests: []string{"test/e2e.TestREADMECommands", "test/integration/krew.TestKrewRelease"}, verbatim: true},
	"kubectl trainjob install":                                                                                           {tests: []string{"test/integration/install.TestInstallUninstall"}},
	"kubectl trainjob install -n training-system --image registry.example.com/kubectl-trainjob:v0.1.0":                   {tests: []string{"test/integration/install.TestInstallUninstall"}},
	"kubectl trainjob install -o yaml":                                                                                   {tests: []string{"test/e2e.TestREADMECommands"}, verbatim: true},
	"kubectl trainjob install --uninstall":                                                                               {tests: []string{"test/integration/install.TestInstallUninstall"}},
	"kubectl trainjob runtimes":                                                                                          {tests: []string{"test/e2e.TestREADMECommands", "test/integration/cli.TestRuntimes"}, verbatim: true},
	"kubectl trainjob create llama --runtime torch-distributed --nodes 4 --gpus-per-node 8 --queue team-a -- torchrun train.py --lr 3e-4": {
		tests: []string{"test/e2e.TestREADMECommands", "test/integration/cli.TestCreate"}, verbatim: true},
	"kubectl trainjob status llama":  {tests: []string{"test/e2e.TestREADMECommands", "test/integration/cli.TestStatus/Training"}, verbatim: true},
	"kubectl trainjob logs llama -f": {tests: []string{"test/e2e.TestREADMECommands", "test/integration/cli.TestLogs"}, verbatim: true},
	"kubectl trainjob delete llama":  {tests: []string{"test/e2e.TestREADMECommands", "test/integration/cli.TestLifecycle/delete"}, verbatim: true},

	// README: the command table; docs/commands.md.
	"kubectl trainjob create llama --runtime torch-distributed --nodes 2 --gpus-per-node 8 -- torchrun train.py": {tests: []string{"test/e2e.TestGPUTrainJobFromFlags", "test/demo.TestNoWait"}},
	"kubectl trainjob create bad --runtime no-such-runtime":                                                      {tests: []string{"test/e2e.TestREADMECommands", "test/integration/cli.TestCreate"}, verbatim: true},
	"kubectl trainjob fit -f trainjob.yaml":                                                                      {tests: []string{"test/integration/cli.TestFit/two-of-four-now"}},
	"kubectl trainjob create llama --runtime torch-distributed --nodes 2 --gpus-per-node 8 --gpu-claim -- torchrun train.py": {
		tests: []string{"test/e2e.TestREADMECommands", "test/integration/cli.TestCreate/gpu-claim"}, verbatim: true},
	"kubectl trainjob create llama --runtime torch-distributed --nodes 2 --gpus-per-node 8 --gpu-type NVIDIA-A100-SXM4-80GB -- torchrun train.py": {
		tests: []string{"test/integration/cli.TestFit/create-gpu-type-dry-run-server", "test/integration/cli.TestCreate/gpu-type"}},
	"kubectl trainjob create too-big --runtime torch-distributed --nodes 2 --gpus-per-node 16": {tests: []string{"test/integration/cli.TestFit/create-warns"}},
	"kubectl trainjob create llama --runtime torch-distributed --nodes 4 --gpus-per-node 8 --dry-run=server": {
		tests: []string{"test/e2e.TestREADMECommands", "test/integration/cli.TestFit/create-dry-run-server"}, verbatim: true},
	"kubectl trainjob list":              {tests: []string{"test/e2e.TestREADMECommands", "test/integration/cli.TestList"}, verbatim: true},
	"kubectl trainjob status big":        {tests: []string{"test/integration/cli.TestStatus/Unschedulable"}},
	"kubectl trainjob status placed":     {tests: []string{"test/e2e/kueue.TestTopology/when a rack frees it runs inside it"}},
	"kubectl trainjob status oom":        {tests: []string{"test/integration/cli.TestStatusFailures/OOMKilled"}},
	"kubectl trainjob logs oom --failed": {tests: []string{"test/integration/cli.TestStatusFailures/OOMKilled"}},
	"kubectl trainjob describe-pipeline -f trainjob.yaml --runtime-file runtime.yaml": {
		tests: []string{"test/e2e.TestREADMECommands", "plugin/describe.TestDescribePipelineOffline"}, verbatim: true},
	"kubectl trainjob render -f trainjob.yaml --runtime torch-distributed.yaml": {tests: []string{"test/e2e.TestREADMECommands", "plugin/render.TestRenderExamples/trainjob-01-multi-node"}, verbatim: true},
	"kubectl trainjob wait oom --for=Complete":                                  {tests: []string{"test/integration/cli.TestWait/failed-instead"}},
	"kubectl trainjob suspend llama":                                            {tests: []string{"test/integration/cli.TestLifecycle/suspend-resume"}},
	"kubectl trainjob version":                                                  {tests: []string{"test/e2e.TestREADMECommands", "test/integration/cli.TestVersion"}, verbatim: true},
	"kubectl-trainjob operator --config config.yaml":                            {tests: []string{"test/demo.TestNoWait", "test/bench.TestSmoke"}},
	"kubectl trainjob completion bash":                                          {tests: []string{"test/e2e.TestREADMECommands", "test/integration/cli.TestCompletion"}, verbatim: true},
	"kubectl trainjob rerun llama --set nodes=8":                                {tests: []string{"test/integration/cli.TestRerun/set"}},
	"kubectl trainjob port-forward llama 16006:6006 --rank 1":                   {tests: []string{"test/realnode.TestRealNode/port-forward reaches rank 1 of a TrainJob on the real node and follows it to the pod that takes its place"}},
	"kubectl trainjob dashboard":                                                {tests: []string{"test/integration/cli.TestLifecycle/dashboard"}},

	// README: Hyperparameter search; docs/commands.md: optimize.
	"kubectl trainjob status optimizationjob/sweep":                           {tests: []string{"test/integration/cli.TestOptimization/status"}},
	"kubectl trainjob list --optimizations":                                   {tests: []string{"test/integration/cli.TestOptimization/status"}},
	"kubectl trainjob delete optimizationjob/sweep optimizationjob/from-file": {tests: []string{"test/integration/cli.TestOptimization/status"}},

	// docs/dashboard.md.
	"kubectl trainjob dashboard -A --allow-writes": {tests: []string{"test/integration/cli.TestLifecycle/dashboard"}},

	// docs/commands.md: rerun.
	"kubectl trainjob rerun llama":                          {tests: []string{"test/integration/cli.TestRerun/rerun"}},
	"kubectl trainjob rerun llama --dry-run=client -o yaml": {tests: []string{"test/e2e.TestREADMECommands", "test/integration/cli.TestRerun/dry-run"}, verbatim: true},

	// README: With Kueue (and MultiKueue).
	"kubectl trainjob list -o wide":             {tests: []string{"test/e2e/kueue.TestQueueing/the second waits for GPUs, suspended, and its Workload says why", "test/integration/cli.TestList"}},
	"kubectl trainjob status second":            {tests: []string{"test/e2e/kueue.TestQueueing/the second waits for GPUs, suspended, and its Workload says why"}},
	"kubectl trainjob status llama-mk":          {tests: []string{"test/e2e/multikueue.TestDispatch/status and logs read the worker through the management cluster"}},
	"kubectl trainjob logs llama-mk --rank all": {tests: []string{"test/e2e/multikueue.TestDispatch/status and logs read the worker through the management cluster"}},

	// docs/kueue.md: the local cluster with Kueue.
	"make dev-cluster KUEUE=1 OPERATOR=1":               {tests: []string{"test/cluster/cmd/dev-cluster.TestMakeDevClusterKueue"}},
	"export KUBECONFIG=$PWD/bin/dev-cluster/kubeconfig": {tests: []string{"test/cluster/cmd/dev-cluster.TestMakeDevClusterKueue"}},
	"kubectl trainjob create my-job --runtime torch-distributed --queue gpu --nodes 2 --gpus-per-node 8": {
		tests: []string{"test/cluster/cmd/dev-cluster.TestMakeDevClusterKueue"}},
	"make dev-cluster KUEUE=1": {tests: []string{"test/cluster/cmd/dev-cluster.TestMakeDevClusterKueue"}},

	// test/cluster/README.md: the dev cluster's flags (make passes DEV_CLUSTER_FLAGS on) and each profile's test.
	`make dev-cluster DEV_CLUSTER_FLAGS="-gpu-nodes=8 -pod-run-duration=1m"`: {tests: []string{"test/cluster/cmd/dev-cluster.TestMakeDevClusterKueue"}},
	"go test ./test/cluster -run TestAPIProfile -v":                          {tests: []string{"test/cluster.TestAPIProfile"}},
	"go test ./test/cluster -run TestFullProfile -v":                         {tests: []string{"test/cluster.TestFullProfile"}},

	// docs/gpus.md: topology-aware placement with Kueue.
	"kubectl trainjob create llama --runtime torch-distributed --nodes 2 --gpus-per-node 8 --queue gpu-tas --topology rack -- torchrun train.py": {
		tests: []string{"test/e2e/kueue.TestTopology/one rack's worth asked for one rack waits"}},

	// docs/real-node.md: the demo's CPU TrainJob and its search on the real node.
	"kubectl trainjob create -f test/demo/sgd.yaml":      {tests: []string{"test/demo.TestNoWait"}},
	"kubectl trainjob optimize -f test/demo/search.yaml": {tests: []string{"test/demo.TestNoWait"}},
	"kubectl trainjob status lr-search":                  {tests: []string{"test/demo.TestNoWait"}},

	// CONTRIBUTING.md.
	"make test":                     {tests: []string{"test/readme.TestCIRunsMakeTest"}},
	"make demo":                     {tests: []string{"test/demo.TestNoWait"}},
	"make demo DEMO_ARGS=--no-wait": {tests: []string{"test/demo.TestNoWait"}},
	"export KUBECONFIG=/path/to/clone/bin/demo/kubeconfig":   {tests: []string{"test/demo.TestNoWait"}},
	"export PATH=/path/to/clone/bin:$PATH":                   {tests: []string{"test/demo.TestNoWait"}},
	"kubectl-trainjob list":                                  {tests: []string{"test/demo.TestNoWait"}, verbatim: true},
	"kubectl-trainjob status demo":                           {tests: []string{"test/demo.TestNoWait"}, verbatim: true},
	"kubectl-trainjob logs demo --rank all":                  {tests: []string{"test/demo.TestNoWait"}, verbatim: true},
	"kubectl-trainjob logs demo --stage dataset-initializer": {tests: []string{"test/demo.TestNoWait"}, verbatim: true},
	"kubectl-trainjob describe-pipeline demo":                {tests: []string{"test/demo.TestNoWait"}, verbatim: true},
	"kubectl-trainjob create llama --runtime torch-distributed --nodes 2 --gpus-per-node 8 -- torchrun train.py": {
		tests: []string{"test/demo.TestNoWait", "test/e2e.TestGPUTrainJobFromFlags"}, verbatim: true},
	"kubectl-trainjob wait llama --for=Complete": {tests: []string{"test/demo.TestNoWait"}, verbatim: true},
	"kubectl-trainjob status llama":              {tests: []string{"test/demo.TestNoWait"}, verbatim: true},
	"kubectl-trainjob create too-big --runtime torch-distributed --nodes 2 --gpus-per-node 16": {
		tests: []string{"test/demo.TestNoWait", "test/e2e.TestDoesNotFitStaysPending"}, verbatim: true},
	"kubectl-trainjob status too-big": {tests: []string{"test/demo.TestNoWait", "test/e2e.TestDoesNotFitStaysPending"}, verbatim: true},
	"kubectl-trainjob delete too-big": {tests: []string{"test/demo.TestNoWait", "test/e2e.TestDoesNotFitStaysPending"}, verbatim: true},

	// docs/real-node.md's prose: the demo prints it and runs it.
	"kubectl trainjob logs sgd --rank all": {tests: []string{"test/demo.TestNoWait"}},

	// docs/performance.md.
	"make bench":                       {tests: []string{"test/bench.TestSmoke"}},
	"kubectl trainjob list -A -o json": {tests: []string{"test/bench.TestScaleSmoke"}},
	"make bench-scale":                 {tests: []string{"test/bench.TestScaleSmoke"}},
}

// outputs maps each command whose output a document shows (in a `console` block) to the golden file the output
// is taken from, from the repository's root.
var outputs = map[string]string{
	"kubectl trainjob status optimizationjob/sweep":                           "test/integration/cli/testdata/optimize/status.golden",
	"kubectl trainjob list --optimizations":                                   "test/integration/cli/testdata/optimize/list.golden",
	"kubectl trainjob delete optimizationjob/sweep optimizationjob/from-file": "test/integration/cli/testdata/optimize/delete-answer-no.golden",
	"kubectl trainjob list":                                                   "test/integration/cli/testdata/list/table.golden",
	"kubectl trainjob status placed":                                          "test/e2e/kueue/testdata/topology-placed-status.golden",
	"kubectl trainjob create llama --runtime torch-distributed --nodes 4 --gpus-per-node 8 --queue team-a -- torchrun train.py --lr 3e-4": "test/integration/cli/testdata/create/flags.golden",
	"kubectl trainjob create bad --runtime no-such-runtime":                                                                               "test/integration/cli/testdata/create/unknown-runtime.golden",
	"kubectl trainjob fit -f trainjob.yaml":                                                                                               "test/integration/cli/testdata/fit/two-of-four-now.golden",
	"kubectl trainjob create too-big --runtime torch-distributed --nodes 2 --gpus-per-node 16":                                            "test/integration/cli/testdata/fit/create-warns.golden",
	"kubectl trainjob create llama --runtime torch-distributed --nodes 4 --gpus-per-node 8 --dry-run=server":                              "test/integration/cli/testdata/fit/create-dry-run-server.golden",
	"kubectl trainjob status big":                                                     "test/integration/cli/testdata/status/unschedulable.golden",
	"kubectl trainjob status oom":                                                     "test/integration/cli/testdata/failures/oom-status.golden",
	"kubectl trainjob logs oom --failed":                                              "test/integration/cli/testdata/failures/oom-logs.golden",
	"kubectl trainjob logs llama -f":                                                  "test/integration/cli/testdata/logs/follow-pipeline.golden",
	"kubectl trainjob render -f trainjob.yaml --runtime torch-distributed.yaml":       "plugin/render/testdata/trainjob-01-multi-node.golden.yaml",
	"kubectl trainjob describe-pipeline -f trainjob.yaml --runtime-file runtime.yaml": "plugin/describe/testdata/torch.golden",
	"kubectl trainjob wait oom --for=Complete":                                        "test/integration/cli/testdata/wait/failed-instead.golden",
	"kubectl trainjob suspend llama":                                                  "test/integration/cli/testdata/lifecycle/suspend.golden",
	"kubectl trainjob delete llama":                                                   "test/integration/cli/testdata/lifecycle/delete-answer-yes.golden",
	"kubectl trainjob runtimes":                                                       "test/integration/cli/testdata/runtimes/table.golden",
	"kubectl trainjob version":                                                        "test/integration/cli/testdata/version/operator.golden",
	"kubectl trainjob list -o wide":                                                   "test/e2e/kueue/testdata/queued-list.golden",
	"kubectl trainjob rerun llama":                                                    "test/integration/cli/testdata/rerun/rerun.golden",
	"kubectl trainjob rerun llama --dry-run=client -o yaml":                           "test/integration/cli/testdata/rerun/dry-run.golden",
	"kubectl trainjob port-forward llama 16006:6006 --rank 1":                         "test/realnode/testdata/port-forward.golden",
	"kubectl trainjob status second":                                                  "test/e2e/kueue/testdata/queued-status.golden",
	"kubectl trainjob status llama-mk":                                                "test/e2e/multikueue/testdata/status.golden",
	"kubectl trainjob logs llama-mk --rank all":                                       "test/e2e/multikueue/testdata/logs.golden",
}

// TestCommandMap: every command the documents show is in commands, every entry there is still shown, every test
// it names exists, and a verbatim command is written as it is in its test's package.
func TestCommandMap(t *testing.T) {
	root := repoRoot(t)
	var shown []string
	for _, doc := range documents {
		for _, c := range shownCommands(read(t, root, doc)) {
			if _, ok := commands[c]; !ok {
				t.Errorf("%s shows %q, which no entry of commands maps to a test", doc, c)
			}
			shown = append(shown, c)
		}
	}
	if len(shown) < len(commands)/2 {
		t.Fatalf("found %d commands in %v, fewer than expected: %q", len(shown), documents, shown)
	}
	run := readmeTestCommands(t, root)
	for c, by := range commands {
		if !slices.Contains(shown, c) {
			t.Errorf("commands maps %q, which no document shows any more", c)
		}
		if len(by.tests) == 0 {
			t.Errorf("%q: no test", c)
		}
		for i, test := range by.tests {
			dir, name, ok := strings.Cut(test, ".")
			if !ok {
				t.Errorf("%q: test %q is not <package folder>.<TestName>", c, test)
				continue
			}
			top, _, _ := strings.Cut(name, "/")
			src := testSources(t, filepath.Join(root, filepath.FromSlash(dir)))
			if !regexp.MustCompile(`(?m)^func ` + regexp.QuoteMeta(top) + `\(t \*testing\.T\)`).MatchString(src) {
				t.Errorf("%q: %s has no func %s(t *testing.T)", c, dir, top)
			}
			if sub, ok := strings.CutPrefix(name, top+"/"); ok && !strings.Contains(src, strconv.Quote(sub)) {
				t.Errorf("%q: %s has no subtest %q", c, dir, sub)
			}
			if i == 0 && by.verbatim && test != readmeTest && !strings.Contains(src, strconv.Quote(c)) && !strings.Contains(src, "`"+c+"`") {
				t.Errorf("%q: verbatim, but not written as a Go string in %s", c, dir)
			}
		}
		if want, ok := goTestRun(c); ok && (len(by.tests) == 0 || by.tests[0] != want) {
			t.Errorf("%q: its first test must be the one it runs, %s", c, want)
		}
		if by.verbatim && by.tests[0] == readmeTest && !slices.Contains(run, c) {
			t.Errorf("%q: verbatim in %s, which does not run it: add it to its commands", c, readmeTest)
		}
	}
	for _, c := range run {
		if by := commands[c]; slices.Contains(shown, c) && (!by.verbatim || by.tests[0] != readmeTest) {
			t.Errorf("%s runs %q as the documents show it: map it verbatim to %s first", readmeTest, c, readmeTest)
		}
	}
}

// goTestRun is the test a `go test PKG -run TestName` command runs, as `<package folder>.<TestName>`.
func goTestRun(c string) (string, bool) {
	f := strings.Fields(c)
	i := slices.Index(f, "-run")
	if len(f) < 2 || f[0] != "go" || f[1] != "test" || i < 0 || i+1 == len(f) {
		return "", false
	}
	for _, a := range f[2:] {
		if pkg, ok := strings.CutPrefix(a, "./"); ok {
			return strings.TrimSuffix(pkg, "/") + "." + f[i+1], true
		}
	}
	return "", false
}

// readmeTest runs, on the local cluster, the commands of the documents that run there as they are written: its
// table holds each as a `command:` field, and runs them in its order.
const readmeTest = "test/e2e.TestREADMECommands"

// readmeTestCommands are the commands of readmeTest's table.
func readmeTestCommands(t *testing.T, root string) []string {
	t.Helper()
	dir, _, _ := strings.Cut(readmeTest, ".")
	var out []string
	for _, m := range regexp.MustCompile(`\bcommand: ("(?:[^"\\]|\\.)*")`).FindAllStringSubmatch(testSources(t, filepath.Join(root, filepath.FromSlash(dir))), -1) {
		c, err := strconv.Unquote(m[1])
		if err != nil {
			t.Fatalf("%s: command %s: %v", dir, m[1], err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		t.Fatalf("%s has no command: fields", dir)
	}
	return out
}

// TestExampleOutputs: every output a document shows under a command is taken from the golden file that outputs
// maps the command to: its lines are the golden's, in the golden's order, and lines are left out only where an
// elision line (…) says so. A golden's placeholders (<ns>, <hash>, …) stand for any word. An `echo $?` after the
// command shows the golden's exit code.
func TestExampleOutputs(t *testing.T) {
	root := repoRoot(t)
	used := map[string]bool{}
	for _, doc := range documents {
		for _, ex := range examples(read(t, root, doc)) {
			path, ok := outputs[ex.command]
			if !ok {
				if len(ex.output) > 0 || ex.exitCode != "" {
					t.Errorf("%s shows the output of %q, which outputs maps to no golden file", doc, ex.command)
				}
				continue
			}
			if len(ex.output) == 0 {
				continue
			}
			used[ex.command] = true
			lines, code := goldenOutput(read(t, root, path))
			if err := matchOutput(ex.output, lines); err != nil {
				t.Errorf("%s: the output of %q is not %s's: %v", doc, ex.command, path, err)
			}
			if ex.exitCode != "" && ex.exitCode != code {
				t.Errorf("%s: %q exits %s, but %s says exit code %q", doc, ex.command, ex.exitCode, path, code)
			}
		}
	}
	for c := range outputs {
		if !used[c] {
			t.Errorf("outputs maps %q, whose output no document shows any more", c)
		}
	}
}

// TestMatchOutput: the rule TestExampleOutputs applies, on outputs that keep it and outputs that break it.
func TestMatchOutput(t *testing.T) {
	golden := []string{"NAME   STAGE", "a      Pending", "b      Training", "c-<hash>   Complete", "", "Pods:", "p-<ns>"}
	for _, tc := range []struct {
		name  string
		shown []string
		ok    bool
	}{
		{"all of it", golden, true},
		{"a placeholder stands for a word", []string{"NAME   STAGE", "a      Pending", "b      Training", "c-x7k2p   Complete"}, true},
		{"the start, then an elision", []string{"NAME   STAGE", "…"}, true},
		{"lines left out where an elision says so", []string{"NAME   STAGE", "...", "Pods:", "p-team-a"}, true},
		{"a line left out silently", []string{"NAME   STAGE", "b      Training"}, false},
		{"a changed line", []string{"NAME   STAGE", "a      Running"}, false},
		{"lines out of order", []string{"b      Training", "…", "a      Pending"}, false},
		{"a placeholder does not span words", []string{"c-x7k2p extra   Complete"}, false},
		{"a line the golden lacks", []string{"NAME   STAGE", "a      Pending", "z      Failed"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := matchOutput(tc.shown, golden)
			if (err == nil) != tc.ok {
				t.Errorf("matchOutput(%q): %v, want ok=%v", tc.shown, err, tc.ok)
			}
		})
	}
}

// TestProseCommands: the commands prose shows in inline code, and the mentions of a command that are not one.
func TestProseCommands(t *testing.T) {
	doc := "Run `kubectl trainjob logs sgd --rank all` and `kubectl-trainjob list -A -o json`; `kubectl trainjob status`,\n" +
		"`kubectl trainjob create -f`, `kubectl trainjob status NAME`, `kubectl trainjob logs llama-mk -n <ns>`,\n" +
		"`kubectl trainjob create --queue gpu …` and `make tools` name commands.\n" +
		"`make dev-cluster DEV_CLUSTER_FLAGS=\"-gpu-nodes=8\"` and `go test ./test/cluster -run TestAPIProfile -v` run;\n" +
		"`go test ./test/...`, `go test -run TestX ./test/e2e/...` and `go test -run '^$' -bench X` name how.\n" +
		"```sh\nkubectl trainjob delete llama --now\n```\n"
	want := []string{"kubectl trainjob logs sgd --rank all", "kubectl-trainjob list -A -o json",
		`make dev-cluster DEV_CLUSTER_FLAGS="-gpu-nodes=8"`, "go test ./test/cluster -run TestAPIProfile -v"}
	if got := proseCommands(doc); !slices.Equal(got, want) {
		t.Errorf("proseCommands = %q, want %q", got, want)
	}
}

// TestCIRunsMakeTest: `make test` is what CI runs (.ci/run), the suite that runs every test of the map.
func TestCIRunsMakeTest(t *testing.T) {
	data := read(t, repoRoot(t), ".ci/run")
	if !regexp.MustCompile(`(?m)^make test( |$)`).MatchString(data) {
		t.Errorf(".ci/run does not run `make test`:\n%s", data)
	}
}

// TestREADMELength: the README stays a user's document; detail goes to docs/ and CONTRIBUTING.md.
func TestREADMELength(t *testing.T) {
	if n := strings.Count(read(t, repoRoot(t), "README.md"), "\n"); n > 250 {
		t.Errorf("README.md has %d lines, more than 250: move detail to docs/ or CONTRIBUTING.md", n)
	}
}

// shownCommands are the commands a document shows: the lines of `sh` blocks that are not comments, the `$ `
// lines of `console` blocks (a line ending in a backslash continues on the next), the lines of `text` blocks
// that start with kubectl-trainjob or export (the demo's try-next list), and the table cells that hold only a
// `kubectl trainjob …` command; each without its trailing comment. `echo $?` shows the exit code of the
// command before it and is left out.
func shownCommands(doc string) []string {
	var out []string
	add := func(line string) {
		line, _, _ = strings.Cut(line, "  #")
		line = strings.Join(strings.Fields(line), " ")
		if line != "" && line != "echo $?" && !slices.Contains(out, line) {
			out = append(out, line)
		}
	}
	for _, b := range codeBlocks(doc) {
		for i := 0; i < len(b.lines); i++ {
			line := b.lines[i]
			switch b.lang {
			case "sh":
				if !strings.HasPrefix(strings.TrimSpace(line), "#") {
					add(line)
				}
			case "console":
				if cmd, ok := strings.CutPrefix(line, "$ "); ok {
					for strings.HasSuffix(cmd, `\`) && i+1 < len(b.lines) {
						i++
						cmd = strings.TrimSuffix(cmd, `\`) + strings.TrimSpace(b.lines[i])
					}
					add(cmd)
				}
			case "text":
				if l := strings.TrimSpace(line); strings.HasPrefix(l, "kubectl-trainjob ") || strings.HasPrefix(l, "export ") {
					add(line)
				}
			}
		}
	}
	for _, m := range regexp.MustCompile("(?m)\\|\\s*`((?:kubectl trainjob|kubectl-trainjob) [^`]*)`\\s*\\|").FindAllStringSubmatch(doc, -1) {
		add(m[1])
	}
	for _, c := range proseCommands(doc) {
		add(c)
	}
	return out
}

// proseCommands are the whole commands that a document's prose shows in inline code, outside its code blocks, as
// a user would type them: `kubectl trainjob …` with its arguments, `make TARGET` with settings (`KUEUE=1`), and
// `go test … -run TestName`. A command named alone (`kubectl trainjob status`, `make tools`, `go test ./test/...`),
// or with a flag named alone (`kubectl trainjob create -f`), or with a placeholder (<ns>, NAME, …, a|b, TestX) names
// a command rather than showing one, and is left out.
func proseCommands(doc string) []string {
	doc = regexp.MustCompile("(?ms)^```.*?^```").ReplaceAllString(doc, "")
	placeholders := regexp.MustCompile(`[<…|]|\b[A-Z]{2,}\b|\bTest[A-Z]\b`)
	var out []string
	for _, m := range regexp.MustCompile("`((?:kubectl trainjob|kubectl-trainjob|make|go test) [^`]*)`").FindAllStringSubmatch(doc, -1) {
		words := strings.Fields(m[1])
		if words[0] == "kubectl" {
			words = words[1:]
		}
		args := words[1:]
		var shows bool
		switch words[0] {
		case "make":
			shows = slices.ContainsFunc(args, func(a string) bool { return strings.Contains(a, "=") })
		case "go":
			i := slices.Index(args, "-run")
			shows = i >= 0 && i+1 < len(args) && strings.HasPrefix(args[i+1], "Test") && !placeholders.MatchString(args[i+1])
		default:
			shows = len(args) >= 2 && !strings.HasPrefix(args[len(args)-1], "-") && !placeholders.MatchString(m[1])
		}
		if shows {
			out = append(out, strings.Join(strings.Fields(m[1]), " "))
		}
	}
	return out
}

// example is a command of a `console` block with the output shown under it and the exit code an `echo $?` after
// it shows.
type example struct {
	command  string
	output   []string
	exitCode string
}

// examples are the commands of a document's `console` blocks with what they print there.
func examples(doc string) []example {
	var out []example
	for _, b := range codeBlocks(doc) {
		if b.lang != "console" {
			continue
		}
		var cur *example
		echo := false
		for i := 0; i < len(b.lines); i++ {
			line := b.lines[i]
			if cmd, ok := strings.CutPrefix(line, "$ "); ok {
				for strings.HasSuffix(cmd, `\`) && i+1 < len(b.lines) {
					i++
					cmd = strings.TrimSuffix(cmd, `\`) + strings.TrimSpace(b.lines[i])
				}
				cmd = strings.Join(strings.Fields(cmd), " ")
				if echo = cmd == "echo $?"; echo {
					continue
				}
				out = append(out, example{command: cmd})
				cur = &out[len(out)-1]
				continue
			}
			switch {
			case cur == nil:
			case echo:
				cur.exitCode = strings.TrimSpace(line)
			default:
				cur.output = append(cur.output, line)
			}
		}
	}
	return out
}

type codeBlock struct {
	lang  string
	lines []string
}

// codeBlocks are a document's fenced code blocks, each with its language and lines.
func codeBlocks(doc string) []codeBlock {
	var out []codeBlock
	for _, m := range regexp.MustCompile("(?ms)^```(\\w*)\n(.*?)^```").FindAllStringSubmatch(doc, -1) {
		out = append(out, codeBlock{lang: m[1], lines: strings.Split(strings.TrimSuffix(m[2], "\n"), "\n")})
	}
	return out
}

// goldenOutput is what a golden file says a command printed, standard output then standard error, and its exit
// code: the CLI's goldens (test/integration/cli) head each stream with a `--- ` line after an `exit code: N`
// line; other goldens are the output alone.
func goldenOutput(golden string) (lines []string, code string) {
	lines = strings.Split(strings.TrimSuffix(golden, "\n"), "\n")
	if c, ok := strings.CutPrefix(lines[0], "exit code: "); ok {
		code = c
		var out []string
		for _, l := range lines[1:] {
			if l != "--- stdout" && l != "--- stderr" {
				out = append(out, l)
			}
		}
		lines = out
	}
	return lines, code
}

// placeholder is how goldens write what changes from run to run.
var placeholder = regexp.MustCompile(`<[A-Za-z0-9+-]+>`)

// matchOutput tells whether shown is taken from golden: split at its elision lines (… or ...), each run of
// lines is a run of consecutive golden lines, after the previous run; the first run starts the golden unless an
// elision comes first.
func matchOutput(shown, golden []string) error {
	var runs [][]string
	startFree := false
	cur := []string{}
	for i, l := range shown {
		if t := strings.TrimSpace(l); t == "…" || t == "..." {
			if i == 0 {
				startFree = true
			}
			if len(cur) > 0 {
				runs = append(runs, cur)
			}
			cur = []string{}
			continue
		}
		cur = append(cur, l)
	}
	if len(cur) > 0 {
		runs = append(runs, cur)
	}
	at := 0
	for r, run := range runs {
		found := -1
		for start := at; start+len(run) <= len(golden); start++ {
			if linesMatch(run, golden[start:start+len(run)]) {
				found = start
				break
			}
			if r == 0 && !startFree {
				break
			}
		}
		if found < 0 {
			return fmt.Errorf("no run of golden lines from line %d on is %q", at+1, run)
		}
		at = found + len(run)
	}
	return nil
}

// linesMatch compares shown lines with golden ones, a golden placeholder standing for one word.
func linesMatch(shown, golden []string) bool {
	for i := range shown {
		parts := placeholder.Split(golden[i], -1)
		for j := range parts {
			parts[j] = regexp.QuoteMeta(parts[j])
		}
		if !regexp.MustCompile(`^` + strings.Join(parts, `[^\s/]+`) + `$`).MatchString(strings.TrimRight(shown[i], " ")) {
			return false
		}
	}
	return true
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func read(t *testing.T, root, path string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(path)))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// testSources is the text of every _test.go file of a folder.
func testSources(t *testing.T, dir string) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil || len(files) == 0 {
		t.Errorf("no test files in %s (%v)", dir, err)
		return ""
	}
	var b strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(data)
	}
	return b.String()
}
