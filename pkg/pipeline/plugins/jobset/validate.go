package jobset

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	errs = append(errs, validateRuntimeJobNames(info, newObj)...)
	errs = append(errs, validateInitializers(info, newObj)...)
	errs = append(errs, validateRuntimePatches(info, newObj)...)
	errs = append(errs, j.validateRuntimePatchesUpdate(ctx, oldObj, newObj)...)
	return nil, errs
}

// validateRuntimeJobNames refuses a runtime whose replicated jobs share a
// name: the runtime's CRD does not key them by name, but the JobSet's does,
// so the JobSet built would be refused (or render would print one the API
// server refuses).
func validateRuntimeJobNames(info *pipeline.RuntimeInfo, trainJob *trainer.TrainJob) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for _, rj := range info.Template.ReplicatedJobs {
		if seen[rj.Name] {
			errs = append(errs, field.Invalid(runtimeRefPath, trainJob.Spec.RuntimeRef,
				fmt.Sprintf("must not have replicated job %s twice in the runtime job template", rj.Name)))
		}
		seen[rj.Name] = true
	}
	return errs
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

// validateRuntimePatches checks each patch's manager and that every
// replicated job and (init) container it names is the runtime's own — the
// RuntimeInfo records them before the patches are merged, since merging
// would create what a patch names — and that it sets no env on the
// containers whose env the TrainJob owns.
func validateRuntimePatches(info *pipeline.RuntimeInfo, trainJob *trainer.TrainJob) field.ErrorList {
	var errs field.ErrorList
	for i, p := range trainJob.Spec.RuntimePatches {
		errs = append(errs, validation.IsDomainPrefixedPath(runtimePatchesPath.Index(i).Child("manager"), p.Manager)...)
		spec := jobSetSpecPatch(p)
		if spec == nil {
			continue
		}
		jobsPath := runtimePatchesPath.Index(i).Child("trainingRuntimeSpec", "template", "spec", "replicatedJobs")
		for k, rjp := range spec.ReplicatedJobs {
			jobPath := jobsPath.Index(k)
			rj := info.RuntimeJob(rjp.Name)
			if rj == nil {
				errs = append(errs, field.Invalid(jobPath.Child("name"), rjp.Name,
					"must not have replicated job that doesn't exist in the runtime job template"))
				continue
			}
			if rjp.Template == nil || rjp.Template.Spec == nil || rjp.Template.Spec.Template == nil || rjp.Template.Spec.Template.Spec == nil {
				continue
			}
			podPatch := rjp.Template.Spec.Template.Spec
			podPath := jobPath.Child("template", "spec", "template", "spec")
			for c, cp := range podPatch.InitContainers {
				if !slices.Contains(rj.InitContainers, cp.Name) {
					errs = append(errs, field.Invalid(podPath.Child("initContainers").Index(c).Child("name"), cp.Name,
						fmt.Sprintf("must not have initContainer that doesn't exist in the runtime job %s", rjp.Name)))
				}
			}
			for c, cp := range podPatch.Containers {
				cPath := podPath.Child("containers").Index(c)
				switch {
				case !slices.Contains(rj.Containers, cp.Name):
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
	var js jobsetv1alpha2.JobSet
	if err := pipeline.GetControlled(ctx, j.client, newObj, client.ObjectKeyFromObject(newObj), &js); err != nil {
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
