// Package runtimes reads the TrainingRuntime or ClusterTrainingRuntime a
// TrainJob references. The controller and the validating webhook share it;
// each words its own errors (as upstream does).
package runtimes

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/admission"
	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
)

// The GroupKinds a runtimeRef may name.
var (
	TrainingRuntime        = admission.TrainingRuntime
	ClusterTrainingRuntime = admission.ClusterTrainingRuntime
)

// Supported tells whether a runtimeRef GroupKind names a runtime kind.
func Supported(gk schema.GroupKind) bool {
	return gk == TrainingRuntime || gk == ClusterTrainingRuntime
}

// UnsupportedError is the error for a runtimeRef naming another kind, worded as the webhook words it.
func UnsupportedError(gk schema.GroupKind) error { return admission.UnsupportedError(gk) }

// Get reads the runtime tj references: a TrainingRuntime in tj's namespace
// or a ClusterTrainingRuntime. It asks cached first and, when that fails
// (a runtime created a moment ago, or outside the cache's namespaces), live,
// unless live is nil. A missing runtime is a NotFound API error.
func Get(ctx context.Context, cached, live client.Reader, tj *trainer.TrainJob) (*pipeline.Runtime, error) {
	gk := pipeline.RuntimeRefGroupKind(tj)
	var obj client.Object
	key := client.ObjectKey{Name: tj.Spec.RuntimeRef.Name}
	switch gk {
	case TrainingRuntime:
		obj, key.Namespace = &trainer.TrainingRuntime{}, tj.Namespace
	case ClusterTrainingRuntime:
		obj = &trainer.ClusterTrainingRuntime{}
	default:
		return nil, UnsupportedError(gk)
	}
	if err := cached.Get(ctx, key, obj); err != nil {
		if live == nil {
			return nil, err
		}
		if err := live.Get(ctx, key, obj); err != nil {
			return nil, err
		}
	}
	return pipeline.RuntimeOf(obj)
}
