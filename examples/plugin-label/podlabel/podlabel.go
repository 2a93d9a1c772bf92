// Package podlabel is an example of a pipeline plugin written outside the
// project: at EnforcePodSpec it gives every trainer pod a label and every
// trainer container an env var, both with the TrainJob's name, as a
// platform team might for its cost accounting. It uses only what any
// plugin may use: the framework's interfaces and the RuntimeInfo helpers.
package podlabel

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
)

// Name is the plugin's name in the registry and in the operator's
// configuration.
const Name = "PodLabel"

// What the trainer pods get.
const (
	Label = "example.com/trainjob"
	Env   = "TRAINJOB_NAME"
)

// PodLabel labels the trainer pods with their TrainJob.
type PodLabel struct{}

var _ pipeline.EnforcePodSpecPlugin = (*PodLabel)(nil)

// New builds the plugin; it needs nothing from the Handle.
func New(context.Context, pipeline.Handle) (pipeline.Plugin, error) { return &PodLabel{}, nil }

// Name returns the plugin's name.
func (*PodLabel) Name() string { return Name }

// EnforcePodSpec labels the trainer step's pod template and sets the env
// var in each of its containers. A runtime without a trainer step is left
// alone.
func (*PodLabel) EnforcePodSpec(info *pipeline.RuntimeInfo, trainJob *trainer.TrainJob) error {
	ps := info.TrainerPodSet()
	if ps == nil || ps.Template == nil {
		return nil
	}
	if ps.Template.Labels == nil {
		ps.Template.Labels = map[string]string{}
	}
	ps.Template.Labels[Label] = trainJob.Name
	for k := range ps.Template.Spec.Containers {
		pipeline.UpsertEnv(&ps.Template.Spec.Containers[k], corev1.EnvVar{Name: Env, Value: trainJob.Name})
	}
	return nil
}
