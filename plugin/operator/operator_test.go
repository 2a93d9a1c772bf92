package operator

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
)

const kubeconfig = `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`

// TestCompleteFlagsOverrideFile runs `operator` through the real root
// command: the kubectl flags reach the operator's client, and a flag given
// on the command line wins over the file.
func TestCompleteFlagsOverrideFile(t *testing.T) {
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	cf := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(kc, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cf, []byte(`
apiVersion: config.trainer.kubeflow.org/v1alpha1
kind: Configuration
namespace: from-file
webhook: {port: 9000}
clientConnection: {qps: 7}
featureGates: {TrainJobStatus: true}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	streams := cmdutil.Streams{In: &bytes.Buffer{}, Out: &out, ErrOut: &out}
	ran := false
	adder := func(f cmdutil.Factory, streams cmdutil.Streams) *cobra.Command {
		cmd, o := newCommand(pipeline.Registry{}, f, streams)
		// Parse without running: Complete and Validate are what RunE calls first, and Run connects with the
		// factory's REST config.
		cmd.RunE = func(c *cobra.Command, args []string) error {
			ran = true
			if err := o.Complete(f, c, args); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			rc, err := o.factory.ToRESTConfig()
			if err != nil {
				return err
			}
			cfg := o.cfg
			got := map[string]any{
				"namespace": cfg.Namespace, "webhookPort": *cfg.Webhook.Port, "qps": *cfg.ClientConnection.QPS,
				"leaderElect": *cfg.LeaderElection.LeaderElect, "TrainJobStatus": cfg.FeatureGates["TrainJobStatus"],
				"server": rc.Host, "webhooks": *cfg.Webhook.Enable,
			}
			want := map[string]any{
				"namespace": "from-file", "webhookPort": int32(9555), "qps": float32(7),
				"leaderElect": false, "TrainJobStatus": false, "server": "https://127.0.0.1:6443", "webhooks": false,
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			return nil
		}
		return cmd
	}
	root := plugin.NewRootCommand(cmdutil.NewFactory(), streams, adder)
	root.SetArgs([]string{"operator", "--kubeconfig=" + kc, "--config=" + cf, "--webhook-port=9555", "--leader-elect=false",
		"--feature-gates=TrainJobStatus=false", "--webhooks=false", "--zap-log-level=debug"})
	if err := root.Execute(); err != nil || !ran {
		t.Fatalf("ran %v, error %v\n%s", ran, err, out.String())
	}
}
