package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/stack"
)

// demoTimeout is the demo's deadline in the test: the demo's default, which a busy machine needs.
const demoTimeout = defaultTimeout

// TestNoWait runs the demo as `make demo DEMO_ARGS=--no-wait` does, on a cluster of its own: the sample
// TrainJob is followed through the stages Initializing, Training and Complete, in that order, as `status -w`
// prints them; then every command of the "try next" list that `make demo` prints is run against the same
// cluster, and everything stops.
func TestNoWait(t *testing.T) {
	dir := t.TempDir()
	binary, err := stack.Binary(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	out := &syncBuffer{}
	err = run(t.Context(), options{noWait: true, timeout: demoTimeout, binary: binary, dir: dir, out: out,
		then: func(ctx context.Context, env []string) error {
			tryNext(t, ctx, binary, dir, env)
			return nil
		}})
	t.Logf("demo output:\n%s", out)
	if err != nil {
		t.Fatal(err)
	}
	if err := stagesInOrder(out.String()); err != nil {
		t.Error(err)
	}
	if !strings.Contains(out.String(), "\nTrainJob default/demo is Complete, ") {
		t.Errorf("the demo's output does not say that the TrainJob is Complete")
	}
}

// stageLine is a line `status -w` prints off a terminal for a change of stage (`16:23:26  +7s  Training
// running node (4/4 pods running)`) or a condition (`… Complete=True  AllJobsCompleted: …`): time, time since
// creation, then what changed. The demo's own progress lines (`==> [3] Applying the TrainingRuntime …`) are not.
var stageLine = regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d  \+\S+ +(\S+)  `)

// stagesInOrder checks that the demo's output has stage lines for Initializing, Training and Complete=True,
// each first seen after the one before.
func stagesInOrder(out string) error {
	first := map[string]int{}
	for i, m := range stageLine.FindAllStringSubmatch(out, -1) {
		if _, ok := first[m[1]]; !ok {
			first[m[1]] = i
		}
	}
	prev := ""
	for _, want := range []string{"Initializing", "Training", "Complete=True"} {
		i, ok := first[want]
		switch {
		case !ok:
			return fmt.Errorf("status -w printed no %s line (stage lines: %v)", want, stageLine.FindAllString(out, -1))
		case prev != "" && i < first[prev]:
			return fmt.Errorf("status -w printed %s before %s (stage lines: %v)", want, prev, stageLine.FindAllString(out, -1))
		}
		prev = want
	}
	return nil
}

// TestStagesInOrder: the demo test's stage check fails on what it must fail on.
func TestStagesInOrder(t *testing.T) {
	const (
		progress     = "==> [3] Applying the TrainingRuntime test/demo/runtime.yaml: Initializing, Training\n"
		initializing = "16:23:21  +2s       Initializing  running dataset-initializer (1/1 pods running)\n"
		training     = "16:23:26  +7s       Training  running node (4/4 pods running)\n"
		complete     = "16:23:34  +15s      Complete=True  AllJobsCompleted: jobset completed successfully\n"
	)
	for _, tc := range []struct {
		name, out string
		ok        bool
	}{
		{"every stage in order", progress + initializing + training + complete, true},
		{"stage names in progress lines only", progress + initializing + complete, false},
		{"Training after Complete", progress + initializing + complete + training, false},
		{"no Complete", progress + initializing + training, false},
	} {
		if err := stagesInOrder(tc.out); (err == nil) != tc.ok {
			t.Errorf("%s: stagesInOrder = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

// tryNextChecks says, for each command of the "try next" list, what shows that it did what its comment
// promises. A command it does not list fails the test: each one added to the list must say what it shows.
var tryNextChecks = map[string]func(stdout string) error{
	"kubectl-trainjob list":                                  matches(`(?m)^demo +Complete `),
	"kubectl-trainjob status demo":                           contains("Stage:       Complete", "Pipeline:", "Timeline:"),
	"kubectl-trainjob logs demo --rank all":                  contains("[rank 0] torchrun", "[rank 3] torchrun"),
	"kubectl-trainjob logs demo --stage dataset-initializer": contains("Downloading dataset hf://tatsu-lab/alpaca"),
	"kubectl-trainjob describe-pipeline demo":                contains("EnforceMLPolicy", "Torch"),
	"kubectl-trainjob create llama --runtime torch-distributed --nodes 2 --gpus-per-node 8 -- torchrun train.py": contains(
		"trainjob.trainer.kubeflow.org/llama created"),
	"kubectl-trainjob wait llama --for=Complete": contains("trainjob.trainer.kubeflow.org/llama Complete"),
	"kubectl-trainjob status llama":              matches(`Stage: +Complete`, `llama-node-0-0-\S+ +node +0 +gpu-node-\d`, `llama-node-0-1-\S+ +node +1 +gpu-node-\d`),
	"kubectl-trainjob create too-big --runtime torch-distributed --nodes 2 --gpus-per-node 16": contains(
		"trainjob.trainer.kubeflow.org/too-big created"),
	// The scheduler says why once it has tried: the command is run until it does.
	"kubectl-trainjob status too-big": matches(`Stage: +Pending: 2 pods unschedulable: 0/6 nodes are available: 6 Insufficient nvidia\.com/gpu`),
	"kubectl-trainjob delete too-big": contains(`trainjobs.trainer.kubeflow.org "too-big" deleted`),
}

// untilOK are the commands of the list whose output depends on when they run: they are run again until
// their check passes.
var untilOK = map[string]bool{"kubectl-trainjob status too-big": true}

// tryNext runs every command of the "try next" list that `make demo` prints, as printed, with the
// environment it tells the user to export, and checks what each prints. `delete` asks before it deletes:
// it gets a terminal, and the answer y.
func tryNext(t *testing.T, ctx context.Context, binary, dir string, env []string) {
	t.Helper()
	var list bytes.Buffer
	printNext(&list, binary, filepath.Join(dir, "kubeconfig"), filepath.Join(dir, "logs"))
	ran := 0
	for _, line := range strings.Split(list.String(), "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "kubectl-trainjob ") {
			continue
		}
		command, _, _ := strings.Cut(line, "  #")
		command = strings.TrimSpace(command)
		check, ok := tryNextChecks[command]
		if !ok {
			t.Errorf("the try-next command %q has no check in tryNextChecks", command)
			continue
		}
		ran++
		var stdout string
		var checkErr error
		err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
			var err error
			if stdout, err = runCommand(ctx, binary, env, strings.Fields(command)[1:]); err != nil {
				return false, err
			}
			checkErr = check(stdout)
			return checkErr == nil || !untilOK[command], nil
		})
		switch {
		case err != nil:
			t.Errorf("%s: %v\n%s", command, err, stdout)
		case checkErr != nil:
			t.Errorf("%s: %v\n%s", command, checkErr, stdout)
		default:
			t.Logf("$ %s\n%s", command, stdout)
		}
	}
	if ran == 0 {
		t.Errorf("found no command in the try-next list:\n%s", list.String())
	}
}

// runCommand runs the binary with args, its stdin a terminal on which the user has answered y.
func runCommand(ctx context.Context, binary string, env, args []string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(env, "NO_COLOR=1")
	closeTerminal, err := stack.AnswerOnTerminal(cmd, "y\n")
	if err != nil {
		return "", err
	}
	defer closeTerminal()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%w; stderr:\n%s", err, stderr.String())
	}
	return stdout.String(), nil
}

func contains(parts ...string) func(string) error {
	return func(out string) error {
		for _, p := range parts {
			if !strings.Contains(out, p) {
				return fmt.Errorf("the output lacks %q", p)
			}
		}
		return nil
	}
}

func matches(patterns ...string) func(string) error {
	return func(out string) error {
		for _, p := range patterns {
			if !regexp.MustCompile(p).MatchString(out) {
				return fmt.Errorf("the output does not match %s", p)
			}
		}
		return nil
	}
}

// syncBuffer is a bytes.Buffer that the demo's goroutines may write to at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestContributingShowsTryNext: CONTRIBUTING.md shows the "try next" list as the demo prints it, so the
// commands that TestNoWait runs are the ones it shows.
func TestContributingShowsTryNext(t *testing.T) {
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "CONTRIBUTING.md"))
	if err != nil {
		t.Fatal(err)
	}
	const intro = "Without `DEMO_ARGS=--no-wait` it then prints (and waits for Ctrl-C):\n\n```text\n"
	_, shown, ok := strings.Cut(string(doc), intro)
	if shown, _, ok = strings.Cut(shown, "```"); !ok {
		t.Fatalf("CONTRIBUTING.md has no block after %q", intro)
	}
	const clone = "/path/to/clone"
	var printed bytes.Buffer
	printNext(&printed, clone+"/bin/kubectl-trainjob", clone+"/bin/demo/kubeconfig", clone+"/bin/demo/logs")
	// CONTRIBUTING.md shows the lines from the exports to the last command.
	lines := strings.Split(printed.String(), "\n")
	first := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "  export ") })
	last := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "  kubectl-trainjob ") {
			last = i
		}
	}
	if first < 0 || last < first {
		t.Fatalf("the demo's try-next list has no exports or commands:\n%s", printed.String())
	}
	if diff := cmp.Diff(strings.Join(lines[first:last+1], "\n")+"\n", shown); diff != "" {
		t.Errorf("CONTRIBUTING.md's try-next list differs from what the demo prints (-demo +CONTRIBUTING.md):\n%s", diff)
	}
}
