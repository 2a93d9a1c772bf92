package cmdutil

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/snapshot"
)

// LiveRuntime reads the runtime a TrainJob of the cluster is built from: the operator's snapshot when there is
// one (what the TrainJob is really built from), else the runtime it references. describe-pipeline and fit
// build a live TrainJob from it.
func LiveRuntime(ctx context.Context, c client.Reader, decoder runtime.Decoder, tj *trainer.TrainJob) (*pipeline.Runtime, error) {
	// The snapshot counts only when the TrainJob controls it: a ConfigMap of that name is someone else's.
	if rt, err := snapshot.Read(ctx, c, nil, decoder, tj); err == nil {
		return rt, nil
	}
	return Runtime(ctx, c, tj)
}

// Runtime reads the runtime a TrainJob references, with a one-line error when it does not exist.
func Runtime(ctx context.Context, c client.Reader, tj *trainer.TrainJob) (*pipeline.Runtime, error) {
	rt, err := snapshot.LiveRuntime(ctx, c, nil, tj)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%s %q not found: list runtimes with: kubectl trainjob runtimes", strings.ToLower(pipeline.RuntimeRefGroupKind(tj).Kind), tj.Spec.RuntimeRef.Name)
	}
	return rt, err
}
