package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-trainjob/kubectl-trainjob/cmd/kubectl-trainjob/app"
	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
)

// twoGPUs is a platform team's pipeline plugin: at EnforcePodSpec it gives every trainer container two GPUs.
type twoGPUs struct{}

var _ pipeline.EnforcePodSpecPlugin = (*twoGPUs)(nil)

func (*twoGPUs) Name() string { return "TwoGPUs" }

func (*twoGPUs) EnforcePodSpec(info *pipeline.RuntimeInfo, _ *trainer.TrainJob) error {
	ps := info.TrainerPodSet()
	if ps == nil || ps.Template == nil {
		return nil
	}
	for k := range ps.Template.Spec.Containers {
		r := &ps.Template.Spec.Containers[k].Resources
		r.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2")}
		r.Requests = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2")}
	}
	return nil
}

// TestOutOfTreePlugin runs every command that builds TrainJobs offline (cmdutil.Pipeline) through the command
// of a binary built with its own pipeline plugin (app.WithPlugin), which gives every trainer container two
// GPUs, on a cluster of one node without GPUs and a runtime that asks for none: list's GPUS column counts the
// plugin's GPUs; the fit check of create and rerun, and fit, find that the pods fit nowhere; render prints the
// GPUs in the JobSet; describe-pipeline shows TwoGPUs at EnforcePodSpec.
func TestOutOfTreePlugin(t *testing.T) {
	// Its own API server: it makes a Node, which every fit check reads.
	c := apiCluster(t)
	f := fixtureOn(t, c)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cpu-node"}}
	if err := f.c.Create(t.Context(), node); err != nil {
		t.Fatal(err)
	}
	// Ready, as a kubelet and the node lifecycle controller (neither runs here) would make it: the API server
	// taints a new node not-ready, which would keep out every pod, the plugin's or not.
	node.Spec.Taints = nil
	if err := f.c.Update(t.Context(), node); err != nil {
		t.Fatal(err)
	}
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	node.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"),
		corev1.ResourceMemory: resource.MustParse("64Gi"), corev1.ResourcePods: resource.MustParse("110")}
	node.Status.Capacity = node.Status.Allocatable
	if err := f.c.Status().Update(t.Context(), node); err != nil {
		t.Fatal(err)
	}
	rt := &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "cpu-torch"}, Spec: minimalRuntimeSpec()}
	f.create(rt)
	tj := f.trainJob("llama", 2, false, func(tj *trainer.TrainJob) {
		tj.Spec.RuntimeRef = trainer.RuntimeRef{Name: "cpu-torch", Kind: ptr.To(trainer.TrainingRuntimeKind)}
		tj.Spec.Trainer.ResourcesPerNode = nil
	})
	// render's input: the same TrainJob and runtime in a file, as the user wrote them.
	file := filepath.Join(t.TempDir(), "llama.yaml")
	var docs []string
	for _, obj := range []client.Object{
		&trainer.TrainJob{TypeMeta: metav1.TypeMeta{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind},
			ObjectMeta: metav1.ObjectMeta{Name: tj.Name, Namespace: tj.Namespace}, Spec: tj.Spec},
		&trainer.TrainingRuntime{TypeMeta: metav1.TypeMeta{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainingRuntimeKind},
			ObjectMeta: metav1.ObjectMeta{Name: rt.Name, Namespace: rt.Namespace}, Spec: rt.Spec},
	} {
		b, err := yaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(b))
	}
	if err := os.WriteFile(file, []byte(strings.Join(docs, "---\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	binary := []app.Option{app.WithPlugin("TwoGPUs", func(context.Context, pipeline.Handle) (pipeline.Plugin, error) { return &twoGPUs{}, nil })}
	kube := kubeArgs(c, f.ns)
	norm := Normalizer{Base: tj.CreationTimestamp.Time, Replace: map[string]string{f.ns: "<ns>", file: "<file>"}}

	t.Run("list", func(t *testing.T) {
		r := RunBinary(t, binary, withArgs(kube, "list", "--no-headers")...)
		// NAME STAGE RUNTIME NODES GPUS AGE
		if fields := strings.Fields(r.Stdout); r.Code != 0 || len(fields) < 5 || fields[4] != "4" {
			t.Errorf("list: want llama's GPUS 4 (2 nodes of the plugin's 2 GPUs):\n%s", r)
		}
	})
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"create-warns", []string{"create", "gpt", "--runtime", "trainingruntime/cpu-torch", "--nodes", "2"}},
		{"create-dry-run-server", []string{"create", "gpt-2", "--runtime", "trainingruntime/cpu-torch", "--dry-run=server", "-o", "name"}},
		{"rerun-dry-run-server", []string{"rerun", "llama", "--dry-run=server", "-o", "name"}},
		{"fit", []string{"fit", "llama"}},
		{"render", []string{"render", "-f", file}},
		{"describe-pipeline", []string{"describe-pipeline", "llama"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			AssertGolden(t, "outoftree/"+tc.name, norm.Normalize(RunBinary(t, binary, withArgs(kube, tc.args...)...).String()))
		})
	}
}
