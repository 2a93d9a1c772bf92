package pipeline

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
)

// Runtime is the TrainingRuntime or ClusterTrainingRuntime a TrainJob references.
type Runtime struct {
	Object client.Object
	Spec   *trainer.TrainingRuntimeSpec
}

// RuntimeOf wraps a *TrainingRuntime or *ClusterTrainingRuntime.
func RuntimeOf(obj client.Object) (*Runtime, error) {
	switch r := obj.(type) {
	case *trainer.TrainingRuntime:
		return &Runtime{Object: r, Spec: &r.Spec}, nil
	case *trainer.ClusterTrainingRuntime:
		return &Runtime{Object: r, Spec: &r.Spec}, nil
	default:
		return nil, fmt.Errorf("unsupported runtime type %T", obj)
	}
}

// GroupKind is the runtime's group and kind.
func (r *Runtime) GroupKind() schema.GroupKind {
	if _, ok := r.Object.(*trainer.ClusterTrainingRuntime); ok {
		return schema.GroupKind{Group: trainer.GroupVersion.Group, Kind: trainer.ClusterTrainingRuntimeKind}
	}
	return schema.GroupKind{Group: trainer.GroupVersion.Group, Kind: trainer.TrainingRuntimeKind}
}

// RuntimeRefGroupKind is the GroupKind a TrainJob's runtimeRef names, with
// the API defaults applied.
func RuntimeRefGroupKind(tj *trainer.TrainJob) schema.GroupKind {
	return schema.GroupKind{
		Group: ptr.Deref(tj.Spec.RuntimeRef.APIGroup, trainer.GroupVersion.Group),
		Kind:  ptr.Deref(tj.Spec.RuntimeRef.Kind, trainer.ClusterTrainingRuntimeKind),
	}
}

// NewRuntimeInfo builds the RuntimeInfo of a TrainJob from its runtime
// (spec §2.5): the runtime template, then every runtimePatch in list order
// (strategic merge), then resourcesPerNode merged into the trainer's `node`
// container. Neither argument is modified.
func NewRuntimeInfo(tj *trainer.TrainJob, rt *Runtime) (*RuntimeInfo, error) {
	spec := rt.Spec
	info := &RuntimeInfo{
		Labels:      copyMap(spec.Template.Labels),
		Annotations: copyMap(spec.Template.Annotations),
		Template:    spec.Template.Spec.DeepCopy(),
	}
	if spec.MLPolicy != nil {
		info.RuntimePolicy.MLPolicy = spec.MLPolicy.DeepCopy()
	}
	if spec.PodGroupPolicy != nil {
		info.RuntimePolicy.PodGroupPolicy = spec.PodGroupPolicy.DeepCopy()
	}
	if len(tj.Spec.RuntimePatches) > 0 {
		info.RuntimeJobs = runtimeJobs(info.Template)
	}
	for k, p := range tj.Spec.RuntimePatches {
		if p.TrainingRuntimeSpec == nil || p.TrainingRuntimeSpec.Template == nil {
			continue
		}
		t := p.TrainingRuntimeSpec.Template
		if t.Metadata != nil {
			info.Labels = mergeMap(info.Labels, t.Metadata.Labels)
			info.Annotations = mergeMap(info.Annotations, t.Metadata.Annotations)
		}
		if t.Spec != nil {
			patched, err := patchJobSetSpec(info.Template, t.Spec)
			if err != nil {
				return nil, fmt.Errorf("spec.runtimePatches[%d] (manager %q): %w", k, p.Manager, err)
			}
			info.Template = patched
		}
	}

	info.PodSets = make([]PodSet, len(info.Template.ReplicatedJobs))
	for k := range info.Template.ReplicatedJobs {
		rj := &info.Template.ReplicatedJobs[k]
		ps := &info.PodSets[k]
		ps.Name = rj.Name
		ps.Ancestor = rj.Template.Labels[trainer.AncestorLabel]
		ps.Template = &rj.Template.Spec.Template
		count := ptr.Deref(rj.Template.Spec.Parallelism, 1)
		if ps.Ancestor == trainer.AncestorTrainer && info.RuntimePolicy.MLPolicy != nil {
			count = ptr.Deref(info.RuntimePolicy.MLPolicy.NumNodes, 1)
		}
		ps.Count = max(count, 1)
	}

	if tj.Spec.Trainer != nil && tj.Spec.Trainer.ResourcesPerNode != nil {
		if c := resourcesTarget(info).Container(trainer.Node); c != nil {
			mergeResources(&c.Resources, tj.Spec.Trainer.ResourcesPerNode)
		}
	}
	for k := range info.PodSets {
		info.PodSets[k].SinglePodRequests = PodRequests(&info.PodSets[k].Template.Spec)
	}
	return info, nil
}

