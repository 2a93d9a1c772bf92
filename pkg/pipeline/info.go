package pipeline

import (
	"iter"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
)

// RuntimeInfo is what the Build phase works on: the runtime's JobSet
// template with the TrainJob's patches applied, and one PodSet per
// replicated job. Plugins mutate it; the JobSet plugin turns it into a JobSet.
type RuntimeInfo struct {
	// Labels and Annotations become the JobSet's metadata.
	Labels      map[string]string
	Annotations map[string]string

	// RuntimePolicy holds copies of the runtime's policies; plugins may
	// rewrite them (MPI settles numProcPerNode).
	RuntimePolicy RuntimePolicy

	// Scheduler holds labels and annotations added to every pod template.
	Scheduler Scheduler

	// Template is the JobSet spec being built: the runtime template after
	// runtimePatches and resourcesPerNode.
	Template *jobsetv1alpha2.JobSetSpec

	// PodSets are index-aligned with Template.ReplicatedJobs.
	PodSets []PodSet

	// RuntimeJobs are the runtime's own replicated jobs, before any
	// runtimePatch: what a patch may target. Recorded only when the TrainJob
	// has runtimePatches (a patch can otherwise add jobs and containers).
	RuntimeJobs []RuntimeJob
}

// RuntimeJob names a replicated job of the runtime and its containers.
type RuntimeJob struct {
	Name           string
	Containers     []string
	InitContainers []string
}

// RuntimeJob returns the runtime's replicated job named name, or nil.
func (i *RuntimeInfo) RuntimeJob(name string) *RuntimeJob {
	for k := range i.RuntimeJobs {
		if i.RuntimeJobs[k].Name == name {
			return &i.RuntimeJobs[k]
		}
	}
	return nil
}

// RuntimePolicy is the runtime's ML and PodGroup policy.
type RuntimePolicy struct {
	MLPolicy       *trainer.MLPolicy
	PodGroupPolicy *trainer.PodGroupPolicy
}

// Scheduler holds what gang scheduling adds to every pod template.
type Scheduler struct {
	PodLabels      map[string]string
	PodAnnotations map[string]string
}

// PodSet is one replicated job's pods.
type PodSet struct {
	// Name is the replicated job's name.
	Name string
	// Ancestor is the value of the trainjob-ancestor-step label, or "".
	Ancestor string
	// Count is the number of pods of one replica (parallelism and completions).
	Count int32
	// Endpoints are the pods' DNS names, set by PreBuildSync.
	Endpoints iter.Seq[string]
	// SinglePodRequests are the resource requests of one pod.
	SinglePodRequests corev1.ResourceList
	// DeviceRequests are the device requests of the pod's DRA claims, read
	// from their ResourceClaimTemplates and ResourceClaims (ReadClaims); a
	// claim whose object does not exist asks for nothing.
	DeviceRequests []resourcev1.DeviceRequest
	// Template points into Template.ReplicatedJobs[i]: plugins edit it in place.
	Template *corev1.PodTemplateSpec
	// EntrypointSetBy names the plugin that settled the `node` container's
	// command and args (torchtune, Flux); the builder then leaves them alone
	// instead of copying spec.trainer.command/args over them.
	EntrypointSetBy string
}

// PodSet returns the pod set of the replicated job named name, or nil.
func (i *RuntimeInfo) PodSet(name string) *PodSet {
	for k := range i.PodSets {
		if i.PodSets[k].Name == name {
			return &i.PodSets[k]
		}
	}
	return nil
}

// PodSetByAncestor returns the first pod set whose ancestor is ancestor, or nil.
func (i *RuntimeInfo) PodSetByAncestor(ancestor string) *PodSet {
	for k := range i.PodSets {
		if i.PodSets[k].Ancestor == ancestor {
			return &i.PodSets[k]
		}
	}
	return nil
}

// TrainerPodSet returns the pod set of the trainer step, or nil.
func (i *RuntimeInfo) TrainerPodSet() *PodSet { return i.PodSetByAncestor(trainer.AncestorTrainer) }

// ReplicatedJob returns the template's replicated job of a pod set.
func (i *RuntimeInfo) ReplicatedJob(ps *PodSet) *jobsetv1alpha2.ReplicatedJob {
	for k := range i.Template.ReplicatedJobs {
		if i.Template.ReplicatedJobs[k].Name == ps.Name {
			return &i.Template.ReplicatedJobs[k]
		}
	}
	return nil
}

// MLPolicySource returns the runtime's ML policy source, or nil.
func (i *RuntimeInfo) MLPolicySource() *trainer.MLPolicySource {
	if i.RuntimePolicy.MLPolicy == nil {
		return nil
	}
	return &i.RuntimePolicy.MLPolicy.MLPolicySource
}

// Container returns the regular container named name, or nil.
func (ps *PodSet) Container(name string) *corev1.Container {
	if ps == nil || ps.Template == nil {
		return nil
	}
	return findContainer(ps.Template.Spec.Containers, name)
}

// AnyContainer returns the regular container named name, else the init
// container of that name, or nil.
func (ps *PodSet) AnyContainer(name string) *corev1.Container {
	if c := ps.Container(name); c != nil {
		return c
	}
	if ps == nil || ps.Template == nil {
		return nil
	}
	return findContainer(ps.Template.Spec.InitContainers, name)
}

// UpsertVolume adds or replaces the pod's volume of the same name.
func (ps *PodSet) UpsertVolume(v corev1.Volume) {
	vols := &ps.Template.Spec.Volumes
	for k := range *vols {
		if (*vols)[k].Name == v.Name {
			(*vols)[k] = v
			return
		}
	}
	*vols = append(*vols, v)
}

