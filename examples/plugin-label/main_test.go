package main_test

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubectl-trainjob/kubectl-trainjob/examples/plugin-label/podlabel"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/golden"
)

// TestBinaryWithPodLabel builds the example's binary, as a platform team
// would, and runs a TrainJob through its pipeline offline: render prints
// the trainer pods with PodLabel's label and env var, describe-pipeline
// shows PodLabel at EnforcePodSpec, and the operator's configuration turns
// it off.
func TestBinaryWithPodLabel(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "plugin-label")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	run := func(t *testing.T, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), bin, args...)
		// No cluster: render and describe-pipeline -f need none.
		cmd.Env = append(cmd.Environ(), "KUBECONFIG="+filepath.Join(t.TempDir(), "none"))
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return stdout.String()
	}
	inputs := []string{"-f", "testdata/trainjob.yaml", "--runtime", "testdata/runtime.yaml"}

	t.Run("render", func(t *testing.T) {
		out := run(t, append([]string{"render"}, inputs...)...)
		golden.Assert(t, "testdata/render.golden.yaml", []byte(out))
		for _, want := range []string{podlabel.Label + ": fine-tune", "name: " + podlabel.Env} {
			if !strings.Contains(out, want) {
				t.Errorf("render printed no %q", want)
			}
		}
	})
	t.Run("describe-pipeline", func(t *testing.T) {
		out := run(t, "describe-pipeline", "-f", "testdata/trainjob.yaml", "--runtime-file", "testdata/runtime.yaml")
		golden.Assert(t, "testdata/describe-pipeline.golden.txt", []byte(out))
	})
	t.Run("disabled by the operator's configuration", func(t *testing.T) {
		out := run(t, append([]string{"render", "--config", "testdata/disabled.yaml"}, inputs...)...)
		golden.Assert(t, "testdata/render-disabled.golden.yaml", []byte(out))
		if strings.Contains(out, podlabel.Label) || strings.Contains(out, podlabel.Env) {
			t.Errorf("PodLabel ran although the configuration disables it:\n%s", out)
		}
	})
}
