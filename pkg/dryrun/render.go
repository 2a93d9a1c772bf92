package dryrun

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrladmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/admission"
	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/config"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/plugins"
)

// Result is what rendering one TrainJob gives.
type Result struct {
	TrainJob *trainer.TrainJob
	Runtime  *pipeline.Runtime
	Objects  []client.Object
	Info     *pipeline.RuntimeInfo
	Warnings []string
}

// FindRuntime returns the runtime a TrainJob references among the inputs, or the webhook's refusal when
// there is none.
func FindRuntime(tj *trainer.TrainJob, runtimes []*pipeline.Runtime) (*pipeline.Runtime, error) {
	var rt *pipeline.Runtime
	_, err := admission.Admit(context.Background(), nothingToValidate{}, files(runtimes, &rt), nil, tj)
	if err != nil {
		return nil, admission.Denied(err)
	}
	return rt, nil
}

// nothingToValidate lets FindRuntime ask admission.Admit for the runtime alone.
type nothingToValidate struct{}

func (nothingToValidate) Validate(context.Context, *pipeline.Runtime, *trainer.TrainJob, *trainer.TrainJob) (ctrladmission.Warnings, field.ErrorList) {
	return nil, nil
}

// files resolves a TrainJob's runtime among runtimes, as the webhook does among the cluster's: a
// ClusterTrainingRuntime by name, a TrainingRuntime by name in the TrainJob's namespace. found, unless nil,
// is set to the runtime resolved.
func files(runtimes []*pipeline.Runtime, found **pipeline.Runtime) admission.Resolver {
	return admission.ResolverFunc(func(_ context.Context, _, tj *trainer.TrainJob) (*pipeline.Runtime, error) {
		gk := pipeline.RuntimeRefGroupKind(tj)
		for _, rt := range runtimes {
			o := rt.Object
			if rt.GroupKind() == gk && o.GetName() == tj.Spec.RuntimeRef.Name &&
				(gk.Kind == trainer.ClusterTrainingRuntimeKind || o.GetNamespace() == tj.Namespace) {
				if found != nil {
					*found = rt
				}
				return rt, nil
			}
		}
		resource := "trainingruntimes"
		if gk == admission.ClusterTrainingRuntime {
			resource = "clustertrainingruntimes"
		}
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: trainer.GroupVersion.Group, Resource: resource}, tj.Spec.RuntimeRef.Name)
	})
}

// Render admits a TrainJob against the runtimes as the webhook would (admission.Admit), then runs the
// Build phase.
func Render(ctx context.Context, fw *pipeline.Framework, tj *trainer.TrainJob, runtimes []*pipeline.Runtime, opts pipeline.BuildOptions) (*Result, error) {
	var rt *pipeline.Runtime
	warnings, err := admission.Admit(ctx, fw, files(runtimes, &rt), nil, tj)
	if err != nil {
		return nil, admission.Denied(err)
	}
	res := &Result{TrainJob: tj, Runtime: rt, Warnings: warnings}
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
