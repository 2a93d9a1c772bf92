package plugins_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
)

// FuzzBuild runs admission and the Build phase on random TrainJob × runtime
// pairs: ML policy, gang scheduling, counts, resources, initializers,
// runtimePatches and commands all vary. Errors are fine; panics are not.
// Run it with `make fuzz` (FUZZTIME=2m); the seeds in testdata/fuzz run in
// every `go test`.
func FuzzBuild(f *testing.F) {
	f.Add(uint8(0), uint8(0), int32(4), int32(0), int64(8), int64(4000), true, uint8(3), "node", "PYTHONUNBUFFERED", "torchrun")
	f.Add(uint8(1), uint8(1), int32(2), int32(2), int64(0), int64(2500), true, uint8(0), "launcher", "OMPI_MCA_x", "mpirun")
	f.Add(uint8(2), uint8(2), int32(0), int32(1), int64(16), int64(0), false, uint8(1), "dataset-initializer", "", "tune")
	f.Add(uint8(3), uint8(0), int32(-1), int32(-5), int64(-3), int64(-1), false, uint8(2), "", "DMLC_TASK_ID", "")
	f.Add(uint8(4), uint8(1), int32(1000), int32(64), int64(1), int64(1), true, uint8(255), "missing", "PET_NNODES", "tune")
	f.Add(uint8(5), uint8(2), int32(1), int32(0), int64(2), int64(700), true, uint8(7), "model-initializer", "JAX_PROCESS_ID", "python")
	f.Add(uint8(6), uint8(1), int32(3), int32(2), int64(4), int64(1500), false, uint8(0), "node", "", "python")
	f.Add(uint8(12), uint8(0), int32(4), int32(8), int64(8), int64(2000), false, uint8(16), "node", "FLUX_VIEW_IMAGE", "lmp")
	fw := newFramework(f)
	f.Fuzz(func(t *testing.T, policy, podGroup uint8, nodes, nproc int32, gpus, cpuMilli int64,
		launcherAsNode bool, shape uint8, patchJob, envName, command string) {
		rt := fuzzRuntime(policy, podGroup, launcherAsNode, shape)
		tj := fuzzTrainJob(nodes, nproc, gpus, cpuMilli, shape, patchJob, envName, command)
		ctx := context.Background()
		if _, errs := fw.Validate(ctx, rt, nil, tj); len(errs) > 0 {
			return
		}
		_, _, _ = fw.Build(ctx, tj, rt, pipeline.BuildOptions{Trace: &pipeline.Trace{}})
	})
}

func fuzzRuntime(policy, podGroup uint8, launcherAsNode bool, shape uint8) *pipeline.Runtime {
	r := torchRuntime()
	spec := r.Spec
	src := &spec.MLPolicy.MLPolicySource
	*src = trainer.MLPolicySource{}
	switch policy % 7 {
	case 0:
		src.Torch = &trainer.TorchMLPolicySource{}
		if shape&4 != 0 {
			src.Torch.EnvInjection = &trainer.EnvInjection{Targets: []trainer.EnvInjectionTarget{{JobName: "dataset-initializer", ContainerNames: []string{"dataset-initializer"}}}}
		}
	case 1:
		src.MPI = &trainer.MPIMLPolicySource{NumProcPerNode: ptr.To[int32](1), MPIImplementation: ptr.To(trainer.MPIImplementationOpenMPI),
			SSHAuthMountPath: ptr.To("/root/.ssh"), RunLauncherAsNode: ptr.To(launcherAsNode)}
		if launcherAsNode {
			spec.Template.Spec.ReplicatedJobs[0].Name = "launcher"
			spec.Template.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0].Name = "node"
		}
	case 2:
		src.JAX = &trainer.JAXMLPolicySource{}
	case 3:
		src.XGBoost = &trainer.XGBoostMLPolicySource{}
	case 4:
		spec.MLPolicy = nil
	case 5:
		src.Flux = &trainer.FluxMLPolicySource{NumProcPerNode: ptr.To[int32](1)}
	}
	switch podGroup % 3 {
	case 1:
		spec.PodGroupPolicy = &trainer.PodGroupPolicy{PodGroupPolicySource: trainer.PodGroupPolicySource{Coscheduling: &trainer.CoschedulingPodGroupPolicySource{ScheduleTimeoutSeconds: ptr.To[int32](60)}}}
	case 2:
		spec.PodGroupPolicy = &trainer.PodGroupPolicy{PodGroupPolicySource: trainer.PodGroupPolicySource{Volcano: &trainer.VolcanoPodGroupPolicySource{}}}
		spec.Template.Annotations = map[string]string{"scheduling.volcano.sh/queue-name": "q"}
	}
	if shape&8 != 0 {
		spec.Template.Spec.ReplicatedJobs = spec.Template.Spec.ReplicatedJobs[2:]
	}
	if shape&16 != 0 {
		spec.Template.Spec.Network = nil
		spec.Template.Spec.ReplicatedJobs[len(spec.Template.Spec.ReplicatedJobs)-1].Replicas = 3
	}
	return r
}

func fuzzTrainJob(nodes, nproc int32, gpus, cpuMilli int64, shape uint8, patchJob, envName, command string) *trainer.TrainJob {
	tj := torchTrainJob(nodes, gpus)
	tj.ObjectMeta = metav1.ObjectMeta{Name: "fuzz", Namespace: "default", UID: "uid"}
	t := tj.Spec.Trainer
	if nproc != 0 {
		t.NumProcPerNode = ptr.To(nproc)
	}
	t.ResourcesPerNode.Requests = corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(cpuMilli, resource.DecimalSI)}
	if envName != "" {
		t.Env = append(t.Env, corev1.EnvVar{Name: envName, Value: "1"})
	}
	switch command {
	case "tune":
		t.Command = []string{"tune", "run"}
		tj.Spec.RuntimeRef.Name = "torchtune-llama3.2-1b"
	case "":
		t.Command = nil
	default:
		t.Command = []string{command}
	}
	if shape&1 != 0 {
		tj.Spec.Initializer = nil
	}
	if shape&2 != 0 {
		tj.Spec.Trainer = nil
	}
	if patchJob != "" {
		tj.Spec.RuntimePatches = []trainer.RuntimePatch{{
			Manager: "example.com/fuzz",
			TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{Template: &trainer.JobSetTemplatePatch{
				Metadata: &metav1.ObjectMeta{Labels: map[string]string{"fuzz": "yes"}},
				Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: []trainer.ReplicatedJobPatch{{
					Name: patchJob,
					Template: &trainer.JobTemplatePatch{Spec: &trainer.JobSpecPatch{Template: &trainer.PodTemplatePatch{Spec: &trainer.PodSpecPatch{
						NodeSelector: map[string]string{"pool": "gpu"},
						Containers:   []trainer.ContainerPatch{{Name: patchJob, Env: []corev1.EnvVar{{Name: "X", Value: "y"}}}},
					}}}},
				}}},
			}},
		}}
	}
	return tj
}
