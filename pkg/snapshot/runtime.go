// Package snapshot gives a TrainJob the runtime it runs from: the
// TrainingRuntime or ClusterTrainingRuntime it references (LiveRuntime) and
// the snapshot of it the operator takes at the first build and reads from
// then on (Store takes, encodes, decodes and verifies it). The operator's
// controller, its validating webhook and the CLI share it; each words its
// own errors (as upstream does). It must not depend on the operator.
package snapshot

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/admission"
	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
)

// LiveRuntime reads the runtime tj references: a TrainingRuntime in tj's namespace
// or a ClusterTrainingRuntime. It asks cached first and, when that fails
// (a runtime created a moment ago, or outside the cache's namespaces), live,
// unless live is nil. A missing runtime is a NotFound API error.
func LiveRuntime(ctx context.Context, cached, live client.Reader, tj *trainer.TrainJob) (*pipeline.Runtime, error) {
	gk := pipeline.RuntimeRefGroupKind(tj)
	var obj client.Object
	key := client.ObjectKey{Name: tj.Spec.RuntimeRef.Name}
	switch gk {
	case admission.TrainingRuntime:
		obj, key.Namespace = &trainer.TrainingRuntime{}, tj.Namespace
	case admission.ClusterTrainingRuntime:
		obj = &trainer.ClusterTrainingRuntime{}
	default:
		return nil, admission.UnsupportedError(gk)
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
