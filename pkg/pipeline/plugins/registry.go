// Package plugins declares the ordered registry of the Pipeline Framework's
// plugins (KEP-2170's word: Torch, MPI, JobSet, …; the kubectl plugin, the
// CLI's commands, is plugin/). Within an extension point, plugins run in this
// order (upstream ranges over a map, so its order is random). The TrainJobStatus progress
// plugin will take its place here.
package plugins

import (
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/plugins/coscheduling"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/plugins/flux"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/plugins/jax"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/plugins/jobset"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/plugins/mpi"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/plugins/plainml"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/plugins/torch"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/plugins/volcano"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/plugins/xgboost"
)

// NewRegistry returns every plugin in execution order: the ML policies
// first, then gang scheduling, then JobSet, which owns the template and
// builds last so it sees everything the others changed.
func NewRegistry() pipeline.Registry {
	return pipeline.Registry{
		{Name: torch.Name, Factory: torch.New},
		{Name: mpi.Name, Factory: mpi.New},
		{Name: plainml.Name, Factory: plainml.New},
		{Name: jax.Name, Factory: jax.New},
		{Name: xgboost.Name, Factory: xgboost.New},
		{Name: flux.Name, Factory: flux.New},
		{Name: coscheduling.Name, Factory: coscheduling.New},
		{Name: volcano.Name, Factory: volcano.New},
		{Name: jobset.Name, Factory: jobset.New},
	}
}
