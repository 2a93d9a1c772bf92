package plugins_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/plugins"
)

func newFramework(tb testing.TB) *pipeline.Framework {
	tb.Helper()
	fw, err := plugins.NewFramework(context.Background(), plugins.Config{}, pipeline.OfflineHandle(pipeline.OperatorInfo{}))
	if err != nil {
		tb.Fatal(err)
	}
	return fw
}

// TestExtensionPoints pins which plugins run at each extension point, in
// order (spec §2.3's matrix, without TrainJobStatus).
func TestExtensionPoints(t *testing.T) {
	fw := newFramework(t)
	want := map[pipeline.ExtensionPoint][]string{
		pipeline.WatchExtension:        {"MPI", "Flux", "CoScheduling", "Volcano", "JobSet"},
		pipeline.CustomValidation:      {"Torch", "MPI", "JAX", "XGBoost", "Flux", "Volcano", "JobSet"},
		pipeline.EnforceMLPolicy:       {"Torch", "MPI", "PlainML", "JAX", "XGBoost", "Flux"},
		pipeline.EnforcePodGroupPolicy: {"CoScheduling", "Volcano"},
		pipeline.EnforcePodSpec:        nil,
		pipeline.PreComponentBuilder:   {"JobSet"},
		pipeline.ComponentBuilder:      {"MPI", "Flux", "CoScheduling", "Volcano", "JobSet"},
		pipeline.TrainJobStatus:        {"JobSet"},
	}
	for _, ph := range pipeline.Phases {
		for _, p := range ph.Points {
			if diff := cmp.Diff(want[p], fw.Plugins(p)); diff != "" {
				t.Errorf("%s (-want +got):\n%s", p, diff)
			}
		}
	}
}

// torchRuntime is a torch runtime with dataset and model initializers, as
// torchtune's, sized by the benchmark.
func torchRuntime() *pipeline.Runtime {
	job := func(name, ancestor string, res corev1.ResourceRequirements) jobsetv1alpha2.ReplicatedJob {
		return jobsetv1alpha2.ReplicatedJob{
			Name: name,
			Template: batchJobTemplate(ancestor, corev1.Container{
				Name: name, Image: "example.com/" + name, Resources: res,
				VolumeMounts: []corev1.VolumeMount{{Name: "initializer", MountPath: "/workspace"}},
			}),
		}
	}
	node := job("node", trainer.AncestorTrainer, corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("64Gi")},
	})
	node.Template.Spec.Template.Spec.Containers[0].Name = "node"
	node.DependsOn = []jobsetv1alpha2.DependsOn{{Name: "dataset-initializer", Status: "Complete"}, {Name: "model-initializer", Status: "Complete"}}
	rt := &trainer.ClusterTrainingRuntime{
		ObjectMeta: metav1.ObjectMeta{Name: "torch-with-initializers", Labels: map[string]string{trainer.FrameworkLabel: "torch"}},
		Spec: trainer.TrainingRuntimeSpec{
			MLPolicy: &trainer.MLPolicy{NumNodes: ptr.To[int32](1), MLPolicySource: trainer.MLPolicySource{Torch: &trainer.TorchMLPolicySource{}}},
			Template: trainer.JobSetTemplateSpec{Spec: jobsetv1alpha2.JobSetSpec{ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{
				job("dataset-initializer", trainer.AncestorDatasetInitializer, corev1.ResourceRequirements{}),
				job("model-initializer", trainer.AncestorModelInitializer, corev1.ResourceRequirements{}),
				node,
			}}},
		},
	}
	r, _ := pipeline.RuntimeOf(rt)
	return r
}

func batchJobTemplate(ancestor string, c corev1.Container) batchv1.JobTemplateSpec {
	t := batchv1.JobTemplateSpec{}
	t.Labels = map[string]string{trainer.AncestorLabel: ancestor}
	t.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	t.Spec.Template.Spec.Containers = []corev1.Container{c}
	return t
}

func torchTrainJob(nodes int32, gpus int64) *trainer.TrainJob {
	return &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: "bench", Namespace: "default", UID: "uid-1"},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{Name: "torch-with-initializers", APIGroup: ptr.To(trainer.GroupVersion.Group), Kind: ptr.To(trainer.ClusterTrainingRuntimeKind)},
			Initializer: &trainer.Initializer{
				Dataset: &trainer.DatasetInitializer{StorageUri: ptr.To("hf://tatsu-lab/alpaca")},
				Model:   &trainer.ModelInitializer{StorageUri: ptr.To("hf://meta-llama/Llama-3.2-1B-Instruct")},
			},
			Trainer: &trainer.Trainer{
				NumNodes: ptr.To(nodes),
				Command:  []string{"torchrun", "train.py"},
				Env:      []corev1.EnvVar{{Name: "EPOCHS", Value: "3"}},
				ResourcesPerNode: &corev1.ResourceRequirements{Limits: corev1.ResourceList{
					"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI),
				}},
			},
		},
	}
}

func TestBuildTorchWithInitializers(t *testing.T) {
	objs, _, err := newFramework(t).Build(context.Background(), torchTrainJob(64, 8), torchRuntime(), pipeline.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 1 {
		t.Fatalf("built %d objects, want the JobSet only", len(objs))
	}
	js, ok := objs[0].(*jobsetv1alpha2.JobSet)
	if !ok {
		t.Fatalf("built %T, want *JobSet", objs[0])
	}
	node := js.Spec.ReplicatedJobs[2]
	if got := ptr.Deref(node.Template.Spec.Parallelism, 0); got != 64 {
		t.Errorf("node parallelism = %d, want 64", got)
	}
	env := map[string]string{}
	for _, e := range node.Template.Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	for k, v := range map[string]string{"PET_NNODES": "64", "PET_NPROC_PER_NODE": "auto", "PET_MASTER_ADDR": "bench-node-0-0.bench", "EPOCHS": "3"} {
		if env[k] != v {
			t.Errorf("env %s = %q, want %q", k, env[k], v)
		}
	}
	ds := js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0]
	if len(ds.Env) == 0 || ds.Env[0].Name != "STORAGE_URI" || ds.Env[0].Value != "hf://tatsu-lab/alpaca" {
		t.Errorf("dataset initializer env = %v", ds.Env)
	}
}

// BenchmarkBuildTorch is the whole Build phase (RuntimeInfo, every plugin,
// the JobSet) for a torch runtime with dataset and model initializers.
// Targets on the project's 2-core machine (make bench): ≤ 50 µs/op and ≤ 300
// allocs/op at 64 nodes × 8 GPUs, ≤ 1 ms/op at 1024 nodes.
func BenchmarkBuildTorch(b *testing.B) {
	for _, nodes := range []int32{64, 1024} {
		b.Run(fmt.Sprintf("nodes=%d,gpus=8", nodes), func(b *testing.B) {
			fw, rt, tj := newFramework(b), torchRuntime(), torchTrainJob(nodes, 8)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := fw.Build(ctx, tj, rt, pipeline.BuildOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
