package webhook

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	trainjobadmission "github.com/kubectl-trainjob/kubectl-trainjob/pkg/admission"
	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/optimization"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/optimization/search"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/snapshot"
)

// OptimizationJobValidator checks new OptimizationJobs for what the CRD's
// schema and CEL rules cannot say: the search must be buildable from the
// parameters (search.New: a finite number for every bound, an Int space
// holding an integer, no two parameters with one environment variable), and
// the last trial must be a TrainJob the TrainJob webhook admits (its name
// within the runtime's limit, its template valid for the runtime), when the
// runtime exists; without it the OptimizationJob is admitted with a
// warning, as its trials are refused until it exists. The spec is
// immutable (CEL): updates are not checked.
type OptimizationJobValidator struct {
	client    client.Reader
	live      client.Reader
	framework *pipeline.Framework
}

var _ admission.Validator[*trainer.OptimizationJob] = (*OptimizationJobValidator)(nil)

// ValidateCreate validates a new OptimizationJob.
func (v *OptimizationJobValidator) ValidateCreate(ctx context.Context, oj *trainer.OptimizationJob) (admission.Warnings, error) {
	if _, err := search.New(&oj.Spec, 0); err != nil {
		return nil, err
	}
	last, err := optimization.NewTrial(oj, max(int(oj.Spec.NumTrials), 1)-1, nil)
	if err != nil {
		return nil, err
	}
	rt, err := snapshot.LiveRuntime(ctx, v.client, v.live, last)
	if err != nil {
		return admission.Warnings{fmt.Sprintf("spec.trainJobTemplate.spec.runtimeRef: %v: the trials are refused until it exists", err)}, nil
	}
	resolver := trainjobadmission.ResolverFunc(func(context.Context, *trainer.TrainJob, *trainer.TrainJob) (*pipeline.Runtime, error) { return rt, nil })
	warnings, err := trainjobadmission.Admit(ctx, v.framework, resolver, nil, last)
	if err != nil {
		return warnings, field.Invalid(field.NewPath("spec", "trainJobTemplate"), last.Name,
			fmt.Sprintf("its last trial, TrainJob %q, would be refused: %v", last.Name, err))
	}
	return warnings, nil
}

// ValidateUpdate allows every update: the spec cannot change.
func (v *OptimizationJobValidator) ValidateUpdate(context.Context, *trainer.OptimizationJob, *trainer.OptimizationJob) (admission.Warnings, error) {
	return nil, nil
}

// ValidateDelete allows every deletion.
func (v *OptimizationJobValidator) ValidateDelete(context.Context, *trainer.OptimizationJob) (admission.Warnings, error) {
	return nil, nil
}
