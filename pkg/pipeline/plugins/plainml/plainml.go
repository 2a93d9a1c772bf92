// Package plainml is the PlainML plugin: for runtimes whose ML policy
// injects no distributed settings of its own (none, XGBoost, Flux) it sizes
// the trainer step and passes the TrainJob's trainer.env to the trainer's
// `node` container.
package plainml

import (
	"context"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
)

// Name is the plugin's name in the registry.
const Name = "PlainML"

// PlainML implements runtimes without a Torch, MPI or JAX policy.
type PlainML struct{}

var _ pipeline.EnforceMLPolicyPlugin = (*PlainML)(nil)

// New builds the PlainML plugin.
func New(context.Context, pipeline.Handle) (pipeline.Plugin, error) { return &PlainML{}, nil }

// Name returns the plugin's name.
func (*PlainML) Name() string { return Name }

// EnforceMLPolicy sets the trainer's pod count from numNodes and upserts
// trainer.env into its `node` container. It stays out of the Torch, MPI and
// JAX runtimes, whose plugins own those. It runs alongside XGBoost and
// Flux, as upstream does; both write the same count and distinct envs.
func (*PlainML) EnforceMLPolicy(info *pipeline.RuntimeInfo, trainJob *trainer.TrainJob) error {
	if src := info.MLPolicySource(); src != nil && (src.Torch != nil || src.MPI != nil || src.JAX != nil) {
		return nil
	}
	_, c := info.SizeTrainer(trainJob)
	if c == nil {
		return nil
	}
	for _, e := range trainJob.Spec.Trainer.Env {
		// The template must not share memory with the TrainJob.
		if e.ValueFrom != nil {
			e.ValueFrom = e.ValueFrom.DeepCopy()
		}
		pipeline.UpsertEnv(c, e)
	}
	return nil
}
