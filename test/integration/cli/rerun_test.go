package cli

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/create"
)

// TestRerun runs TrainJobs again: each copy holds what its creator wrote — created by `kubectl trainjob
// create`, by kubectl apply or by server-side apply — without what Kueue, another user and the controller
// wrote since; it is named by the counter or by NEW and changed by --set; create --from does the same with
// create's flags. Bad input creates nothing.
func TestRerun(t *testing.T) {
	f, kube, n := runtimeFixture(t, sharedCluster(t), createRuntime)
	cl, ns := f.c, f.ns
	cmds := []plugin.CommandAdder{create.NewCmdCreate, create.NewCmdRerun}
	get := func(name string) *trainer.TrainJob {
		t.Helper()
		tj := &trainer.TrainJob{}
		if err := cl.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, tj); err != nil {
			t.Fatal(err)
		}
		return tj
	}

	// llama, as `kubectl trainjob create` makes it, suspended.
	if res := Run(t, "", cmds, withArgs(kube, "create", "llama", "--runtime", createRuntime, "--image", "ghcr.io/example/llama-ft:1.0",
		"--nodes", "4", "--gpus-per-node", "8", "--env", "NCCL_DEBUG=INFO", "--env", "EPOCHS=3", "--dataset-uri", "hf://tatsu-lab/alpaca",
		"--label", "team=nlp", "--annotation", "owner=alice@example.com", "--suspend", "--", "torchrun", "train.py")...); res.Code != 0 {
		t.Fatalf("create llama: %s", res)
	}
	// Since: Kueue wrote its runtime patch and resumed it, another user labelled and annotated it, and the
	// controller wrote its status.
	tj := get("llama")
	before := tj.DeepCopy()
	tj.Spec.Suspend = ptr.To(false)
	tj.Spec.RuntimePatches = []trainer.RuntimePatch{{Manager: "kueue.x-k8s.io/manager", Time: &tj.CreationTimestamp}}
	if err := cl.Patch(t.Context(), tj, client.MergeFrom(before), client.FieldOwner("kueue")); err != nil {
		t.Fatal(err)
	}
	before = tj.DeepCopy()
	tj.Labels["reviewed"] = "yes"
	tj.Annotations["reviewed-by"] = "bob"
	if err := cl.Patch(t.Context(), tj, client.MergeFrom(before), client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	tj.Status.Conditions = []metav1.Condition{condition(trainer.TrainJobComplete, "JobSetCompleted", "jobset completed", metav1.ConditionTrue, at(tj, time.Minute))}
	f.updateStatus(tj)

	// applied, as kubectl apply (client-side) makes it, with its last-applied annotation.
	applied := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: "applied", Namespace: ns, Annotations: map[string]string{
			corev1.LastAppliedConfigAnnotation: `{"apiVersion":"trainer.kubeflow.org/v1alpha1","kind":"TrainJob","metadata":{"name":"applied"},"spec":{"runtimeRef":{"name":"` + createRuntime + `"}}}`}},
		Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: createRuntime}},
	}
	if err := cl.Create(t.Context(), applied, client.FieldOwner("kubectl-client-side-apply")); err != nil {
		t.Fatal(err)
	}
	// server-side, as kubectl apply --server-side makes it.
	ssa := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": trainer.GroupVersion.String(), "kind": trainer.TrainJobKind,
		"metadata": map[string]any{"name": "server-side", "namespace": ns, "labels": map[string]any{"team": "vision"}},
		"spec":     map[string]any{"runtimeRef": map[string]any{"name": createRuntime}, "trainer": map[string]any{"numNodes": int64(2), "args": []any{"--epochs", "3"}}},
	}}
	if err := cl.Apply(t.Context(), client.ApplyConfigurationFromUnstructured(ssa), client.FieldOwner("kubectl")); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name string
		args []string
	}{
		{"dry-run", []string{"rerun", "llama", "--dry-run=client", "-o", "yaml"}},
		{"set", []string{"rerun", "llama", "llama-big", "--set", "nodes=8", "--set", "image=ghcr.io/example/llama-ft:1.1", "--set", "env=EPOCHS=10",
			"--set", "suspend=true", "--dry-run=client", "-o", "yaml", "--", "torchrun", "train.py", "--resume"}},
		{"applied", []string{"rerun", "applied", "--dry-run=client", "-o", "yaml"}},
		{"server-side", []string{"rerun", "server-side", "--dry-run=client", "-o", "yaml"}},
		{"create-from", []string{"create", "llama-2n", "--from", "llama", "--nodes", "2", "--label", "size=small", "--dry-run=client", "-o", "yaml"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			AssertGolden(t, "rerun/"+tc.name, n.Normalize(Run(t, "", cmds, withArgs(kube, tc.args...)...).String()))
		})
	}

	t.Run("rerun", func(t *testing.T) {
		AssertGolden(t, "rerun/rerun", n.Normalize(Run(t, "", cmds, withArgs(kube, "rerun", "llama")...).String()))
		rerun := get("llama-rerun-1")
		want := get("llama").Spec.DeepCopy()
		// Kueue's runtime patch is Kueue's, and so is spec.suspend since Kueue changed it: the copy has the
		// API's default.
		want.RuntimePatches = nil
		if diff := cmp.Diff(*want, rerun.Spec); diff != "" {
			t.Errorf("the rerun's spec differs from what llama's creator wrote (-want +got):\n%s", diff)
		}
		wantLabels := map[string]string{"team": "nlp", "reviewed": "yes"}
		wantAnnotations := map[string]string{"owner": "alice@example.com", create.RerunOfAnnotation: "llama"}
		if diff := cmp.Diff(wantLabels, rerun.Labels); diff != "" {
			t.Errorf("labels (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(wantAnnotations, rerun.Annotations); diff != "" {
			t.Errorf("annotations (-want +got):\n%s", diff)
		}
		if len(rerun.Status.Conditions) != 0 {
			t.Errorf("the rerun has the status of llama: %v", rerun.Status.Conditions)
		}
	})
	// The rerun of a rerun counts on: llama-rerun-2, and rerun-of names the TrainJob it copies.
	t.Run("rerun-of-rerun", func(t *testing.T) {
		AssertGolden(t, "rerun/rerun-of-rerun", n.Normalize(Run(t, "", cmds, withArgs(kube, "rerun", "llama-rerun-1", "-o", "name")...).String()))
		if got := get("llama-rerun-2").Annotations[create.RerunOfAnnotation]; got != "llama-rerun-1" {
			t.Errorf("rerun-of = %q, want llama-rerun-1", got)
		}
	})

	for _, tc := range []struct {
		name string
		args []string
	}{
		{"not-found", []string{"rerun", "nope"}},
		{"no-name", []string{"rerun"}},
		{"too-many", []string{"rerun", "llama", "bad", "extra"}},
		{"exists", []string{"rerun", "llama", "llama-rerun-1"}},
		{"bad-new", []string{"rerun", "llama", "Bad_Name"}},
		{"set-unknown", []string{"rerun", "llama", "bad", "--set", "gpus=8"}},
		{"set-not-a-number", []string{"rerun", "llama", "bad", "--set", "nodes=four"}},
		{"set-no-value", []string{"rerun", "llama", "bad", "--set", "nodes"}},
		{"from-no-name", []string{"create", "--from", "llama"}},
		{"from-and-file", []string{"create", "bad", "--from", "llama", "-f", "testdata/create/trainjob.yaml"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			AssertGolden(t, "rerun/"+tc.name, n.Normalize(Run(t, "", cmds, withArgs(kube, tc.args...)...).String()))
			assertNoTrainJob(t, cl, ns, "bad")
		})
	}

	var list trainer.TrainJobList
	if err := cl.List(t.Context(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tj := range list.Items {
		names = append(names, tj.Name)
	}
	if diff := cmp.Diff([]string{"applied", "llama", "llama-rerun-1", "llama-rerun-2", "server-side"}, names); diff != "" {
		t.Errorf("TrainJobs in the namespace (-want +got):\n%s", diff)
	}
}
