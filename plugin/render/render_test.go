package render_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/yaml"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/optimization"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/optimization/search"

	"github.com/kubectl-trainjob/kubectl-trainjob/plugin"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/render"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/golden"
)

var runtimes = []string{
	"--runtime", "testdata/examples/cluster-runtime-torch-distributed.yaml",
	"--runtime", "testdata/examples/cluster-runtime-deepspeed-distributed-mpi.yaml",
	"--runtime", "testdata/examples/cluster-runtime-torchtune-llama3.2-1b.yaml",
	"--runtime", "testdata/examples/cluster-runtime-flux-distributed.yaml",
}

// run runs `kubectl trainjob render ARGS` with no kubeconfig: render needs
// no cluster.
func run(t *testing.T, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
	var out, errOut bytes.Buffer
	streams := genericiooptions.IOStreams{In: strings.NewReader(stdin), Out: &out, ErrOut: &errOut}
	root := plugin.NewRootCommand(cmdutil.NewFactory(), streams, render.NewCmd(nil))
	root.SetArgs(append([]string{"render"}, args...))
	err = root.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

func TestRenderExamples(t *testing.T) {
	for _, name := range []string{
		"trainjob-01-multi-node", "trainjob-02-runtime-patches", "trainjob-05-multi-step-fixed",
		"trainjob-06-deepspeed", "trainjob-07-torchtune", "trainjob-08-flux-lammps",
	} {
		t.Run(name, func(t *testing.T) {
			out, stderr, err := run(t, "", append([]string{"-f", "testdata/examples/" + name + ".yaml"}, runtimes...)...)
			if err != nil {
				t.Fatalf("render: %v\n%s", err, stderr)
			}
			golden.Assert(t, "testdata/"+name+".golden.yaml", []byte(out))
		})
	}
}

func TestRenderJSONFromStdin(t *testing.T) {
	out, stderr, err := run(t, `{"apiVersion":"trainer.kubeflow.org/v1alpha1","kind":"TrainJob","metadata":{"name":"j"},"spec":{"runtimeRef":{"name":"torch-distributed"}}}`,
		append([]string{"-f", "-", "-o", "json", "-n", "team-a"}, runtimes...)...)
	if err != nil {
		t.Fatalf("render: %v\n%s", err, stderr)
	}
	golden.Assert(t, "testdata/stdin-json.golden.json", []byte(out))
}

func TestRenderShowSecrets(t *testing.T) {
	args := append([]string{"-f", "testdata/examples/trainjob-06-deepspeed.yaml"}, runtimes...)
	redacted, _, err := run(t, "", args...)
	if err != nil {
		t.Fatal(err)
	}
	shown, _, err := run(t, "", append(args, "--show-secrets")...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(redacted, "ssh-privatekey: <redacted>") {
		t.Errorf("secret data not redacted by default:\n%s", redacted)
	}
	if strings.Contains(shown, "<redacted>") || !strings.Contains(shown, "ssh-privatekey: ") {
		t.Errorf("--show-secrets did not show the key:\n%s", shown)
	}
}

func TestRenderBadInput(t *testing.T) {
	const header = "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata: {name: bad}\n"
	cases := []struct {
		name  string
		input string
	}{
		{"unknown field", header + "spec: {runtimeRef: {name: torch-distributed}, trainer: {numNode: 2}}\n"},
		{"runtime not among the given files", header + "spec: {runtimeRef: {name: missing-runtime}}\n"},
		{"namespaced runtime not given", header + "spec: {runtimeRef: {name: torch-distributed, kind: TrainingRuntime}}\n"},
		{"CEL rule of the CRD", header + "spec: {runtimeRef: {name: torch-distributed}, trainer: {numProcPerNode: 0}}\n"},
		{"schema minimum", header + "spec: {runtimeRef: {name: torch-distributed}, trainer: {numNodes: -1}}\n"},
		{"name too long", "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata: {name: " + strings.Repeat("a", 64) + "}\nspec: {runtimeRef: {name: torch-distributed}}\n"},
		{"name leaving no room for pod names", "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata: {name: " + strings.Repeat("a", 60) + "}\nspec: {runtimeRef: {name: torch-distributed}}\n"},
		{"reserved env refused by the Torch plugin", header + "spec: {runtimeRef: {name: torch-distributed}, trainer: {env: [{name: PET_NNODES, value: \"9\"}]}}\n"},
		{"patch of a replicated job the runtime lacks", header + "spec:\n  runtimeRef: {name: torch-distributed}\n  runtimePatches:\n  - manager: example.com/x\n    trainingRuntimeSpec: {template: {spec: {replicatedJobs: [{name: workers}]}}}\n"},
		{"not YAML", "kind: [\n"},
		// Upstream's example 05 as shipped: its dataset-initializer does not
		// mount the initializer volume, which upstream's webhook requires.
		{"upstream example 05 as shipped", mustRead(t, "testdata/examples/trainjob-05-multi-step.yaml")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := run(t, tc.input, append([]string{"-f", "-"}, runtimes...)...)
			if err == nil {
				t.Fatalf("render accepted bad input; printed:\n%s", out)
			}
			if out != "" {
				t.Errorf("printed objects despite the error:\n%s", out)
			}
			if cmdutil.ExitCode(err) != cmdutil.ExitError {
				t.Errorf("exit code %d, want 1", cmdutil.ExitCode(err))
			}
			golden.Assert(t, "testdata/errors/"+strings.ReplaceAll(tc.name, " ", "-")+".golden.txt", []byte(err.Error()+"\n"))
		})
	}
}

// TestRenderWithTheOperatorsConfiguration: render builds the operator's
// pipeline for the operator's configuration file and feature gates.
func TestRenderWithTheOperatorsConfiguration(t *testing.T) {
	cases := []struct {
		name string
		args []string
	}{
		{"TrainJobStatus gate", []string{"-f", "testdata/config/webhook-cert.yaml", "--config", "testdata/config/operator.yaml", "--feature-gates", "TrainJobStatus=true"}},
		{"plugins disabled", []string{"--config", "testdata/config/plugins.yaml"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := append(append([]string{"-f", "testdata/examples/trainjob-01-multi-node.yaml"}, tc.args...), runtimes...)
			out, stderr, err := run(t, "", args...)
			if err != nil {
				t.Fatalf("render: %v\n%s", err, stderr)
			}
			golden.Assert(t, "testdata/config/"+strings.ReplaceAll(tc.name, " ", "-")+".golden.yaml", []byte(out))
		})
	}
}

// TestRenderBadConfiguration: a configuration the operator would refuse,
// render refuses with the same words.
func TestRenderBadConfiguration(t *testing.T) {
	cases := []struct {
		name string
		args []string
	}{
		{"TrainJobStatus gate without the webhook Secret", []string{"--config", "testdata/config/operator.yaml", "--feature-gates", "TrainJobStatus=true"}},
		{"unknown plugin", []string{"--config", "testdata/config/unknown-plugin.yaml"}},
		{"unknown feature gate", []string{"--feature-gates", "Teleport=true"}},
		{"missing configuration file", []string{"--config", "testdata/config/none.yaml"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := append(append([]string{"-f", "testdata/examples/trainjob-01-multi-node.yaml"}, tc.args...), runtimes...)
			out, _, err := run(t, "", args...)
			if err == nil {
				t.Fatalf("render accepted a bad configuration; printed:\n%s", out)
			}
			if out != "" {
				t.Errorf("printed objects despite the error:\n%s", out)
			}
			golden.Assert(t, "testdata/errors/"+strings.ReplaceAll(tc.name, " ", "-")+".golden.txt", []byte(err.Error()+"\n"))
		})
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestRenderTrial: render of a trial of an OptimizationJob, as its controller makes it (optimization.NewTrial),
// shows what the controller injected: its KUBEFLOW_TRAINER_OPT_* env in the trainer's container of the JobSet.
// (The assignment's annotation is the TrainJob's, which render does not print: describe-pipeline shows it.)
func TestRenderTrial(t *testing.T) {
	oj := &trainer.OptimizationJob{
		ObjectMeta: metav1.ObjectMeta{Name: "sweep", Namespace: "default", UID: "uid-sweep"},
		Spec: trainer.OptimizationJobSpec{TrainJobTemplate: trainer.TrainJobTemplateSpec{Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{Name: "torch-distributed"},
			Trainer:    &trainer.Trainer{Command: []string{"python", "train.py"}},
		}}},
	}
	trial, err := optimization.NewTrial(oj, 3, search.Assignment{{Name: "lr", Value: "0.003"}, {Name: "batch_size", Value: "32"}})
	if err != nil {
		t.Fatal(err)
	}
	data, err := yaml.Marshal(trial)
	if err != nil {
		t.Fatal(err)
	}
	out, stderr, err := run(t, string(data), append([]string{"-f", "-"}, runtimes...)...)
	if err != nil {
		t.Fatalf("render: %v\n%s", err, stderr)
	}
	golden.Assert(t, "testdata/trial.golden.yaml", []byte(out))
	for _, want := range []string{`name: KUBEFLOW_TRAINER_OPT_LR\s+value: "0.003"`, `name: KUBEFLOW_TRAINER_OPT_BATCH_SIZE\s+value: "32"`} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("the rendered JobSet lacks %s", want)
		}
	}
}
