package plugins_test

import (
	"context"
	"fmt"
	"runtime/debug"
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
	for _, in := range fuzzSeeds {
		f.Add(in.policy, in.podGroup, in.nodes, in.nproc, in.gpus, in.cpuMilli, in.launcherAsNode, in.shape,
			in.patchJob, in.patchEnv, in.envName, in.command)
	}
	z := newFuzzer(f)
	f.Fuzz(func(t *testing.T, policy, podGroup uint8, nodes, nproc int32, gpus, cpuMilli int64,
		launcherAsNode bool, shape uint8, patchJob string, patchEnv bool, envName, command string) {
		z.check(t, fuzzInput{policy, podGroup, nodes, nproc, gpus, cpuMilli, launcherAsNode, shape, patchJob, patchEnv, envName, command})
	})
}

// BenchmarkFuzzBuildInput measures one execution of FuzzBuild, over its
// seeds: `make fuzz` runs a million of them. It reports which share of the
// inputs reach Build, so that a change of the inputs that leaves Build
// unfuzzed shows.
func BenchmarkFuzzBuildInput(b *testing.B) {
	z := newFuzzer(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		z.check(b, fuzzSeeds[i%len(fuzzSeeds)])
	}
	b.ReportMetric(float64(z.built)/float64(b.N), "built/op")
}

// TestFuzzSeedsReachBuild keeps FuzzBuild's seeds worth mutating: most of
// them pass the webhook's rules, so that Build is fuzzed and not only the
// rules (the env var every runtimePatch used to add was refused for every
// reserved container, and no seed reached Build).
func TestFuzzSeedsReachBuild(t *testing.T) {
	z := newFuzzer(t)
	for _, in := range fuzzSeeds {
		z.check(t, in)
	}
	if z.built < len(fuzzSeeds)/2 {
		t.Errorf("%d of %d seeds reach Build, want at least half", z.built, len(fuzzSeeds))
	}
}

// fuzzInput is what FuzzBuild varies.
type fuzzInput struct {
	policy, podGroup uint8
	nodes, nproc     int32
	gpus, cpuMilli   int64
	launcherAsNode   bool
	shape            uint8
	// patchJob names the replicated job a runtimePatch changes, if any;
	// patchEnv adds an env var to its container, which the webhook refuses
	// for the reserved containers.
	patchJob string
	patchEnv bool
	envName  string
	command  string
}

// fuzzSeeds are FuzzBuild's seeds: every policy, gang scheduler and shape
// of runtime, and inputs that reach Build as well as inputs refused.
var fuzzSeeds = []fuzzInput{
	{0, 0, 4, 0, 8, 4000, true, 3, "node", false, "PYTHONUNBUFFERED", "torchrun"},
	{0, 0, 4, 0, 8, 4000, true, 3, "node", true, "PYTHONUNBUFFERED", "torchrun"},
	{1, 1, 2, 2, 0, 2500, true, 0, "launcher", false, "OMPI_MCA_x", "mpirun"},
	{1, 1, 2, 2, 0, 2500, true, 8, "launcher", false, "OMPI_MCA_x", "mpirun"},
	{2, 2, 0, 1, 16, 0, false, 1, "dataset-initializer", false, "", "tune"},
	{3, 0, -1, -5, -3, -1, false, 2, "", false, "DMLC_TASK_ID", ""},
	{4, 1, 1000, 64, 1, 1, true, 255, "missing", true, "PET_NNODES", "tune"},
	{5, 2, 1, 0, 2, 700, true, 7, "model-initializer", false, "JAX_PROCESS_ID", "python"},
	{6, 1, 3, 2, 4, 1500, false, 0, "node", false, "", "python"},
	{12, 0, 4, 8, 8, 2000, false, 16, "node", false, "FLUX_VIEW_IMAGE", "lmp"},
	{12, 0, 4, 8, 8, 2000, false, 16 | 128, "", false, "FLUX_VIEW_IMAGE", "lmp"},
}

// fuzzer holds what every execution of FuzzBuild shares, built once per
// process: the framework and the CRDs' schemas with their compiled CEL
// rules, and the API server's verdict on each runtime made.
type fuzzer struct {
	fw   *pipeline.Framework
	crds *dryrun.Schema
	// runtimes holds whether the schemas and CEL rules admit the runtime
	// fuzzRuntime makes of a runtimeKey. There are a few thousand keys,
	// and the same runtime always gets the same verdict: each goes through
	// the rules once, not once per TrainJob paired with it.
	runtimes map[runtimeKey]bool
	// built counts the inputs that reached Build.
	built int
}

// runtimeKey is fuzzRuntime's arguments.
type runtimeKey struct {
	policy, podGroup uint8
	launcherAsNode   bool
	shape            uint8
}

