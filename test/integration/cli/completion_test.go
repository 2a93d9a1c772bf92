package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/completion"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/create"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/lifecycle"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/logs"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/portforward"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/status"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
)

// TestCompletion generates the scripts of every shell and completes TrainJob names, OptimizationJob names after
// optimizationjob/ (status, delete), runtime names and flag values from the cluster, as the shells ask the binary
// (`__complete`).
func TestCompletion(t *testing.T) {
	cmd := []plugin.CommandAdder{completion.NewCmdCompletion, create.NewCmdCreate, create.NewCmdRerun, logs.NewCmdLogs, portforward.NewCmdPortForward,
		status.NewCmdStatus, lifecycle.NewCmdDelete}
	for _, shell := range completion.Shells {
		t.Run(shell, func(t *testing.T) {
			AssertGolden(t, "completion/"+shell, Run(t, "", cmd, "completion", shell).String())
		})
	}
	t.Run("unknown-shell", func(t *testing.T) {
		AssertGolden(t, "completion/unknown-shell", Run(t, "", cmd, "completion", "tcsh").String())
	})

	c := sharedCluster(t)
	cl := adminClient(t, c)
	ns := newNamespace(t, cl)
	f := &fixture{t: t, c: cl, ns: ns}
	var llama *trainer.TrainJob
	for _, name := range []string{"llama-ft", "llama-pt", "bert"} {
		tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: "torch-distributed"}}}
		if err := cl.Create(t.Context(), tj); err != nil {
			t.Fatal(err)
		}
		if name == "llama-ft" {
			llama = tj
		}
	}
	for _, name := range []string{"sweep", "sweep-lr", "grid"} {
		f.create(&trainer.OptimizationJob{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: trainer.OptimizationJobSpec{
			Objectives:       []trainer.Objective{{Metric: "val_loss"}},
			Parameters:       []trainer.Parameter{{Name: "batch", SearchSpace: &trainer.SearchSpace{Categorical: trainer.CategoricalSpace{Choices: []string{"16", "32"}}}}},
			TrainJobTemplate: trainer.TrainJobTemplateSpec{Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: "torch-distributed"}}},
		}})
	}
	rt := &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "team-torch", Namespace: ns}, Spec: minimalRuntimeSpec()}
	if err := cl.Create(t.Context(), rt); err != nil {
		t.Fatal(err)
	}
	// llama-ft runs: a dataset initializer, and four trainer nodes on two hosts, in its JobSet's Job. A pod
	// with its labels on gpu-node-7 that nothing owns is not its (TestStatus/ForeignPods).
	f.create(&jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "llama-ft", OwnerReferences: []metav1.OwnerReference{owner(llama)}}, Spec: jobsetv1alpha2.JobSetSpec{ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{
		{Name: trainer.DatasetInitializerName, Replicas: 1, Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: podTemplate(trainer.DatasetInitializerName)}}},
		{Name: trainer.Node, Replicas: 1, Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](4), Completions: ptr.To[int32](4), Template: podTemplate(trainer.Node)}}},
	}}})
	f.create(&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "llama-ft-node-0", Labels: map[string]string{jobsetv1alpha2.JobSetNameKey: "llama-ft"},
		OwnerReferences: f.controller(&jobsetv1alpha2.JobSet{}, "llama-ft")}, Spec: batchv1.JobSpec{Template: podTemplate(trainer.Node)}})
	for i, node := range []string{"gpu-node-1", "gpu-node-0", "gpu-node-1", "gpu-node-0", "gpu-node-7"} {
		var owners []metav1.OwnerReference
		if i < 4 {
			owners = f.controller(&batchv1.Job{}, "llama-ft-node-0")
		}
		f.create(&corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("llama-ft-node-0-%d-abcde", i), OwnerReferences: owners, Labels: map[string]string{
				jobsetv1alpha2.JobSetNameKey: "llama-ft", jobsetv1alpha2.ReplicatedJobNameKey: trainer.Node, batchv1.JobCompletionIndexAnnotation: strconv.Itoa(i)}},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: trainer.Node, Image: "busybox"}}},
		})
	}
	kube := kubeArgs(c, ns)
	n := Normalizer{Replace: map[string]string{ns: "<ns>"}}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"trainjob-names", withArgs(kube, "__complete", "logs", "")},
		{"trainjob-names-prefix", withArgs(kube, "__complete", "logs", "llama")},
		{"runtime-names", withArgs(kube, "__complete", "create", "x", "--runtime", "trainingruntime/")},
		{"stages", withArgs(kube, "__complete", "logs", "llama-ft", "--stage", "")},
		{"ranks", withArgs(kube, "__complete", "logs", "llama-ft", "--rank", "")},
		{"ranks-of-initializer", withArgs(kube, "__complete", "logs", "llama-ft", "--stage", "dataset-initializer", "--rank", "")},
		{"nodes", withArgs(kube, "__complete", "logs", "llama-ft", "--node", "")},
		{"shells", []string{"__complete", "completion", ""}},
		{"rerun-names", withArgs(kube, "__complete", "rerun", "")},
		{"rerun-new", withArgs(kube, "__complete", "rerun", "llama-ft", "")},
		{"rerun-set", withArgs(kube, "__complete", "rerun", "llama-ft", "--set", "")},
		{"create-from", withArgs(kube, "__complete", "create", "x", "--from", "llama")},
		{"port-forward-names", withArgs(kube, "__complete", "port-forward", "")},
		{"port-forward-ranks", withArgs(kube, "__complete", "port-forward", "llama-ft", "6006", "--rank", "")},
		{"status-names", withArgs(kube, "__complete", "status", "")},
		{"status-optimizationjob-names", withArgs(kube, "__complete", "status", "optimizationjob/")},
		{"status-optimizationjob-names-prefix", withArgs(kube, "__complete", "status", "OptimizationJobs/sweep")},
		{"delete-names", withArgs(kube, "__complete", "delete", "bert", "")},
		{"delete-optimizationjob-names", withArgs(kube, "__complete", "delete", "bert", "optimizationjob/sweep", "optimizationjob/")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			AssertGolden(t, "completion/"+tc.name, n.Normalize(Run(t, "", cmd, tc.args...).String()))
		})
	}
}

// TestCompletionShim runs krew/kubectl_complete-trainjob as kubectl does for `kubectl trainjob <TAB>`: it must
// hand every word to `kubectl-trainjob __complete`.
func TestCompletionShim(t *testing.T) {
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	shim := filepath.Join(root, "krew", "kubectl_complete-trainjob")
	bin := t.TempDir()
	fake := "#!/bin/sh\nprintf '%s\\n' \"kubectl-trainjob called with:\" \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "kubectl-trainjob"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(shim, "logs", "--stage", "")
	cmd.Env = []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH")}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", shim, err, out)
	}
	AssertGolden(t, "completion/shim", string(out))
}
