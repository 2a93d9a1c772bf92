package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/stack"
)

// readmeCommand is a command the README shows, run as it is written, and what it must do there.
type readmeCommand struct {
	// command is the README's command line; `kubectl trainjob` runs the binary under test, as kubectl does.
	command string
	code    int
	// stdout and stderr match what the command prints (regular expressions); empty checks nothing.
	stdout, stderr string
	// answer is typed on the terminal the command gets as its standard input.
	answer string
}

// readmeCommands are the commands of the README and docs/ that run on this cluster as they are written, in the
// order they must run, with a user's first mistakes (a misspelt runtime, a quantity that is not one, a TrainJob
// the CRD refuses). They run in a folder that holds the files the render and describe-pipeline examples name:
// trainjob.yaml (the reference example 01), bad.yaml (numProcPerNode 0), and torch-distributed.yaml and
// runtime.yaml (the shipped runtime). The first create makes llama (4 × 8 GPUs), `logs -f` follows it to its
// end, and `delete` removes it. TestCommandMap (test/readme) holds each command the documents show and the tests
// that run it, and fails when one it marks verbatim to this test is not here.
var readmeCommands = []readmeCommand{
	{command: "kubectl trainjob render -f trainjob.yaml --runtime torch-distributed.yaml",
		stdout: `(?m)^kind: JobSet\n(.*\n)*  name: multi-node-example\n(.*\n)*              - name: PET_NNODES\n                value: "3"\n`},
	{command: "kubectl trainjob render -f bad.yaml --runtime torch-distributed.yaml", code: 1,
		stderr: `^error: bad\.yaml: TrainJob\.trainer\.kubeflow\.org "bad" is invalid: spec\.trainer\.numProcPerNode: Invalid value: 0: numProcPerNode must be greater than or equal to 1\n$`},
	{command: "kubectl trainjob describe-pipeline -f trainjob.yaml --runtime-file runtime.yaml",
		stdout: `^TrainJob: +\S+/multi-node-example\nRuntime: +ClusterTrainingRuntime/torch-distributed \(torch\)\n`},
	{command: "kubectl trainjob completion bash", stdout: `^# bash completion V2 for kubectl-trainjob `},
	{command: "kubectl trainjob create bad --runtime no-such-runtime", code: 1,
		stderr: `^error: clustertrainingruntime "no-such-runtime" not found; list runtimes with: kubectl trainjob runtimes\n$`},
	// Before llama exists: the server's dry run, then what fits of it now, which the other tests' pods change.
	{command: "kubectl trainjob create llama --runtime torch-distributed --nodes 4 --gpus-per-node 8 --dry-run=server",
		stdout: `^trainjob\.trainer\.kubeflow\.org/llama created \(server dry run\)\n\nTrainJob \S+/llama `},
	{command: "kubectl trainjob create llama --runtime torch-distributed --nodes 4 --gpus-per-node 8 --queue team-a -- torchrun train.py --lr 3e-4",
		stdout: `^trainjob\.trainer\.kubeflow\.org/llama created\n$`},
	{command: "kubectl trainjob create llama --runtime torch-distibuted", code: 1,
		stderr: `^error: clustertrainingruntime "torch-distibuted" not found; list runtimes with: kubectl trainjob runtimes\n$`},
	{command: "kubectl trainjob create llama --runtime torch-distributed --resources-per-node cpu=four", code: 1,
		stderr: `^error: invalid --resources-per-node "cpu=four": cpu=four: "four" is not a quantity; write it as --resources-per-node cpu=4,memory=16Gi,nvidia\.com/gpu=8\n$`},
	// llama's pods write nothing of their own: rank 0 shows the simulated container's one line.
	{command: "kubectl trainjob logs llama -f",
		stdout: `^simulated container started \(KWOK\); this pod has no log lines of its own\n$`},
	{command: "kubectl trainjob status llama", stdout: `(?m)^Name: +llama\n(.*\n)*^Stage: +Complete`},
	{command: "kubectl trainjob rerun llama --dry-run=client -o yaml", stdout: `(?m)^kind: TrainJob\n(.*\n)*^  name: llama-rerun-1\n`},
	{command: "kubectl trainjob runtimes",
		stdout: `(?m)^NAME +KIND +FRAMEWORK +POLICY +NODES +GPUS +AGE\n(.*\n)*deepspeed-distributed +ClusterTrainingRuntime +deepspeed +mpi +1 +- +\S+\n(.*\n)*torch-distributed +ClusterTrainingRuntime +torch +torch +1 +- +\S+\n`},
	{command: "kubectl trainjob version", stdout: `^Client Version: \S+ \(commit \S+\)\nOperator Version: `},
	{command: "kubectl trainjob version --client", stdout: `^Client Version: \S+ \(commit \S+\)\n$`},
	{command: "kubectl trainjob install -o yaml", stdout: `(?m)^kind: CustomResourceDefinition$(.*\n)*^kind: Deployment$`},
	{command: "kubectl trainjob list",
		stdout: `^NAME +STAGE +RUNTIME +NODES +GPUS +AGE\nllama +Complete +torch-distributed +4 +32 +\S+\n$`},
	{command: "kubectl trainjob delete llama", answer: "y\n",
		stdout: `(?s)These TrainJobs in namespace "\S+" will be deleted with what they own \(--cascade=background\):\n  trainjob/llama \(Complete\): jobset/llama, .*Delete 1 TrainJob\? \[y/N\]: trainjobs\.trainer\.kubeflow\.org "llama" deleted\n$`},
	// The README's GPUs section: llama again, its GPUs claimed through DRA from a template of its own, which
	// delete names with it.
	{command: "kubectl trainjob create llama --runtime torch-distributed --nodes 2 --gpus-per-node 8 --gpu-claim -- torchrun train.py",
		stdout: `^resourceclaimtemplate\.resource\.k8s\.io/llama-gpu created\ntrainjob\.trainer\.kubeflow\.org/llama created\n$`},
	{command: "kubectl trainjob delete llama", answer: "y\n",
		stdout: `(?s)  trainjob/llama \(\w+\): .*resourceclaimtemplate/llama-gpu\n.*"llama" deleted\n$`},
}

