package offline

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator/config"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/plugins"
)

// TrainJobValidatorWebhook is the name of the TrainJob validating webhook,
// which the API server puts in every denial.
const TrainJobValidatorWebhook = "validator.trainjob.trainer.kubeflow.org"

// DeniedError words a webhook denial as the API server returns it (403).
func DeniedError(webhook string, errs field.ErrorList) error {
	return apierrors.NewForbidden(schema.GroupResource{Group: trainer.GroupVersion.Group, Resource: "trainjobs"}, "",
		fmt.Errorf("admission webhook %q denied the request: %w", webhook, errs.ToAggregate()))
}

// Result is what rendering one TrainJob gives.
type Result struct {
	TrainJob *trainer.TrainJob
	Runtime  *pipeline.Runtime
	Objects  []client.Object
	Info     *pipeline.RuntimeInfo
	Warnings []string
}

// FindRuntime returns the runtime a TrainJob references among the inputs,
// or the webhook's error when there is none.
func FindRuntime(tj *trainer.TrainJob, runtimes []*pipeline.Runtime) (*pipeline.Runtime, error) {
	gk := pipeline.RuntimeRefGroupKind(tj)
	path := field.NewPath("spec", "runtimeRef")
	var resource, kindWord string
	switch gk {
	case schema.GroupKind{Group: trainer.GroupVersion.Group, Kind: trainer.TrainingRuntimeKind}:
		resource, kindWord = "trainingruntimes", "trainingRuntime"
	case schema.GroupKind{Group: trainer.GroupVersion.Group, Kind: trainer.ClusterTrainingRuntimeKind}:
		resource, kindWord = "clustertrainingruntimes", "clusterTrainingRuntime"
	default:
		return nil, DeniedError(TrainJobValidatorWebhook, field.ErrorList{field.Invalid(path, tj.Spec.RuntimeRef, fmt.Sprintf("unsupported runtime: %s", gk))})
	}
	for _, rt := range runtimes {
		o := rt.Object
		if rt.GroupKind() == gk && o.GetName() == tj.Spec.RuntimeRef.Name &&
			(gk.Kind == trainer.ClusterTrainingRuntimeKind || o.GetNamespace() == tj.Namespace) {
			return rt, nil
		}
	}
	notFound := apierrors.NewNotFound(schema.GroupResource{Group: trainer.GroupVersion.Group, Resource: resource}, tj.Spec.RuntimeRef.Name)
	return nil, DeniedError(TrainJobValidatorWebhook, field.ErrorList{field.Invalid(path, tj.Spec.RuntimeRef,
		fmt.Sprintf("%v: specified %s must be created before the TrainJob is created", notFound, kindWord))})
}

// Render admits a TrainJob against its runtime as the webhook would (the
// CustomValidation plugins), then runs the Build phase.
func Render(ctx context.Context, fw *pipeline.Framework, tj *trainer.TrainJob, runtimes []*pipeline.Runtime, opts pipeline.BuildOptions) (*Result, error) {
	rt, err := FindRuntime(tj, runtimes)
	if err != nil {
		return nil, err
	}
	res := &Result{TrainJob: tj, Runtime: rt}
	if rt.Object.GetLabels()[trainer.SupportLabel] == trainer.SupportDeprecated {
		res.Warnings = append(res.Warnings, fmt.Sprintf("Referenced %s %q is deprecated and will be removed in a future release of Kubeflow Trainer. See runtime deprecation policy: %s",
			rt.GroupKind().Kind, rt.Object.GetName(), trainer.DeprecationPolicyURL))
	}
	warnings, errs := fw.Validate(ctx, rt, nil, tj)
	res.Warnings = append(res.Warnings, warnings...)
	if len(errs) > 0 {
		return nil, DeniedError(TrainJobValidatorWebhook, errs)
	}
	objs, info, err := fw.Build(ctx, tj, rt, opts)
	if err != nil {
		return nil, fmt.Errorf("build phase: %w", err)
	}
	res.Objects, res.Info = objs, info
	return res, nil
}

// NewFramework is the operator's pipeline (plugins.NewFramework) for the
// operator's configuration of flags and the plugins of outOfTree, without a
// cluster: the plugins read what the input files hold besides TrainJobs and
// runtimes (in.Objects: the webhook certificate Secret, PriorityClasses, …)
// and find nothing else, as in a cluster where nothing exists yet.
func NewFramework(ctx context.Context, flags *config.Flags, outOfTree pipeline.Registry, in *Inputs) (*pipeline.Framework, error) {
	cfg, err := flags.Load()
	if err != nil {
		return nil, err
	}
	cfg.Default()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid configuration: %w", err)
	}
	fw, err := plugins.NewFramework(ctx, plugins.Config{Features: cfg.Features(), OutOfTree: outOfTree, Plugins: cfg.Plugins},
		pipeline.OfflineHandle(cfg.OperatorInfo(), in.Objects...))
	if err != nil {
		return nil, fmt.Errorf("pipeline framework: %w", err)
	}
	return fw, nil
}