func runtimeJobs(spec *jobsetv1alpha2.JobSetSpec) []RuntimeJob {
	out := make([]RuntimeJob, len(spec.ReplicatedJobs))
	for k, rj := range spec.ReplicatedJobs {
		pod := &rj.Template.Spec.Template.Spec
		out[k] = RuntimeJob{Name: rj.Name, Containers: containerNames(pod.Containers), InitContainers: containerNames(pod.InitContainers)}
	}
	return out
}

func containerNames(cs []corev1.Container) []string {
	names := make([]string, len(cs))
	for k, c := range cs {
		names[k] = c.Name
	}
	return names
}

// PodRequests are the effective resource requests of one pod of a spec. A
// limit without a request counts as a request of the same amount, as the
// API server defaults it when the pod is created.
func PodRequests(spec *corev1.PodSpec) corev1.ResourceList {
	pod := &corev1.Pod{Spec: *spec}
	if limitsWithoutRequests(spec.InitContainers) || limitsWithoutRequests(spec.Containers) {
		pod.Spec.InitContainers = requestsDefaulted(spec.InitContainers)
		pod.Spec.Containers = requestsDefaulted(spec.Containers)
	}
	return resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
}

func limitsWithoutRequests(cs []corev1.Container) bool {
	for _, c := range cs {
		for name := range c.Resources.Limits {
			if _, ok := c.Resources.Requests[name]; !ok {
				return true
			}
		}
	}
	return false
}

func requestsDefaulted(cs []corev1.Container) []corev1.Container {
	out := make([]corev1.Container, len(cs))
	for k, c := range cs {
		out[k] = c
		if len(c.Resources.Limits) == 0 {
			continue
		}
		req := make(corev1.ResourceList, len(c.Resources.Limits)+len(c.Resources.Requests))
		for name, q := range c.Resources.Limits {
			req[name] = q
		}
		for name, q := range c.Resources.Requests {
			req[name] = q
		}
		out[k].Resources.Requests = req
	}
	return out
}

// resourcesTarget is the pod set whose `node` container gets resourcesPerNode:
// the trainer step when an ML policy is set, or the job named `node` when
// MPI runs its launcher as a node.
func resourcesTarget(info *RuntimeInfo) *PodSet {
	if mp := info.MLPolicySource(); mp != nil && mp.MPI != nil && ptr.Deref(mp.MPI.RunLauncherAsNode, false) {
		return info.PodSet(trainer.Node)
	}
	if info.RuntimePolicy.MLPolicy != nil {
		return info.TrainerPodSet()
	}
	return nil
}

// mergeResources is a strategic merge of TrainJob resources over runtime
// resources: key by key, claims by name.
func mergeResources(dst *corev1.ResourceRequirements, src *corev1.ResourceRequirements) {
	dst.Limits = mergeResourceList(dst.Limits, src.Limits)
	dst.Requests = mergeResourceList(dst.Requests, src.Requests)
	for _, c := range src.Claims {
		replaced := false
		for k := range dst.Claims {
			if dst.Claims[k].Name == c.Name {
				dst.Claims[k] = c
				replaced = true
			}
		}
		if !replaced {
			dst.Claims = append(dst.Claims, c)
		}
	}
}

func mergeResourceList(dst, src corev1.ResourceList) corev1.ResourceList {
	if len(src) == 0 {
		return dst
	}
	if dst == nil {
		dst = make(corev1.ResourceList, len(src))
	}
	for k, v := range src {
		dst[k] = v.DeepCopy()
	}
	return dst
}

// patchJobSetSpec strategic-merges a patch into a JobSet spec, keeping the
// original order of replicated jobs (SMP may reorder list entries).
func patchJobSetSpec(spec *jobsetv1alpha2.JobSetSpec, patch *trainer.JobSetSpecPatch) (*jobsetv1alpha2.JobSetSpec, error) {
	orig, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	p, err := json.Marshal(patch)
	if err != nil {
		return nil, err
	}
	merged, err := strategicpatch.StrategicMergePatch(orig, p, jobsetv1alpha2.JobSetSpec{})
	if err != nil {
		return nil, err
	}
	out := &jobsetv1alpha2.JobSetSpec{}
	if err := json.Unmarshal(merged, out); err != nil {
		return nil, err
	}
	order := make(map[string]int, len(spec.ReplicatedJobs))
	for k, rj := range spec.ReplicatedJobs {
		order[rj.Name] = k
	}
	sorted := make([]jobsetv1alpha2.ReplicatedJob, 0, len(out.ReplicatedJobs))
	for _, rj := range spec.ReplicatedJobs {
		for _, m := range out.ReplicatedJobs {
			if m.Name == rj.Name {
				sorted = append(sorted, m)
			}
		}
	}
	for _, m := range out.ReplicatedJobs {
		if _, ok := order[m.Name]; !ok {
			sorted = append(sorted, m)
		}
	}
	out.ReplicatedJobs = sorted
	return out, nil
}

func copyMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func mergeMap(dst, src map[string]string) map[string]string {
	if len(src) == 0 {
		return dst
	}
	if dst == nil {
		dst = make(map[string]string, len(src))
	}
	for k, v := range src {
		dst[k] = v
	}
	return dst
}