// TestREADMECommands runs the README's commands as they are written, in a namespace of their own (the
// kubeconfig's context names it), and checks their exit codes and what they print.
func TestREADMECommands(t *testing.T) {
	t.Parallel()
	useGPUs(t)
	ns := cluster.NewNamespace(t, suite.client, "e2e-", diagnose)
	kubeconfig := namespacedKubeconfig(t, ns)
	dir := t.TempDir()
	for name, from := range map[string]string{
		"trainjob.yaml":          example("trainjob-01-multi-node.yaml"),
		"torch-distributed.yaml": filepath.Join(suite.repo, "config", "runtimes", "torch_distributed.yaml"),
		"runtime.yaml":           filepath.Join(suite.repo, "config", "runtimes", "torch_distributed.yaml"),
	} {
		data, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bad := "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata: {name: bad}\nspec: {runtimeRef: {name: torch-distributed}, trainer: {numProcPerNode: 0}}\n"
	if err := os.WriteFile(filepath.Join(dir, "bad.yaml"), []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range readmeCommands {
		args, ok := strings.CutPrefix(c.command, "kubectl trainjob ")
		if !ok {
			t.Fatalf("%q is not a kubectl trainjob command", c.command)
		}
		ctx, cancel := context.WithTimeout(t.Context(), runTimeout)
		cmd, stdout, stderr := command(ctx, strings.Fields(args)...)
		cmd.Env, cmd.Dir = append(cmd.Env, "KUBECONFIG="+kubeconfig), dir
		closeTerminal := func() {}
		if c.answer != "" {
			var err error
			if closeTerminal, err = stack.AnswerOnTerminal(cmd, c.answer); err != nil {
				t.Fatal(err)
			}
		}
		err := cmd.Run()
		closeTerminal()
		cancel()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatalf("%s: %v\nstderr:\n%s", c.command, err, stderr)
		}
		r := cliResult{args: strings.Fields(args), stdout: stdout.String(), stderr: stderr.String(), code: cmd.ProcessState.ExitCode()}
		var problems []string
		if r.code != c.code {
			problems = append(problems, fmt.Sprintf("exit code %d, want %d", r.code, c.code))
		}
		for _, out := range []struct{ name, got, want string }{{"stdout", r.stdout, c.stdout}, {"stderr", r.stderr, c.stderr}} {
			if out.want != "" && !regexp.MustCompile(out.want).MatchString(out.got) {
				problems = append(problems, fmt.Sprintf("%s does not match %s", out.name, out.want))
			}
		}
		if problems != nil {
			t.Fatalf("$ %s: %s\n%v", c.command, strings.Join(problems, "; "), r)
		}
		out := strings.SplitAfter(r.stdout+r.stderr, "\n")
		t.Logf("$ %s\n%s", c.command, strings.Join(out[:min(len(out), 20)], ""))
	}
}

// namespacedKubeconfig is the administrator's kubeconfig with ns as the namespace of its context, for commands
// that, as the README writes them, name no namespace.
func namespacedKubeconfig(t *testing.T, ns string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(suite.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Contexts[cfg.CurrentContext].Namespace = ns
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
