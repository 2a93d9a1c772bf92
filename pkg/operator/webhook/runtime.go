package webhook

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	trainjobadmission "github.com/kubectl-trainjob/kubectl-trainjob/pkg/admission"
	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
)

// TrainingRuntimeValidator checks new TrainingRuntimes; updates are not
// checked (as upstream).
type TrainingRuntimeValidator struct{}

var _ admission.Validator[*trainer.TrainingRuntime] = (*TrainingRuntimeValidator)(nil)

// ValidateCreate validates a new TrainingRuntime.
func (TrainingRuntimeValidator) ValidateCreate(_ context.Context, rt *trainer.TrainingRuntime) (admission.Warnings, error) {
	return nil, trainjobadmission.ValidateRuntimeSpec(&rt.Spec).ToAggregate()
}

// ValidateUpdate allows every update.
func (TrainingRuntimeValidator) ValidateUpdate(context.Context, *trainer.TrainingRuntime, *trainer.TrainingRuntime) (admission.Warnings, error) {
	return nil, nil
}

// ValidateDelete allows every deletion.
func (TrainingRuntimeValidator) ValidateDelete(context.Context, *trainer.TrainingRuntime) (admission.Warnings, error) {
	return nil, nil
}

// ClusterTrainingRuntimeValidator checks ClusterTrainingRuntimes on create
// and update, and warns about a deprecated one on create.
type ClusterTrainingRuntimeValidator struct{}

var _ admission.Validator[*trainer.ClusterTrainingRuntime] = (*ClusterTrainingRuntimeValidator)(nil)

// ValidateCreate validates a new ClusterTrainingRuntime.
func (ClusterTrainingRuntimeValidator) ValidateCreate(_ context.Context, rt *trainer.ClusterTrainingRuntime) (admission.Warnings, error) {
	var warnings admission.Warnings
	if rt.Labels[trainer.SupportLabel] == trainer.SupportDeprecated {
		warnings = append(warnings, fmt.Sprintf("ClusterTrainingRuntime %q is deprecated and will be removed in a future release of Kubeflow Trainer. See runtime deprecation policy: %s",
			rt.Name, trainer.DeprecationPolicyURL))
	}
	return warnings, trainjobadmission.ValidateRuntimeSpec(&rt.Spec).ToAggregate()
}

// ValidateUpdate validates a changed ClusterTrainingRuntime.
func (ClusterTrainingRuntimeValidator) ValidateUpdate(_ context.Context, _, rt *trainer.ClusterTrainingRuntime) (admission.Warnings, error) {
	return nil, trainjobadmission.ValidateRuntimeSpec(&rt.Spec).ToAggregate()
}

// ValidateDelete allows every deletion.
func (ClusterTrainingRuntimeValidator) ValidateDelete(context.Context, *trainer.ClusterTrainingRuntime) (admission.Warnings, error) {
	return nil, nil
}
