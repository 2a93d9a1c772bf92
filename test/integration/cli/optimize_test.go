package cli

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/create"
)

// optimizeRuntime is the ClusterTrainingRuntime the OptimizationJobs' trials run on.
const optimizeRuntime = "optimize-test-torch"

// TestOptimization: optimize makes OptimizationJobs from flags and from a file and refuses a bad search before
// anything is sent, naming the flag; no controller runs, as on a cluster without one.
func TestOptimization(t *testing.T) {
	c, f := newFixture(t)
	cl, ns := f.c, f.ns
	ensureClusterRuntime(t, cl, optimizeRuntime)
	kube := kubeArgs(c, ns)
	cmd := []plugin.CommandAdder{create.NewCmdOptimize}
	n := Normalizer{Replace: map[string]string{ns: "<ns>"}}
	optimizeArgs := func(name string, more ...string) []string {
		return slices.Concat(kube, []string{"optimize", name, "--runtime", optimizeRuntime, "--image", "ghcr.io/example/sgd:1.0",
			"--param", "lr=loguniform:1e-5,1e-2", "--param", "batch=categorical:16,32,64", "--objective", "val_loss:min",
			"--trials", "20", "--parallel", "4", "--seed", "7", "--label", "team=nlp"}, more, []string{"--", "python", "train.py"})
	}

	var dryRun *trainer.OptimizationJob
	t.Run("optimize-dry-run-client", func(t *testing.T) {
		res := Run(t, "", cmd, optimizeArgs("sweep", "--dry-run=client", "-o", "yaml")...)
		AssertGolden(t, "optimize/dry-run-client", n.Normalize(res.String()))
		dryRun = &trainer.OptimizationJob{}
		if err := yaml.Unmarshal([]byte(res.Stdout), dryRun); err != nil {
			t.Fatal(err)
		}
		if err := cl.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "sweep"}, &trainer.OptimizationJob{}); err == nil {
			t.Error("--dry-run=client created the OptimizationJob")
		}
	})
	t.Run("optimize", func(t *testing.T) {
		AssertGolden(t, "optimize/flags", n.Normalize(Run(t, "", cmd, optimizeArgs("sweep")...).String()))
		got := &trainer.OptimizationJob{}
		if err := cl.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "sweep"}, got); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(dryRun.Spec.Parameters, got.Spec.Parameters); diff != "" {
			t.Errorf("created parameters differ from the dry run's (-dry run +created):\n%s", diff)
		}
	})
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"dry-run-server", optimizeArgs("sweep-2", "--dry-run=server")},
		{"file", withArgs(kube, "optimize", "-f", filepath.Join("testdata", "optimize", "optimizationjob.yaml"), "-o", "name")},
		{"error-param-syntax", optimizeArgs("bad", "--param", "dropout=uniform:0.5")},
		{"error-param-bounds", optimizeArgs("bad", "--param", "dropout=uniform:0.5,0.1")},
		{"error-grid-continuous", optimizeArgs("bad", "--algorithm", "grid")},
		{"error-no-objective", withArgs(kube, "optimize", "bad", "--runtime", optimizeRuntime, "--param", "lr=uniform:0,1")},
		{"error-runtime", withArgs(kube, "optimize", "bad", "--runtime", "nope", "--param", "lr=uniform:0,1", "--objective", "loss")},
		{"error-exists", optimizeArgs("sweep")},
		{"error-file-and-param", withArgs(kube, "optimize", "-f", filepath.Join("testdata", "optimize", "optimizationjob.yaml"), "--param", "lr=uniform:0,1")},
		{"error-file-is-trainjob", withArgs(kube, "optimize", "-f", filepath.Join("testdata", "create", "trainjob.yaml"))},
	} {
		t.Run("optimize-"+tc.name, func(t *testing.T) {
			AssertGolden(t, "optimize/"+tc.name, n.Normalize(Run(t, "", cmd, tc.args...).String()))
		})
	}
	if err := cl.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "bad"}, &trainer.OptimizationJob{}); err == nil {
		t.Error("a refused optimize created the OptimizationJob bad")
	}
}
