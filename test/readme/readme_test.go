// Package readme holds the map from every command the README shows to the tests that run it. The tests
// themselves live with what they test; this package only checks that the map is whole and true.
package readme

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
)

// runBy is where a README command is run: a test, as `<package folder>.<TestName>` (subtests after a
// slash), and whether that test runs the command exactly as the README writes it (verbatim), or the same
// command on its own fixture (another namespace, name or image).
type runBy struct {
	tests    []string
	verbatim bool
}

// readmeCommands maps each command of the README's code blocks (`sh` lines, `$ ` lines of `console`
// blocks, the demo's try-next list) to where it runs. A verbatim command appears as a Go string in the
// package of its first test; the try-next list is the demo's own (TestREADMEShowsTryNext).
var readmeCommands = map[string]runBy{
	// Two commands.
	"make test": {tests: []string{"test/readme.TestCIRunsMakeTest"}},
	"make demo": {tests: []string{"test/demo.TestNoWait"}},

	// Install.
	"kubectl krew install --manifest=trainjob.yaml":                                                                      {tests: []string{"test/integration/krew.TestKrewRelease/validate-krew-manifest installs every platform built"}},
	"kubectl krew install --manifest=trainjob.yaml --archive=kubectl-trainjob_linux_amd64.tar.gz":                        {tests: []string{"test/integration/krew.TestKrewRelease/krew install from the archive, and run it"}},
	`cp "${KREW_ROOT:-$HOME/.krew}/store/trainjob/<version>/kubectl_complete-trainjob" "${KREW_ROOT:-$HOME/.krew}/bin/"`: {tests: []string{"test/integration/krew.TestKrewRelease/krew install from the archive, and run it", "test/integration/cli.TestCompletionShim"}},
	"kubectl trainjob version --client":                                                                                  {tests: []string{"test/e2e.TestREADMECommands", "test/integration/krew.TestKrewRelease"}, verbatim: true},
	"kubectl trainjob install":                                                                                           {tests: []string{"test/integration/install.TestInstallUninstall"}},
	"kubectl trainjob install -n training-system --image registry.example.com/kubectl-trainjob:v0.1.0":                   {tests: []string{"test/integration/install.TestInstallUninstall"}},
	"kubectl trainjob install -o yaml":                                                                                   {tests: []string{"test/e2e.TestREADMECommands"}, verbatim: true},

	// Demo.
	"make demo DEMO_ARGS=--no-wait":                          {tests: []string{"test/demo.TestNoWait"}},
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

	// Offline: render and describe-pipeline.
	"kubectl trainjob render -f trainjob.yaml --runtime torch-distributed.yaml": {tests: []string{"test/e2e.TestREADMECommands", "plugin/render.TestRenderExamples/trainjob-01-multi-node"}, verbatim: true},
	"kubectl trainjob render -f bad.yaml --runtime torch-distributed.yaml":      {tests: []string{"test/e2e.TestREADMECommands", "plugin/render.TestRenderBadInput"}, verbatim: true},

	// Create, logs, runtimes, version.
	"kubectl trainjob create llama --runtime torch-distributed --nodes 4 --gpus-per-node 8 --queue team-a -- torchrun train.py --lr 3e-4": {
		tests: []string{"test/e2e.TestREADMECommands", "test/integration/cli.TestCreate"}, verbatim: true},
	"kubectl trainjob create llama --runtime torch-distibuted": {tests: []string{"test/e2e.TestREADMECommands"}, verbatim: true},
	"kubectl trainjob create llama --runtime torch-distributed --resources-per-node cpu=four": {
		tests: []string{"test/e2e.TestREADMECommands", "test/integration/cli.TestCreate"}, verbatim: true},
	"kubectl trainjob logs llama -f":           {tests: []string{"test/e2e.TestREADMECommands", "test/integration/cli.TestLogs"}, verbatim: true},
	"kubectl trainjob runtimes":                {tests: []string{"test/e2e.TestREADMECommands", "test/integration/cli.TestRuntimes"}, verbatim: true},
	"kubectl trainjob version":                 {tests: []string{"test/e2e.TestREADMECommands", "test/integration/cli.TestVersion"}, verbatim: true},
	"kubectl trainjob list":                    {tests: []string{"test/e2e.TestREADMECommands", "test/integration/cli.TestList"}, verbatim: true},
	"kubectl trainjob status big":              {tests: []string{"test/integration/cli.TestStatus/Unschedulable"}},
	"kubectl trainjob wait oom --for=Complete": {tests: []string{"test/integration/cli.TestWait/failed-instead"}},
	"kubectl trainjob delete llama":            {tests: []string{"test/e2e.TestREADMECommands", "test/integration/cli.TestLifecycle/delete"}, verbatim: true},
}

// TestREADMECommandMap: every command the README shows is in readmeCommands, every entry there is still in
// the README, every test it names exists, and a verbatim command is written as it is in its test's package.
func TestREADMECommandMap(t *testing.T) {
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	shown := commands(string(data))
	if len(shown) < len(readmeCommands)/2 {
		t.Fatalf("found %d commands in README.md, fewer than expected: %q", len(shown), shown)
	}
	for _, c := range shown {
		if _, ok := readmeCommands[c]; !ok {
			t.Errorf("README.md shows %q, which no entry of readmeCommands maps to a test", c)
		}
	}
	for c, by := range readmeCommands {
		if !slices.Contains(shown, c) {
			t.Errorf("readmeCommands maps %q, which README.md no longer shows", c)
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
			if i == 0 && by.verbatim && !strings.Contains(src, strconv.Quote(c)) && !strings.Contains(src, "`"+c+"`") {
				t.Errorf("%q: verbatim, but not written as a Go string in %s", c, dir)
			}
		}
	}
}

// TestCIRunsMakeTest: `make test` is what CI runs (.ci/run), the suite that runs every test of the map.
func TestCIRunsMakeTest(t *testing.T) {
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^make test$`).Match(data) {
		t.Errorf(".ci/run does not run `make test`:\n%s", data)
	}
}

// commands are the commands of the README's code blocks: the lines of `sh` blocks that are not comments,
// the `$ ` lines of `console` blocks (a line ending in a backslash continues on the next), and the lines of
// `text` blocks that start with kubectl-trainjob or export (the demo's try-next list); each without its
// trailing comment. `echo $?` shows the exit code of the command before it and is left out.
func commands(readme string) []string {
	var out []string
	for _, m := range regexp.MustCompile("(?ms)^```(\\w*)\n(.*?)^```").FindAllStringSubmatch(readme, -1) {
		lang, lines := m[1], strings.Split(m[2], "\n")
		for i := 0; i < len(lines); i++ {
			line := lines[i]
			switch lang {
			case "sh":
				if strings.HasPrefix(strings.TrimSpace(line), "#") {
					continue
				}
			case "console":
				var ok bool
				if line, ok = strings.CutPrefix(line, "$ "); !ok {
					continue
				}
				for strings.HasSuffix(line, `\`) && i+1 < len(lines) {
					i++
					line = strings.TrimSuffix(line, `\`) + strings.TrimSpace(lines[i])
				}
			case "text":
				if l := strings.TrimSpace(line); !strings.HasPrefix(l, "kubectl-trainjob ") && !strings.HasPrefix(l, "export ") {
					continue
				}
			default:
				continue
			}
			line, _, _ = strings.Cut(line, "  #")
			line = strings.Join(strings.Fields(line), " ")
			if line != "" && line != "echo $?" && !slices.Contains(out, line) {
				out = append(out, line)
			}
		}
	}
	return out
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
