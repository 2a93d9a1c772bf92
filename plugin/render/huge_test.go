package render_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
)

// writeFile writes data into a file of the test's folder and returns its path.
func writeFile(t *testing.T, name, data string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRenderHugeTrainJob (issue 17, item 10): a 10 MiB `render -f` is a
// clear error, as the API server would refuse it, not 10 MiB copied into
// every pod template of the output.
func TestRenderHugeTrainJob(t *testing.T) {
	huge := strings.Repeat("x", 10<<20)
	doc := "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata: {name: huge}\n" +
		"spec:\n  runtimeRef: {name: torch-distributed}\n  trainer:\n    env: [{name: BLOB, value: " + huge + "}]\n"
	out, _, err := run(t, "", append([]string{"-f", writeFile(t, "huge.yaml", doc)}, runtimes...)...)
	if err == nil {
		t.Fatalf("render accepted a 10 MiB TrainJob; printed %d bytes", len(out))
	}
	if out != "" {
		t.Errorf("printed %d bytes despite the error", len(out))
	}
	if cmdutil.ExitCode(err) != cmdutil.ExitError {
		t.Errorf("exit code %d, want 1", cmdutil.ExitCode(err))
	}
	want := "huge.yaml: the document is 10.0 MiB, larger than the 3 MiB the API server accepts in a request"
	if !strings.HasSuffix(err.Error(), want) {
		t.Errorf("error %q, want one ending with %q", err, want)
	}
}

// TestRenderRuntimeOf1000ReplicatedJobs (issue 17, item 10): a runtime of
// 1000 replicated jobs renders one JobSet with all of them, each once, and
// an output that grows with the input, not faster.
func TestRenderRuntimeOf1000ReplicatedJobs(t *testing.T) {
	const n = 1000
	jobs := make([]map[string]any, n)
	for i := range jobs {
		name := "node"
		if i > 0 {
			name = fmt.Sprintf("extra-%d", i)
		}
		jobs[i] = map[string]any{"name": name, "template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
			"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "node", "image": "pytorch/pytorch"}}}}}}}
		if i > 0 {
			delete(jobs[i]["template"].(map[string]any), "metadata")
		}
	}
	rt, err := json.Marshal(map[string]any{
		"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime", "metadata": map[string]any{"name": "wide"},
		"spec": map[string]any{"mlPolicy": map[string]any{"numNodes": 1, "torch": map[string]any{}}, "template": map[string]any{"spec": map[string]any{"replicatedJobs": jobs}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	tj := "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata: {name: wide}\nspec: {runtimeRef: {name: wide}}\n"
	out, stderr, err := run(t, "", "-f", writeFile(t, "trainjob.yaml", tj), "--runtime", writeFile(t, "runtime.json", string(rt)), "-o", "json")
	if err != nil {
		t.Fatalf("render: %v\n%s", err, stderr)
	}
	var list struct {
		Items []struct {
			Kind string `json:"kind"`
			Spec struct {
				ReplicatedJobs []struct {
					Name string `json:"name"`
				} `json:"replicatedJobs"`
			} `json:"spec"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("output is not a JSON list: %v", err)
	}
	var jobSets int
	for _, item := range list.Items {
		if item.Kind != "JobSet" {
			continue
		}
		jobSets++
		seen := map[string]bool{}
		for _, rj := range item.Spec.ReplicatedJobs {
			if seen[rj.Name] {
				t.Errorf("replicated job %s twice", rj.Name)
			}
			seen[rj.Name] = true
		}
		if len(seen) != n {
			t.Errorf("the JobSet has %d replicated jobs, want %d", len(seen), n)
		}
	}
	if jobSets != 1 {
		t.Errorf("%d JobSets rendered, want 1", jobSets)
	}
	// Each replicated job gains what the plugins add (env, labels, …), a
	// constant amount: the output stays within a fixed multiple of the input.
	if limit := 20 * len(rt); len(out) > limit {
		t.Errorf("rendered %d bytes from a %d-byte runtime, want at most %d", len(out), len(rt), limit)
	}
}
