// Package coscheduling is the CoScheduling plugin: for runtimes with the
// `coscheduling` podGroupPolicy it gang-schedules all the pods of a TrainJob
// with a scheduler-plugins PodGroup (scheduling.x-k8s.io/v1alpha1) and
// labels every pod with it.
package coscheduling

import (
	"context"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/podgroup"
)

// Name is the plugin's name in the registry.
const Name = "CoScheduling"

// CoScheduling builds the TrainJob's scheduler-plugins PodGroup.
type CoScheduling struct {
	// client reads the cluster; mapper tells whether it serves PodGroups.
	client client.Reader
	mapper meta.RESTMapper
	logger logr.Logger
}

var (
	_ pipeline.EnforcePodGroupPolicyPlugin = (*CoScheduling)(nil)
	_ pipeline.ComponentBuilderPlugin      = (*CoScheduling)(nil)
	_ pipeline.WatchExtensionPlugin        = (*CoScheduling)(nil)
)

// New builds the CoScheduling plugin.
func New(ctx context.Context, h pipeline.Handle) (pipeline.Plugin, error) {
	return &CoScheduling{client: h.Reader(), mapper: h.RESTMapper(), logger: ctrl.LoggerFrom(ctx).WithValues("plugin", Name)}, nil
}

// Name returns the plugin's name.
func (c *CoScheduling) Name() string { return Name }

func policy(info *pipeline.RuntimeInfo) *trainer.CoschedulingPodGroupPolicySource {
	if p := info.RuntimePolicy.PodGroupPolicy; p != nil {
		return p.Coscheduling
	}
	return nil
}

// EnforcePodGroupPolicy puts every pod in the TrainJob's PodGroup.
func (c *CoScheduling) EnforcePodGroupPolicy(info *pipeline.RuntimeInfo, trainJob *trainer.TrainJob) error {
	if policy(info) == nil {
		return nil
	}
	if info.Scheduler.PodLabels == nil {
		info.Scheduler.PodLabels = make(map[string]string, 1)
	}
	info.Scheduler.PodLabels[schedv1alpha1.PodGroupLabel] = trainJob.Name
	return nil
}

// Build returns the TrainJob's PodGroup. An existing PodGroup is updated
// only while the TrainJob is suspended: the gang of a running job is fixed.
func (c *CoScheduling) Build(ctx context.Context, info *pipeline.RuntimeInfo, trainJob *trainer.TrainJob) ([]client.Object, error) {
	p := policy(info)
	if p == nil {
		return nil, nil
	}
	if fixed, err := podgroup.Fixed(ctx, c.client, trainJob, &schedv1alpha1.PodGroup{}); err != nil || fixed {
		return nil, err
	}
	minMember, minResources := podgroup.GangSize(info)
	var timeout *int32
	if p.ScheduleTimeoutSeconds != nil {
		timeout = ptr.To(*p.ScheduleTimeoutSeconds)
	}
	pg := &schedv1alpha1.PodGroup{
		TypeMeta:   metav1.TypeMeta{APIVersion: schedv1alpha1.SchemeGroupVersion.String(), Kind: "PodGroup"},
		ObjectMeta: pipeline.OwnedObjectMeta(trainJob, ""),
		Spec: schedv1alpha1.PodGroupSpec{
			MinMember:              minMember,
			MinResources:           minResources,
			ScheduleTimeoutSeconds: timeout,
		},
	}
	return []client.Object{pg}, nil
}

// ReconcilerBuilders watch the PodGroups the TrainJobs own, and LimitRanges
// and RuntimeClasses, which change what a suspended TrainJob's pods request.
// Without the PodGroup CRD there is nothing to watch.
func (c *CoScheduling) ReconcilerBuilders() []pipeline.ReconcilerBuilder {
	return podgroup.ReconcilerBuilders(c.mapper, c.logger, schedv1alpha1.SchemeGroupVersion.WithKind("PodGroup"), &schedv1alpha1.PodGroup{})
}