func findContainer(cs []corev1.Container, name string) *corev1.Container {
	for k := range cs {
		if cs[k].Name == name {
			return &cs[k]
		}
	}
	return nil
}

// UpsertEnv sets each variable in the container, replacing one of the same
// name in place and appending new ones in order.
func UpsertEnv(c *corev1.Container, envs ...corev1.EnvVar) {
	for _, e := range envs {
		found := false
		for k := range c.Env {
			if c.Env[k].Name == e.Name {
				c.Env[k] = e
				found = true
				break
			}
		}
		if !found {
			c.Env = append(c.Env, e)
		}
	}
}

// UpsertPort adds the port, replacing one with the same number or name.
func UpsertPort(c *corev1.Container, p corev1.ContainerPort) {
	for k := range c.Ports {
		if c.Ports[k].ContainerPort == p.ContainerPort || (p.Name != "" && c.Ports[k].Name == p.Name) {
			c.Ports[k] = p
			return
		}
	}
	c.Ports = append(c.Ports, p)
}

// UpsertVolumeMount adds the mount, replacing one at the same mount path.
func UpsertVolumeMount(c *corev1.Container, m corev1.VolumeMount) {
	for k := range c.VolumeMounts {
		if c.VolumeMounts[k].MountPath == m.MountPath {
			c.VolumeMounts[k] = m
			return
		}
	}
	c.VolumeMounts = append(c.VolumeMounts, m)
}

// CompletionIndexEnv is an env var whose value is the pod's completion index
// (its rank in an indexed Job).
func CompletionIndexEnv(name string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['batch.kubernetes.io/job-completion-index']"},
	}}
}

// GPUsPerNode is the GPUs of one pod: the integer value of the first
// resource of its container whose name contains "gpu" (any case), in
// requests, else in limits; else the devices its DRA claims request
// (KEP-2782): the sum of the counts of the requests whose device class's
// name contains "gpu". Extended resources come first, as upstream's; 0 when
// there is neither.
func GPUsPerNode(r corev1.ResourceRequirements, claims []resourcev1.DeviceRequest) int64 {
	if n, ok := gpuIn(r.Requests); ok {
		return n
	}
	if n, ok := gpuIn(r.Limits); ok {
		return n
	}
	var n int64
	for _, req := range claims {
		class, mode, count := ExactRequest(req)
		// A request for all the devices of a class has no count before
		// allocation.
		if strings.Contains(strings.ToLower(class), "gpu") && mode != resourcev1.DeviceAllocationModeAll {
			n += max(count, 1)
		}
	}
	return n
}

// PodGPUs is the GPUs one pod of spec asks for: those of its containers'
// resources (GPUsPerNode of each), else those of its DRA claims, whose
// device requests are claims.
func PodGPUs(spec *corev1.PodSpec, claims []resourcev1.DeviceRequest) int64 {
	var n int64
	for _, c := range spec.Containers {
		n += GPUsPerNode(c.Resources, nil)
	}
	if n > 0 {
		return n
	}
	return GPUsPerNode(corev1.ResourceRequirements{}, claims)
}

// ExactRequest is a device request's class, mode and count; of a request
// with alternatives, those of the first, the one the scheduler prefers.
func ExactRequest(r resourcev1.DeviceRequest) (string, resourcev1.DeviceAllocationMode, int64) {
	if e := r.Exactly; e != nil {
		return e.DeviceClassName, e.AllocationMode, e.Count
	}
	if len(r.FirstAvailable) > 0 {
		s := r.FirstAvailable[0]
		return s.DeviceClassName, s.AllocationMode, s.Count
	}
	return "", "", 0
}

func gpuIn(l corev1.ResourceList) (int64, bool) {
	name := GPUResourceIn(l)
	if name == "" {
		return 0, false
	}
	q := l[name]
	return q.Value(), true
}

// GPUResourceIn is the GPU resource of l: of the names that hold "gpu" (nvidia.com/gpu, amd.com/gpu), the
// first in sorted order; "" when there is none.
func GPUResourceIn(l corev1.ResourceList) corev1.ResourceName {
	var name corev1.ResourceName
	for k := range l {
		if strings.Contains(strings.ToLower(string(k)), "gpu") && (name == "" || k < name) {
			name = k
		}
	}
	return name
}

// TrainerResources returns the resources of the trainer's `node` container
// after resourcesPerNode was merged, and whether there is such a container.
func (i *RuntimeInfo) TrainerResources() (corev1.ResourceRequirements, bool) {
	if _, c := i.trainerNode(); c != nil {
		return c.Resources, true
	}
	return corev1.ResourceRequirements{}, false
}

// TrainerGPUs is GPUsPerNode of the trainer's `node` container and of its
// pod's DRA claims.
func (i *RuntimeInfo) TrainerGPUs() int64 {
	ps, _ := i.trainerNode()
	return ps.GPUs(trainer.Node)
}

// trainerNode is the trainer's `node` container and its pod set: the
// trainer step's, else the `node` replicated job's; nil when neither has one.
func (i *RuntimeInfo) trainerNode() (*PodSet, *corev1.Container) {
	for _, ps := range []*PodSet{i.TrainerPodSet(), i.PodSet(trainer.Node)} {
		if c := ps.Container(trainer.Node); c != nil {
			return ps, c
		}
	}
	return nil, nil
}

// GPUs is GPUsPerNode of the pod set's container named container (none:
// no resources) and of its pod's DRA claims.
func (ps *PodSet) GPUs(container string) int64 {
	if ps == nil {
		return 0
	}
	var r corev1.ResourceRequirements
	if c := ps.Container(container); c != nil {
		r = c.Resources
	}
	return GPUsPerNode(r, ps.DeviceRequests)
}
