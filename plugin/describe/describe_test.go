package describe_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/yaml"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/optimization"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/optimization/search"

	"github.com/kubectl-trainjob/kubectl-trainjob/plugin"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/describe"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/golden"
)

const examples = "../render/testdata/examples/"

func TestDescribePipelineOffline(t *testing.T) {
	cases := []struct {
		name, trainJob, runtime, output string
		args                            []string
	}{
		{name: "torch", trainJob: "trainjob-01-multi-node.yaml", runtime: "cluster-runtime-torch-distributed.yaml"},
		{name: "deepspeed", trainJob: "trainjob-06-deepspeed.yaml", runtime: "cluster-runtime-deepspeed-distributed-mpi.yaml"},
		{name: "torchtune-json", trainJob: "trainjob-07-torchtune.yaml", runtime: "cluster-runtime-torchtune-llama3.2-1b.yaml", output: "json"},
		{name: "refused-at-admission", trainJob: "trainjob-05-multi-step.yaml"},
		// The operator's configuration: its gate adds TrainJobStatus, its
		// plugins field takes Torch out of EnforceMLPolicy.
		{name: "operator-configuration", trainJob: "trainjob-01-multi-node.yaml", runtime: "cluster-runtime-torch-distributed.yaml",
			args: []string{"-f", "../render/testdata/config/webhook-cert.yaml", "--config", "testdata/config.yaml", "--feature-gates", "TrainJobStatus=true"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
			var out, errOut bytes.Buffer
			root := plugin.NewRootCommand(cmdutil.NewFactory(), genericiooptions.IOStreams{Out: &out, ErrOut: &errOut}, describe.NewCmd(nil))
			args := []string{"describe-pipeline", "-f", examples + tc.trainJob, "-o", tc.output}
			if tc.runtime != "" {
				args = append(args, "--runtime-file", examples+tc.runtime)
			}
			args = append(args, tc.args...)
			root.SetArgs(args)
			if err := root.ExecuteContext(context.Background()); err != nil {
				t.Fatalf("describe-pipeline: %v\n%s", err, errOut.String())
			}
			golden.Assert(t, "testdata/"+tc.name+".golden", out.Bytes())
		})
	}
}

func TestDescribePipelineNeedsOneSource(t *testing.T) {
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
	var out bytes.Buffer
	root := plugin.NewRootCommand(cmdutil.NewFactory(), genericiooptions.IOStreams{Out: &out, ErrOut: &out}, describe.NewCmd(nil))
	root.SetArgs([]string{"describe-pipeline", "-f", examples + "trainjob-01-multi-node.yaml", "--runtime", "x"})
	err := root.ExecuteContext(context.Background())
	if err == nil || err.Error() != "give exactly one of: a TrainJob NAME, --runtime RUNTIME, or -f FILE (with --runtime-file)" {
		t.Errorf("err = %v", err)
	}
}

// TestDescribePipelineTrial: describe-pipeline of a trial of an OptimizationJob, as its controller makes it
// (optimization.NewTrial), says whose trial it is and what the controller injected: the assignment of its
// annotation and the KUBEFLOW_TRAINER_OPT_* variables, which the JobSet plugin puts into the trainer's env.
func TestDescribePipelineTrial(t *testing.T) {
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
	oj := &trainer.OptimizationJob{
		ObjectMeta: metav1.ObjectMeta{Name: "sweep", Namespace: "default", UID: "uid-sweep"},
		Spec: trainer.OptimizationJobSpec{TrainJobTemplate: trainer.TrainJobTemplateSpec{Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{Name: "torch-distributed"},
			Trainer:    &trainer.Trainer{Command: []string{"python", "train.py"}, Env: []corev1.EnvVar{{Name: "EPOCHS", Value: "3"}}},
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
	file := filepath.Join(t.TempDir(), "trial.yaml")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, output := range []string{"", "json"} {
		t.Run("output="+output, func(t *testing.T) {
			var out, errOut bytes.Buffer
			root := plugin.NewRootCommand(cmdutil.NewFactory(), genericiooptions.IOStreams{Out: &out, ErrOut: &errOut}, describe.NewCmd(nil))
			root.SetArgs([]string{"describe-pipeline", "-f", file, "--runtime-file", examples + "cluster-runtime-torch-distributed.yaml", "-o", output})
			if err := root.ExecuteContext(context.Background()); err != nil {
				t.Fatalf("describe-pipeline: %v\n%s", err, errOut.String())
			}
			golden.Assert(t, "testdata/trial"+map[string]string{"": ".golden", "json": "-json.golden"}[output], out.Bytes())
		})
	}
}
