package plugins_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	volcanov1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/dryrun"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/scheme"
)

// FuzzBuild runs the admission path and the Build phase on random TrainJob
// × runtime pairs: ML policy, gang scheduling, counts, resources,
// initializers, runtimePatches, commands and the number of replicated jobs
// all vary. Each pair goes through what the API server does offline (the
// CRDs' schemas and CEL rules, for the runtime and the TrainJob), the
// webhook's rules (CustomValidation) and Build, with and without a Trace
// (render and describe-pipeline). Errors are fine; panics are not, and what
// Build returns for an admitted pair keeps the promises of checkBuilt.
// Run it with `make fuzz` (FUZZTIME, default one million executions); the
// seeds in testdata/fuzz run in every `go test`, and an input that crashed
// is added there.
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
	crds, err := dryrun.NewSchema()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, policy, podGroup uint8, nodes, nproc int32, gpus, cpuMilli int64,
		launcherAsNode bool, shape uint8, patchJob, envName, command string) {
		rt := fuzzRuntime(policy, podGroup, launcherAsNode, shape)
		tj := fuzzTrainJob(nodes, nproc, gpus, cpuMilli, shape, patchJob, envName, command)
		ctx := context.Background()
		// Build runs also on what the API server would refuse (render
		// admits, but a plugin must not panic on anything).
		ok := admitted(ctx, crds, rt.Object) && admitted(ctx, crds, tj)
		if _, errs := fw.Validate(ctx, rt, nil, tj); len(errs) > 0 {
			return
		}
		opts := pipeline.BuildOptions{}
		if shape&128 != 0 {
			opts.Trace = &pipeline.Trace{}
		}
		objs, _, err := fw.Build(ctx, tj, rt, opts)
		// Build promises only for what the API server admits: the CRD's
		// schema (numNodes ≥ 0, …) is not the plugins' to check.
		if err != nil || !ok {
			return
		}
		for _, problem := range checkBuilt(tj, objs) {
			t.Error(problem)
		}
	})
}

// kinds names the objects admitted sends through the schemas.
var kinds = scheme.New()

// admitted tells whether the API server's schema and CEL rules for the
// object's kind admit it.
func admitted(ctx context.Context, crds *dryrun.Schema, obj client.Object) bool {
	obj = obj.DeepCopyObject().(client.Object)
	gvks, _, err := kinds.ObjectKinds(obj)
	if err != nil || len(gvks) == 0 {
		return false
	}
	obj.GetObjectKind().SetGroupVersionKind(gvks[0])
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return false
	}
	return crds.Admit(ctx, &unstructured.Unstructured{Object: u}) == nil
}

