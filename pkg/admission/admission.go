// Package admission is the TrainJob validating webhook's decision, written once: the operator's webhook
// (pkg/operator/webhook) asks it with the live cluster as resolver, `render` and `describe-pipeline -f`
// (pkg/dryrun) with the files they read, so both word every refusal and warning alike. It must not read the
// API server itself: what it needs comes through the Resolver.
package admission

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
)

// TrainJobValidator is the name of the TrainJob validating webhook, which the API server puts in every denial.
const TrainJobValidator = "validator.trainjob.trainer.kubeflow.org"

// The GroupKinds a runtimeRef may name.
var (
	TrainingRuntime        = schema.GroupKind{Group: trainer.GroupVersion.Group, Kind: trainer.TrainingRuntimeKind}
	ClusterTrainingRuntime = schema.GroupKind{Group: trainer.GroupVersion.Group, Kind: trainer.ClusterTrainingRuntimeKind}
)

// Resolver finds the runtime a TrainJob is checked against: the live cluster's (or, on an update, the
// TrainJob's snapshot), or one of the files given. A missing runtime is a NotFound API error.
type Resolver interface {
	Runtime(ctx context.Context, oldObj, newObj *trainer.TrainJob) (*pipeline.Runtime, error)
}

// ResolverFunc is a function as a Resolver.
type ResolverFunc func(ctx context.Context, oldObj, newObj *trainer.TrainJob) (*pipeline.Runtime, error)

// Runtime calls f.
func (f ResolverFunc) Runtime(ctx context.Context, oldObj, newObj *trainer.TrainJob) (*pipeline.Runtime, error) {
	return f(ctx, oldObj, newObj)
}

// Validator runs the CustomValidation plugins (the pipeline's Framework).
type Validator interface {
	Validate(ctx context.Context, rt *pipeline.Runtime, oldObj, newObj *trainer.TrainJob) (admission.Warnings, field.ErrorList)
}

var runtimeRefPath = field.NewPath("spec", "runtimeRef")

// Admit decides on a TrainJob being created (oldObj nil) or updated, as the validating webhook does: the
// runtime it references must exist, then every CustomValidation plugin has its say, then, when v is an Enforcer,
// no replicated job may have more pods than an Indexed Job runs (validatePodCount) and the TrainJob's name must leave
// room for the names JobSet derives from it (validateName). An update that leaves the
// spec as it was (labels, annotations, finalizers, owner references), and any update of a TrainJob being
// deleted, is admitted as it is: the garbage collector's removal of a finalizer (`--cascade=foreground`) or
// of owner references (`--cascade=orphan`) must always go through, even when the runtime is gone. The error
// is a plain one (not an API status), so that the API server answers 403 Forbidden, as upstream does; Denied
// words it as the API server returns it.
func Admit(ctx context.Context, v Validator, r Resolver, oldObj, newObj *trainer.TrainJob) (admission.Warnings, error) {
	if oldObj != nil && (!newObj.DeletionTimestamp.IsZero() || equality.Semantic.DeepEqual(oldObj.Spec, newObj.Spec)) {
		return nil, nil
	}
	gk := pipeline.RuntimeRefGroupKind(newObj)
	if gk != TrainingRuntime && gk != ClusterTrainingRuntime {
		return nil, UnsupportedError(gk)
	}
	rt, err := r.Runtime(ctx, oldObj, newObj)
	if err != nil {
		kind := "trainingRuntime"
		if gk == ClusterTrainingRuntime {
			kind = "clusterTrainingRuntime"
		}
		return nil, field.ErrorList{field.Invalid(runtimeRefPath, newObj.Spec.RuntimeRef.Name,
			fmt.Sprintf("%v: specified %s must be created before the TrainJob is created", err, kind))}.ToAggregate()
	}
	var warnings admission.Warnings
	if rt.Object.GetLabels()[trainer.SupportLabel] == trainer.SupportDeprecated {
		warnings = append(warnings, fmt.Sprintf("Referenced %s %q is deprecated and will be removed in a future release of Kubeflow Trainer. See runtime deprecation policy: %s",
			gk.Kind, rt.Object.GetName(), trainer.DeprecationPolicyURL))
	}
	w, errs := v.Validate(ctx, rt, oldObj, newObj)
	if e, ok := v.(Enforcer); ok && len(errs) == 0 {
		// A TrainJob the enforcement cannot build is refused when it is built, as before.
		if info, err := e.RuntimeInfo(ctx, newObj, rt, pipeline.BuildOptions{}); err == nil {
			errs = append(validatePodCount(info, newObj), validateName(info, newObj)...)
		}
	}
	return append(warnings, w...), errs.ToAggregate()
}

// Supported tells whether a runtimeRef GroupKind names a runtime kind.
func Supported(gk schema.GroupKind) bool {
	return gk == TrainingRuntime || gk == ClusterTrainingRuntime
}

// UnsupportedError is the error for a runtimeRef naming another kind than a runtime's.
func UnsupportedError(gk schema.GroupKind) error {
	return fmt.Errorf("unsupported runtime: %s", gk)
}

// Denied words a refusal of the TrainJob validating webhook as the API server returns it (403).
func Denied(err error) error {
	return apierrors.NewForbidden(schema.GroupResource{Group: trainer.GroupVersion.Group, Resource: "trainjobs"}, "",
		fmt.Errorf("admission webhook %q denied the request: %w", TrainJobValidator, err))
}
