package jobset

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
)

var (
	runtimeRefPath     = field.NewPath("spec", "runtimeRef")
	runtimePatchesPath = field.NewPath("spec", "runtimePatches")
)

// reservedEnvContainers take their env from the TrainJob's trainer and
// initializer fields, never from runtimePatches.
var reservedEnvContainers = []string{trainer.DatasetInitializerName, trainer.ModelInitializerName, trainer.Node}

// Validate checks that the runtime has what the TrainJob's initializers
// need, that every runtimePatch targets a replicated job and containers of
// the runtime, and that runtimePatches change only while the TrainJob is
// (being) suspended and its JobSet runs no pods.
func (j *JobSet) Validate(ctx context.Context, info *pipeline.RuntimeInfo, oldObj, newObj *trainer.TrainJob) (admission.Warnings, field.ErrorList) {
	var errs field.ErrorList
	errs = append(errs, validateInitializers(info, newObj)...)
	errs = append(errs, validateRuntimePatches(info, newObj)...)
	errs = append(errs, j.validateRuntimePatchesUpdate(ctx, oldObj, newObj)...)
	return nil, errs
}

func validateInitializers(info *pipeline.RuntimeInfo, trainJob *trainer.TrainJob) field.ErrorList {
	in := trainJob.Spec.Initializer
	if in == nil {
		return nil
	}
	var errs field.ErrorList
	if in.Dataset != nil {
		errs = append(errs, validateInitializer(info, trainJob, trainer.DatasetInitializerName, "datasetConfig")...)
	}
	if in.Model != nil {
		errs = append(errs, validateInitializer(info, trainJob, trainer.ModelInitializerName, "modelConfig")...)
	}
	return errs
}

// validateInitializer checks that the runtime has the initializer's job, its
// same-named container, and that the container mounts the shared volume.
func validateInitializer(info *pipeline.RuntimeInfo, trainJob *trainer.TrainJob, name, config string) field.ErrorList {
	invalid := func(msg string) field.ErrorList {
		return field.ErrorList{field.Invalid(runtimeRefPath, trainJob.Spec.RuntimeRef, msg)}
	}
	ps := info.PodSet(name)
	if ps == nil {
		return invalid(fmt.Sprintf("must have %s job when trainJob is configured with input %s", name, config))
	}
	c := ps.AnyContainer(name)
	if c == nil {
		return invalid(fmt.Sprintf("must have container with name - %s in the %s job", name, name))
	}
	if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == trainer.InitializerVolume }) {
		return invalid(fmt.Sprintf("must have volumeMount with name - %s in container %s of the %s job", trainer.InitializerVolume, name, name))
	}
	return nil
}

// validateRuntimePatches checks each patch's manager and that it targets
// only replicated jobs and containers of the runtime.
//
// info is built from the template with the patches already applied, and a
// strategic merge patch adds the list entries it names but does not find:
// a patch naming a job or container the runtime lacks has created it. Such
// an entry is recognised because it holds exactly what the patches alone
// produce (patches cannot set an image, a command, replicas, ...), whereas
// an entry of the runtime holds the runtime's own fields as well.
func validateRuntimePatches(info *pipeline.RuntimeInfo, trainJob *trainer.TrainJob) field.ErrorList {
	var errs field.ErrorList
	for i, p := range trainJob.Spec.RuntimePatches {
		errs = append(errs, validation.IsDomainPrefixedPath(runtimePatchesPath.Index(i).Child("manager"), p.Manager)...)
	}
	alone, err := patchesAlone(trainJob.Spec.RuntimePatches)
	if err != nil {
		return append(errs, field.Invalid(runtimePatchesPath, trainJob.Spec.RuntimePatches, err.Error()))
	}
	var resourcesPerNode *corev1.ResourceRequirements
	if trainJob.Spec.Trainer != nil {
		resourcesPerNode = trainJob.Spec.Trainer.ResourcesPerNode
	}

	for i, p := range trainJob.Spec.RuntimePatches {
		spec := jobSetSpecPatch(p)
		if spec == nil {
			continue
		}
		jobsPath := runtimePatchesPath.Index(i).Child("trainingRuntimeSpec", "template", "spec", "replicatedJobs")
		for k, rjp := range spec.ReplicatedJobs {
			jobPath := jobsPath.Index(k)
			got := findJob(info.Template.ReplicatedJobs, rjp.Name)
			patched := findJob(alone.ReplicatedJobs, rjp.Name)
			if got == nil || jobFromPatchesOnly(got, patched, resourcesPerNode) {
				errs = append(errs, field.Invalid(jobPath.Child("name"), rjp.Name,
					"must not have replicated job that doesn't exist in the runtime job template"))
				continue
			}
			if rjp.Template == nil || rjp.Template.Spec == nil || rjp.Template.Spec.Template == nil || rjp.Template.Spec.Template.Spec == nil {
				continue
			}
			podPatch := rjp.Template.Spec.Template.Spec
			podPath := jobPath.Child("template", "spec", "template", "spec")
			gotPod, patchedPod := &got.Template.Spec.Template.Spec, &corev1.PodSpec{}
			if patched != nil {
				patchedPod = &patched.Template.Spec.Template.Spec
			}
			for c, cp := range podPatch.InitContainers {
				if !inRuntime(gotPod.InitContainers, patchedPod.InitContainers, cp.Name, resourcesPerNode) {
					errs = append(errs, field.Invalid(podPath.Child("initContainers").Index(c).Child("name"), cp.Name,
						fmt.Sprintf("must not have initContainer that doesn't exist in the runtime job %s", rjp.Name)))
				}
			}
			for c, cp := range podPatch.Containers {
				cPath := podPath.Child("containers").Index(c)
				switch {
				case !inRuntime(gotPod.Containers, patchedPod.Containers, cp.Name, resourcesPerNode):
					errs = append(errs, field.Invalid(cPath.Child("name"), cp.Name,
						fmt.Sprintf("must not have container that doesn't exist in the runtime job %s", rjp.Name)))
				case len(cp.Env) > 0 && slices.Contains(reservedEnvContainers, cp.Name):
					errs = append(errs, field.Forbidden(cPath.Child("env"),
						fmt.Sprintf("must not have envs for the %s, %s, %s containers", trainer.DatasetInitializerName, trainer.ModelInitializerName, trainer.Node)))
				}
			}
		}
	}
	return errs
}

