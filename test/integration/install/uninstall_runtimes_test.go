package install

import (
	"path/filepath"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
)

// TestUninstallKeepsWhatUsersMade: before the CRDs go, --uninstall names every TrainJob, OptimizationJob,
// TrainingRuntime and ClusterTrainingRuntime that goes with them — a shipped runtime someone edited too — and --keep-crds keeps
// every runtime a user created or changed (the shipped ones nobody touched go with the operator).
// The api profile is enough: nothing here waits for a pod (--wait=false).
func TestUninstallKeepsWhatUsersMade(t *testing.T) {
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	c := cluster.StartForTest(t, cluster.Options{Profile: cluster.ProfileAPI, CRDDirs: []string{filepath.Join(root, "test", "crds")}})
	api := newAPI(t, c)
	kube := []string{"--kubeconfig", c.KubeconfigPath}
	run(t, "", false, append(kube, "install", "-n", operatorNamespace, "--image", image, "--wait=false")...).expect(t, 0)
	want := expected(t, operatorNamespace, image)

	// No operator runs to answer the webhooks: without their configurations the objects below can be made.
	for _, u := range want {
		if u.GetKind() == "ValidatingWebhookConfiguration" || u.GetKind() == "MutatingWebhookConfiguration" {
			if err := api.resource(t, u).Delete(t.Context(), u.GetName(), metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, ns := range []string{"team-a", "team-b"} {
		create(t, api, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}})
	}
	trainJob := func(ns, name string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
			"metadata": map[string]any{"namespace": ns, "name": name},
			"spec":     map[string]any{"runtimeRef": map[string]any{"name": "torch-distributed"}},
		}}
	}
	for _, tj := range []*unstructured.Unstructured{trainJob("team-a", "llama"), trainJob("team-a", "mnist"), trainJob("team-b", "bert")} {
		create(t, api, tj)
	}
	sweep := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "OptimizationJob",
		"metadata": map[string]any{"namespace": "team-b", "name": "sweep"},
		"spec": map[string]any{
			"objectives": []any{map[string]any{"metric": "loss", "direction": "Minimize"}},
			"parameters": []any{map[string]any{"name": "lr", "searchSpace": map[string]any{
				"logUniform": map[string]any{"min": "0.0001", "max": "0.1"}}}},
			"numTrials":        int64(4),
			"trainJobTemplate": map[string]any{"spec": map[string]any{"runtimeRef": map[string]any{"name": "torch-distributed"}}},
		},
	}}
	create(t, api, sweep)
	teamRuntime := runtimeIn(t, want, "team-a")
	create(t, api, teamRuntime)
	userRuntime := runtimeIn(t, want, "")
	userRuntime.SetKind("ClusterTrainingRuntime")
	userRuntime.SetName("my-torch")
	create(t, api, userRuntime)

	// A shipped runtime edited in place, as `kubectl edit` does it: an update under its own field manager.
	edited := shippedRuntime(t, want, "torch-distributed")
	live := api.get(t, edited)
	if err := unstructured.SetNestedField(live.Object, int64(4), "spec", "mlPolicy", "numNodes"); err != nil {
		t.Fatal(err)
	}
	if _, err := api.resource(t, live).Update(t.Context(), live, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	untouched := shippedRuntime(t, want, "deepspeed-distributed")

	lists := []string{
		"3 TrainJobs in 2 namespaces (their JobSets and pods go with them):\n    team-a: llama, mnist\n    team-b: bert\n",
		"1 OptimizationJob (their trials go with them):\n    team-b/sweep\n",
		"1 TrainingRuntime:\n    team-a/team-torch\n",
		"2 ClusterTrainingRuntimes created or changed in this cluster:\n    my-torch (created here)\n    torch-distributed (shipped, changed by kubectl-edit)\n",
	}
	t.Run("without a terminal it lists them and refuses", func(t *testing.T) {
		run(t, "", false, append(kube, "install", "--uninstall", "-n", operatorNamespace)...).
			expect(t, 1, append(lists, "error: refusing to delete the CRDs without confirmation: that deletes 3 TrainJobs, 1 OptimizationJob, 1 TrainingRuntime and 2 ClusterTrainingRuntimes, and standard input is not a terminal")...)
	})
	t.Run("it lists them before asking", func(t *testing.T) {
		run(t, "n\n", true, append(kube, "install", "--uninstall", "-n", operatorNamespace)...).
			expect(t, 1, append(lists, "Delete the CRDs and all of the above? [y/N]: ", "error: nothing deleted")...)
		for _, u := range []*unstructured.Unstructured{sweep, teamRuntime, userRuntime, edited, untouched} {
			if !api.exists(t, u) {
				t.Errorf("%s was deleted though the answer was no", ref(u))
			}
		}
	})
	t.Run("--keep-crds keeps every runtime a user made or changed", func(t *testing.T) {
		run(t, "", false, append(kube, "install", "--uninstall", "-n", operatorNamespace, "--keep-crds", "--wait=false")...).
			expect(t, 0, "clustertrainingruntime.trainer.kubeflow.org/torch-distributed kept: changed in this cluster (by kubectl-edit)",
				"clustertrainingruntime.trainer.kubeflow.org/deepspeed-distributed deleted")
		for _, u := range []*unstructured.Unstructured{teamRuntime, userRuntime, edited} {
			if !api.exists(t, u) {
				t.Errorf("%s was deleted by --keep-crds", ref(u))
			}
		}
		if got := api.get(t, edited); got != nil {
			if n, _, _ := unstructured.NestedInt64(got.Object, "spec", "mlPolicy", "numNodes"); n != 4 {
				t.Errorf("the edited torch-distributed has numNodes %d, want the user's 4", n)
			}
		}
		if api.exists(t, untouched) {
			t.Errorf("%s, shipped and never changed, is still there", ref(untouched))
		}
	})
}

func shippedRuntime(t *testing.T, objs []*unstructured.Unstructured, name string) *unstructured.Unstructured {
	t.Helper()
	for _, u := range objs {
		if u.GetKind() == "ClusterTrainingRuntime" && u.GetName() == name {
			return u
		}
	}
	t.Fatalf("no ClusterTrainingRuntime %s in the manifests", name)
	return nil
}

func create(t *testing.T, api *api, u *unstructured.Unstructured) {
	t.Helper()
	if _, err := api.resource(t, u).Create(t.Context(), u, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create %s: %v", ref(u), err)
	}
}
