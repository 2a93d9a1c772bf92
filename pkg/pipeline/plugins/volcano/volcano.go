// Package volcano is the Volcano plugin: for runtimes with the `volcano`
// podGroupPolicy it gang-schedules all the pods of a TrainJob with a Volcano
// PodGroup (scheduling.volcano.sh/v1beta1) in the queue the runtime or a
// runtimePatch names, and annotates every pod with it.
package volcano

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	volcanov1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/podgroup"
)

// Name is the plugin's name in the registry.
const Name = "Volcano"

// Volcano builds the TrainJob's Volcano PodGroup.
type Volcano struct {
	// client reads the cluster; mapper tells whether it serves PodGroups.
	client client.Reader
	mapper meta.RESTMapper
	logger logr.Logger
}

var (
	_ pipeline.CustomValidationPlugin      = (*Volcano)(nil)
	_ pipeline.EnforcePodGroupPolicyPlugin = (*Volcano)(nil)
	_ pipeline.ComponentBuilderPlugin      = (*Volcano)(nil)
	_ pipeline.WatchExtensionPlugin        = (*Volcano)(nil)
)

// New builds the Volcano plugin.
func New(ctx context.Context, h pipeline.Handle) (pipeline.Plugin, error) {
	return &Volcano{client: h.Reader(), mapper: h.RESTMapper(), logger: ctrl.LoggerFrom(ctx).WithValues("plugin", Name)}, nil
}

// Name returns the plugin's name.
func (v *Volcano) Name() string { return Name }

func policy(info *pipeline.RuntimeInfo) *trainer.VolcanoPodGroupPolicySource {
	if p := info.RuntimePolicy.PodGroupPolicy; p != nil {
		return p.Volcano
	}
	return nil
}

// The PriorityClasses the API server provides without an object.
var builtinPriorityClasses = map[string]bool{"system-cluster-critical": true, "system-node-critical": true}

var priorityClassNamePath = field.NewPath("spec", "templateSpec", "priorityClassName")

// Validate checks that a queue, when named, is not empty, and that the
// PriorityClasses the pods use exist.
func (v *Volcano) Validate(ctx context.Context, info *pipeline.RuntimeInfo, _, newObj *trainer.TrainJob) (admission.Warnings, field.ErrorList) {
	if policy(info) == nil {
		return nil, nil
	}
	var errs field.ErrorList
	if queue, ok := info.Annotations[volcanov1beta1.QueueNameAnnotationKey]; ok && queue == "" {
		errs = append(errs, field.Invalid(queuePath(newObj), queue, "Volcano queue name must not be empty"))
	}
	checked := map[string]bool{}
	for _, rj := range info.Template.ReplicatedJobs {
		name := rj.Template.Spec.Template.Spec.PriorityClassName
		if name == "" || builtinPriorityClasses[name] || checked[name] {
			continue
		}
		checked[name] = true
		var pc schedulingv1.PriorityClass
		switch err := v.client.Get(ctx, client.ObjectKey{Name: name}, &pc); {
		case apierrors.IsNotFound(err):
			errs = append(errs, field.Invalid(priorityClassNamePath, name, fmt.Sprintf("PriorityClass %q doesn't exist: %v", name, err)))
		case err != nil:
			errs = append(errs, field.InternalError(priorityClassNamePath, err))
		}
	}
	return nil, errs
}

// queuePath is where the queue annotation was set: in the last runtimePatch
// that sets it, else in the runtime.
func queuePath(trainJob *trainer.TrainJob) *field.Path {
	patches := trainJob.Spec.RuntimePatches
	for i := len(patches) - 1; i >= 0; i-- {
		s := patches[i].TrainingRuntimeSpec
		if s == nil || s.Template == nil || s.Template.Metadata == nil {
			continue
		}
		if _, ok := s.Template.Metadata.Annotations[volcanov1beta1.QueueNameAnnotationKey]; ok {
			return field.NewPath("spec", "runtimePatches").Index(i).
				Child("trainingRuntimeSpec", "template", "metadata", "annotations").Key(volcanov1beta1.QueueNameAnnotationKey)
		}
	}
	return field.NewPath("spec", "runtimeRef")
}

// EnforcePodGroupPolicy puts every pod in the TrainJob's PodGroup.
func (v *Volcano) EnforcePodGroupPolicy(info *pipeline.RuntimeInfo, trainJob *trainer.TrainJob) error {
	if policy(info) == nil {
		return nil
	}
	if info.Scheduler.PodAnnotations == nil {
		info.Scheduler.PodAnnotations = make(map[string]string, 1)
	}
	info.Scheduler.PodAnnotations[volcanov1beta1.KubeGroupNameAnnotationKey] = trainJob.Name
	return nil
}

// Build returns the TrainJob's PodGroup. An existing PodGroup is updated
// only while the TrainJob is suspended: the gang of a running job is fixed.
func (v *Volcano) Build(ctx context.Context, info *pipeline.RuntimeInfo, trainJob *trainer.TrainJob) ([]client.Object, error) {
	p := policy(info)
	if p == nil {
		return nil, nil
	}
	if fixed, err := podgroup.Fixed(ctx, v.client, trainJob, &volcanov1beta1.PodGroup{}); err != nil || fixed {
		return nil, err
	}
	minMember, minResources := podgroup.GangSize(info)
	pg := &volcanov1beta1.PodGroup{
		TypeMeta:   metav1.TypeMeta{APIVersion: volcanov1beta1.SchemeGroupVersion.String(), Kind: "PodGroup"},
		ObjectMeta: pipeline.OwnedObjectMeta(trainJob, ""),
		Spec: volcanov1beta1.PodGroupSpec{
			MinMember:       minMember,
			MinResources:    &minResources,
			Queue:           info.Annotations[volcanov1beta1.QueueNameAnnotationKey],
			NetworkTopology: p.NetworkTopology.DeepCopy(),
		},
	}
	for _, rj := range info.Template.ReplicatedJobs {
		if name := rj.Template.Spec.Template.Spec.PriorityClassName; name != "" {
			pg.Spec.PriorityClassName = name
		}
	}
	return []client.Object{pg}, nil
}

// ReconcilerBuilders watch the PodGroups the TrainJobs own, and LimitRanges
// and RuntimeClasses, which change what a suspended TrainJob's pods request.
// Without the PodGroup CRD there is nothing to watch.
func (v *Volcano) ReconcilerBuilders() []pipeline.ReconcilerBuilder {
	return podgroup.ReconcilerBuilders(v.mapper, v.logger, volcanov1beta1.SchemeGroupVersion.WithKind("PodGroup"), &volcanov1beta1.PodGroup{})
}