func newFuzzer(tb testing.TB) *fuzzer {
	crds, err := dryrun.NewSchema()
	if err != nil {
		tb.Fatal(err)
	}
	// The heap is small and an execution makes mostly garbage: collecting
	// less often leaves more of the CPU to the executions.
	gcPercent := debug.SetGCPercent(400)
	tb.Cleanup(func() { debug.SetGCPercent(gcPercent) })
	return &fuzzer{fw: newFramework(tb), crds: crds, runtimes: map[runtimeKey]bool{}}
}

// check runs one input through admission and Build.
func (z *fuzzer) check(t testing.TB, in fuzzInput) {
	// fuzzRuntime reads only the policy and gang scheduler modulo their
	// numbers: the others are the same runtimes.
	k := runtimeKey{in.policy % mlPolicies, in.podGroup % podGroupPolicies, in.launcherAsNode, in.shape}
	rt := fuzzRuntime(k.policy, k.podGroup, k.launcherAsNode, k.shape)
	tj := fuzzTrainJob(in)
	ctx := context.Background()
	rtAdmitted, seen := z.runtimes[k]
	if !seen {
		rtAdmitted = admitted(ctx, z.crds, rt.Object)
		z.runtimes[k] = rtAdmitted
	}
	// Build runs also on what the API server would refuse (render
	// admits, but a plugin must not panic on anything).
	ok := rtAdmitted && admitted(ctx, z.crds, tj)
	if _, errs := z.fw.Validate(ctx, rt, nil, tj); len(errs) > 0 {
		return
	}
	opts := pipeline.BuildOptions{}
	if in.shape&128 != 0 {
		opts.Trace = &pipeline.Trace{}
	}
	z.built++
	objs, _, err := z.fw.Build(ctx, tj, rt, opts)
	// Build promises only for what the API server admits: the CRD's
	// schema (numNodes ≥ 0, …) is not the plugins' to check.
	if err != nil || !ok {
		return
	}
	for _, problem := range checkBuilt(tj, objs) {
		t.Error(problem)
	}
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

// mlPolicies and podGroupPolicies are the numbers of ML policies and gang
// schedulers fuzzRuntime chooses from.
const (
	mlPolicies       = 7
	podGroupPolicies = 3
)

func fuzzRuntime(policy, podGroup uint8, launcherAsNode bool, shape uint8) *pipeline.Runtime {
	r := torchRuntime()
	spec := r.Spec
	src := &spec.MLPolicy.MLPolicySource
	*src = trainer.MLPolicySource{}
	switch policy % mlPolicies {
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
	switch podGroup % podGroupPolicies {
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

func fuzzTrainJob(in fuzzInput) *trainer.TrainJob {
	tj := torchTrainJob(in.nodes, in.gpus)
	tj.ObjectMeta = metav1.ObjectMeta{Name: "fuzz", Namespace: "default", UID: "uid"}
	t := tj.Spec.Trainer
	if in.nproc != 0 {
		t.NumProcPerNode = ptr.To(in.nproc)
	}
	t.ResourcesPerNode.Requests = corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(in.cpuMilli, resource.DecimalSI)}
	if in.envName != "" {
		t.Env = append(t.Env, corev1.EnvVar{Name: in.envName, Value: "1"})
	}
	switch in.command {
	case "tune":
		t.Command = []string{"tune", "run"}
		tj.Spec.RuntimeRef.Name = "torchtune-llama3.2-1b"
	case "":
		t.Command = nil
	default:
		t.Command = []string{in.command}
	}
	if in.shape&1 != 0 {
		tj.Spec.Initializer = nil
	}
	if in.shape&2 != 0 {
		tj.Spec.Trainer = nil
	}
	if in.patchJob != "" {
		tj.Spec.RuntimePatches = []trainer.RuntimePatch{{
			Manager: "example.com/fuzz",
			TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{Template: &trainer.JobSetTemplatePatch{
				Metadata: &metav1.ObjectMeta{Labels: map[string]string{"fuzz": "yes"}},
				Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: []trainer.ReplicatedJobPatch{{
					Name: in.patchJob,
					Template: &trainer.JobTemplatePatch{Spec: &trainer.JobSpecPatch{Template: &trainer.PodTemplatePatch{Spec: &trainer.PodSpecPatch{
						NodeSelector: map[string]string{"pool": "gpu"},
						Containers:   []trainer.ContainerPatch{{Name: in.patchJob}},
					}}}},
				}}},
			}},
		}}
		if in.patchEnv {
			c := &tj.Spec.RuntimePatches[0].TrainingRuntimeSpec.Template.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0]
			c.Env = []corev1.EnvVar{{Name: "X", Value: "y"}}
		}
	}
	return tj
}
