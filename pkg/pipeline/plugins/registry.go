// Package plugins is the one place the Pipeline Framework's pipeline is
// assembled: the ordered registry of the in-tree plugins, with the feature
// gates inside it (NewInTreeRegistry, as the kube-scheduler's), and
// NewFramework, which the operator, render and describe-pipeline all call,
// so that they build the same pipeline from the same configuration. Within
// an extension point, plugins run in the registry's order unless the
// configuration orders them (upstream ranges over a map, so its order is
// random).
//
// The plugins themselves live one per subpackage; plugin/ (top level) is
// the kubectl plugin's commands, not pipeline plugins.
package plugins

import (
	"context"
	"slices"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/feature"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/plugins/coscheduling"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/plugins/flux"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/plugins/jax"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/plugins/jobset"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/plugins/mpi"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/plugins/plainml"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/plugins/torch"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/plugins/trainjobstatus"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/plugins/volcano"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/plugins/xgboost"
)

// NewInTreeRegistry returns every in-tree plugin whose feature gate is on,
// in execution order: the ML policies first, then gang scheduling, then
// the TrainJobStatus plugin (gate TrainJobStatus), then JobSet, which owns
// the template and builds last so it sees everything the others changed.
// TrainJobStatus goes before JobSet so that the CA ConfigMap the trainer
// pods mount is applied before the JobSet that makes them.
func NewInTreeRegistry(fts feature.Features) pipeline.Registry {
	r := pipeline.Registry{
		{Name: torch.Name, Factory: torch.New},
		{Name: mpi.Name, Factory: mpi.New},
		{Name: plainml.Name, Factory: plainml.New},
		{Name: jax.Name, Factory: jax.New},
		{Name: xgboost.Name, Factory: xgboost.New},
		{Name: flux.Name, Factory: flux.New},
		{Name: coscheduling.Name, Factory: coscheduling.New},
		{Name: volcano.Name, Factory: volcano.New},
	}
	if fts.EnableTrainJobStatus {
		r = append(r, pipeline.RegistryEntry{Name: trainjobstatus.Name, Factory: trainjobstatus.New})
	}
	return append(r, pipeline.RegistryEntry{Name: jobset.Name, Factory: jobset.New})
}

// Config is what the pipeline is built from: the operator's configuration
// (its feature gates and its plugins field) and the plugins a platform
// team's own binary registers (app.WithPlugin).
type Config struct {
	Features feature.Features
	// OutOfTree plugins come after the in-tree ones in the registry: at
	// every extension point they implement, they run after the in-tree
	// plugins unless Plugins orders them otherwise.
	OutOfTree pipeline.Registry
	// Plugins enables, disables and orders plugins per extension point.
	Plugins pipeline.Plugins
}

// NewFramework builds the pipeline of cfg, reading the cluster through h.
func NewFramework(ctx context.Context, cfg Config, h pipeline.Handle) (*pipeline.Framework, error) {
	r := append(slices.Clone(NewInTreeRegistry(cfg.Features)), cfg.OutOfTree...)
	return pipeline.New(ctx, r, h, pipeline.WithPlugins(cfg.Plugins))
}
