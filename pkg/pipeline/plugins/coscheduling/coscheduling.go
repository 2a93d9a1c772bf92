// Package coscheduling is the CoScheduling plugin: for runtimes with the
// `coscheduling` podGroupPolicy it gang-schedules all the pods of a TrainJob
// with a scheduler-plugins PodGroup (scheduling.x-k8s.io/v1alpha1) and
// labels every pod with it.
package coscheduling

import (
	"context"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/podgroup"
)

// Name is the plugin's name in the registry.
const Name = "CoScheduling"

// CoScheduling builds the TrainJob's scheduler-plugins PodGroup.
type CoScheduling struct {
	// client reads the cluster; nil offline, where nothing exists yet.
	client client.Client
	logger logr.Logger
}

var (
	_ pipeline.EnforcePodGroupPolicyPlugin = (*CoScheduling)(nil)
	_ pipeline.ComponentBuilderPlugin      = (*CoScheduling)(nil)
	_ pipeline.WatchExtensionPlugin        = (*CoScheduling)(nil)
)

// New builds the CoScheduling plugin.
func New(ctx context.Context, h pipeline.Handle) (pipeline.Plugin, error) {
	return &CoScheduling{client: h.Client, logger: ctrl.LoggerFrom(ctx).WithValues("plugin", Name)}, nil
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
	if !ptr.Deref(trainJob.Spec.Suspend, false) {
		if exists, err := c.podGroupExists(ctx, trainJob); err != nil || exists {
			return nil, err
		}
	}
	minMember, minResources := podgroup.GangSize(info)
	var timeout *int32
	if p.ScheduleTimeoutSeconds != nil {
		timeout = ptr.To(*p.ScheduleTimeoutSeconds)
	}
	pg := &schedv1alpha1.PodGroup{
		TypeMeta: metav1.TypeMeta{APIVersion: schedv1alpha1.SchemeGroupVersion.String(), Kind: "PodGroup"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            trainJob.Name,
			Namespace:       trainJob.Namespace,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(trainJob, trainer.GroupVersion.WithKind(trainer.TrainJobKind))},
		},
		Spec: schedv1alpha1.PodGroupSpec{
			MinMember:              minMember,
			MinResources:           minResources,
			ScheduleTimeoutSeconds: timeout,
		},
	}
	return []client.Object{pg}, nil
}

func (c *CoScheduling) podGroupExists(ctx context.Context, trainJob *trainer.TrainJob) (bool, error) {
	if c.client == nil {
		return false, nil
	}
	var pg schedv1alpha1.PodGroup
	if err := c.client.Get(ctx, client.ObjectKeyFromObject(trainJob), &pg); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return true, nil
}

// ReconcilerBuilders watch the PodGroups the TrainJobs own, and LimitRanges
// and RuntimeClasses, which change what a suspended TrainJob's pods request.
// Without the PodGroup CRD there is nothing to watch.
func (c *CoScheduling) ReconcilerBuilders() []pipeline.ReconcilerBuilder {
	if c.client == nil {
		return nil
	}
	gvk := schedv1alpha1.SchemeGroupVersion.WithKind("PodGroup")
	if _, err := c.client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
		c.logger.Error(err, "PodGroup CRDs must be installed in advance")
		return nil
	}
	return []pipeline.ReconcilerBuilder{
		func(b *builder.Builder, _ client.Client, _ cache.Cache) *builder.Builder {
			return b.Owns(&schedv1alpha1.PodGroup{})
		},
		func(b *builder.Builder, cl client.Client, _ cache.Cache) *builder.Builder {
			return b.Watches(&corev1.LimitRange{}, handler.EnqueueRequestsFromMapFunc(podgroup.SuspendedTrainJobsInNamespace(cl)))
		},
		func(b *builder.Builder, cl client.Client, _ cache.Cache) *builder.Builder {
			return b.Watches(&nodev1.RuntimeClass{}, handler.EnqueueRequestsFromMapFunc(podgroup.SuspendedTrainJobsUsingRuntimeClass(cl)))
		},
	}
}
