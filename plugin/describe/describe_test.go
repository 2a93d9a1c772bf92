package describe_test

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"

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
