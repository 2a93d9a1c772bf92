package cmdutil

import (
	"context"

	"github.com/spf13/pflag"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/config"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/dryrun"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
)

// Pipeline is the operator's pipeline as every command of the binary that runs it builds it offline — render,
// describe-pipeline and fit, list's GPUS column, create's and rerun's fit check — so that each builds a
// TrainJob as the binary's operator does: with the binary's out-of-tree plugins and the operator's
// configuration.
type Pipeline struct {
	// OutOfTree are the binary's own plugins (app.WithPlugin), which run beside the in-tree ones.
	OutOfTree pipeline.Registry
	// Config is the operator's configuration: --config and --feature-gates of a command that adds them
	// (AddFlags), else the defaults.
	Config config.Flags
}

// AddFlags adds --config and --feature-gates.
func (p *Pipeline) AddFlags(fs *pflag.FlagSet) { p.Config.AddFlags(fs) }

// Framework builds the pipeline (dryrun.NewFramework); its plugins see the objects of in besides TrainJobs and
// runtimes, and nothing else.
func (p *Pipeline) Framework(ctx context.Context, in *dryrun.Inputs) (*pipeline.Framework, error) {
	return dryrun.NewFramework(ctx, &p.Config, p.OutOfTree, in)
}