func jobSetSpecPatch(p trainer.RuntimePatch) *trainer.JobSetSpecPatch {
	if p.TrainingRuntimeSpec == nil || p.TrainingRuntimeSpec.Template == nil {
		return nil
	}
	return p.TrainingRuntimeSpec.Template.Spec
}

// patchesAlone is what the patches make of a template without replicated
// jobs, merged the way the framework merges them into the runtime template.
func patchesAlone(patches []trainer.RuntimePatch) (*jobsetv1alpha2.JobSetSpec, error) {
	doc := []byte(`{"replicatedJobs":[]}`)
	for _, p := range patches {
		spec := jobSetSpecPatch(p)
		if spec == nil {
			continue
		}
		patch, err := json.Marshal(spec)
		if err != nil {
			return nil, err
		}
		if doc, err = strategicpatch.StrategicMergePatch(doc, patch, jobsetv1alpha2.JobSetSpec{}); err != nil {
			return nil, err
		}
	}
	out := &jobsetv1alpha2.JobSetSpec{}
	return out, json.Unmarshal(doc, out)
}

func findJob(rjs []jobsetv1alpha2.ReplicatedJob, name string) *jobsetv1alpha2.ReplicatedJob {
	for k := range rjs {
		if rjs[k].Name == name {
			return &rjs[k]
		}
	}
	return nil
}

// jobFromPatchesOnly reports whether a replicated job holds nothing but what
// the patches put there. Its `node` container may also have received the
// TrainJob's resourcesPerNode while the RuntimeInfo was built.
func jobFromPatchesOnly(got, patched *jobsetv1alpha2.ReplicatedJob, resourcesPerNode *corev1.ResourceRequirements) bool {
	if patched == nil {
		return false
	}
	if equality.Semantic.DeepEqual(got, patched) {
		return true
	}
	if resourcesPerNode == nil {
		return false
	}
	withResources := patched.DeepCopy()
	c := findContainer(withResources.Template.Spec.Template.Spec.Containers, trainer.Node)
	if c == nil {
		return false
	}
	c.Resources = *resourcesPerNode
	return equality.Semantic.DeepEqual(got, withResources)
}

// inRuntime reports whether the container named name is one of the
// runtime's, rather than one the patches created.
func inRuntime(got, patched []corev1.Container, name string, resourcesPerNode *corev1.ResourceRequirements) bool {
	g := findContainer(got, name)
	if g == nil {
		return false
	}
	p := findContainer(patched, name)
	return p == nil || !fromPatchesOnly(g, p, resourcesPerNode)
}

// fromPatchesOnly reports whether a container holds nothing but what the
// patches put there. The trainer's `node` container may also have received
// the TrainJob's resourcesPerNode while the RuntimeInfo was built.
func fromPatchesOnly(got, patched *corev1.Container, resourcesPerNode *corev1.ResourceRequirements) bool {
	if equality.Semantic.DeepEqual(got, patched) {
		return true
	}
	if resourcesPerNode == nil || got.Name != trainer.Node {
		return false
	}
	withResources := patched.DeepCopy()
	withResources.Resources = *resourcesPerNode
	return equality.Semantic.DeepEqual(got, withResources)
}

// validateRuntimePatchesUpdate allows changing runtimePatches only when the
// TrainJob is suspended before or after the update (Kueue edits patches and
// flips suspend in one request) and its JobSet, if any, runs no pods.
func (j *JobSet) validateRuntimePatchesUpdate(ctx context.Context, oldObj, newObj *trainer.TrainJob) field.ErrorList {
	if oldObj == nil || equality.Semantic.DeepEqual(oldObj.Spec.RuntimePatches, newObj.Spec.RuntimePatches) {
		return nil
	}
	if !ptr.Deref(oldObj.Spec.Suspend, false) && !ptr.Deref(newObj.Spec.Suspend, false) {
		return field.ErrorList{field.Forbidden(runtimePatchesPath,
			"RuntimePatches can only be modified when the TrainJob is suspended before or after the update")}
	}
	if j.client == nil {
		return nil
	}
	var js jobsetv1alpha2.JobSet
	if err := j.client.Get(ctx, client.ObjectKeyFromObject(newObj), &js); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return field.ErrorList{field.InternalError(runtimePatchesPath, err)}
	}
	var errs field.ErrorList
	for _, rj := range js.Status.ReplicatedJobsStatus {
		if rj.Active > 0 {
			errs = append(errs, field.Forbidden(runtimePatchesPath,
				fmt.Sprintf("RuntimePatches cannot be modified when the JobSet's ReplicatedJob %s is still active", rj.Name)))
		}
	}
	return errs
}