// checkBuilt lists how objs, what Build returned for tj offline (nothing
// exists yet), break its promises:
//   - every object has its TypeMeta, is in tj's namespace, and has exactly
//     one owner reference: tj, as its controller;
//   - names derive from tj's (tj's own, or it and a suffix), once per kind;
//   - one JobSet, named as tj, whose replicated jobs have distinct names and
//     at least one replica each;
//   - no container has an env var or a volume mount twice, and no pod a
//     container or a volume twice;
//   - a PodGroup counts every pod of the JobSet, and every pod joins it.
func checkBuilt(tj *trainer.TrainJob, objs []client.Object) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	owner := metav1.OwnerReference{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind, Name: tj.Name, UID: tj.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
	names := map[string]bool{}
	var jobSets []*jobsetv1alpha2.JobSet
	var podGroups []int32
	for _, obj := range objs {
		gvk := obj.GetObjectKind().GroupVersionKind()
		id := fmt.Sprintf("%s %s", gvk.Kind, obj.GetName())
		if gvk.Kind == "" || gvk.Version == "" {
			bad("%T %s has no TypeMeta", obj, obj.GetName())
		}
		if obj.GetNamespace() != tj.Namespace {
			bad("%s is in namespace %q, want %q", id, obj.GetNamespace(), tj.Namespace)
		}
		if diff := cmp.Diff([]metav1.OwnerReference{owner}, obj.GetOwnerReferences()); diff != "" {
			bad("%s owner references (-want +got):\n%s", id, diff)
		}
		if name := obj.GetName(); name != tj.Name && !strings.HasPrefix(name, tj.Name+"-") {
			bad("%s: the name does not derive from the TrainJob's %q", id, tj.Name)
		}
		if names[id] {
			bad("%s is built twice", id)
		}
		names[id] = true
		switch o := obj.(type) {
		case *jobsetv1alpha2.JobSet:
			jobSets = append(jobSets, o)
		case *schedv1alpha1.PodGroup:
			podGroups = append(podGroups, o.Spec.MinMember)
		case *volcanov1beta1.PodGroup:
			podGroups = append(podGroups, o.Spec.MinMember)
		}
	}
	if len(jobSets) != 1 {
		bad("%d JobSets built, want 1", len(jobSets))
		return problems
	}
	js := jobSets[0]
	if js.Name != tj.Name {
		bad("JobSet %s, want it named as the TrainJob %s", js.Name, tj.Name)
	}
	var pods int32
	emptyJob := false
	jobNames := map[string]bool{}
	for _, rj := range js.Spec.ReplicatedJobs {
		if jobNames[rj.Name] {
			bad("replicated job %s twice", rj.Name)
		}
		jobNames[rj.Name] = true
		// numNodes 0 is valid (it mirrors JobSet replicas): a job of no pod.
		parallelism := ptr.Deref(rj.Template.Spec.Parallelism, 1)
		if rj.Replicas < 1 || parallelism < 0 {
			bad("replicated job %s: %d replicas of %d pods", rj.Name, rj.Replicas, parallelism)
		}
		if parallelism == 0 {
			emptyJob = true
		}
		pods += rj.Replicas * parallelism
		pod := rj.Template.Spec.Template
		for _, dup := range duplicates(pod.Spec.Volumes, func(v corev1.Volume) string { return v.Name }) {
			bad("replicated job %s: volume %s twice", rj.Name, dup)
		}
		containers := slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers)
		for _, dup := range duplicates(containers, func(c corev1.Container) string { return c.Name }) {
			bad("replicated job %s: container %s twice", rj.Name, dup)
		}
		for _, c := range containers {
			for _, dup := range duplicates(c.Env, func(e corev1.EnvVar) string { return e.Name }) {
				bad("replicated job %s, container %s: env %s twice", rj.Name, c.Name, dup)
			}
			for _, dup := range duplicates(c.VolumeMounts, func(m corev1.VolumeMount) string { return m.MountPath }) {
				bad("replicated job %s, container %s: two volumes mounted at %s", rj.Name, c.Name, dup)
			}
		}
		if len(podGroups) > 0 && pod.Labels[schedv1alpha1.PodGroupLabel] != tj.Name && pod.Annotations[volcanov1beta1.KubeGroupNameAnnotationKey] != tj.Name {
			bad("replicated job %s: the pods do not join the PodGroup (labels %v, annotations %v)", rj.Name, pod.Labels, pod.Annotations)
		}
	}
	for _, minMember := range podGroups {
		// A PodSet counts at least one pod (spec §2.5), so a job of no pod
		// makes the gang larger than the pods.
		if !emptyJob && minMember != pods {
			bad("PodGroup minMember %d, want the JobSet's %d pods", minMember, pods)
		}
	}
	return problems
}

// duplicates are the keys that more than one item has.
func duplicates[T any](items []T, key func(T) string) []string {
	seen := map[string]int{}
	var dups []string
	for _, item := range items {
		if seen[key(item)]++; seen[key(item)] == 2 {
			dups = append(dups, key(item))
		}
	}
	return dups
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
	// More replicated jobs, copies of the last one: names vary with
	// policy, so that some clash with the runtime's own ("node").
	jobs := spec.Template.Spec.ReplicatedJobs
	for i := range int(shape>>5) & 3 {
		rj := jobs[len(jobs)-1].DeepCopy()
		rj.Name = []string{"extra-0", "extra-1", "node"}[(int(policy)+i)%3]
		spec.Template.Spec.ReplicatedJobs = append(spec.Template.Spec.ReplicatedJobs, *rj)
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
