// Package app builds the kubectl-trainjob binary's command: the kubectl
// plugin's commands and the operator, which run one pipeline. It serves
// this repository's main and a platform team's own binary, which adds its
// own pipeline plugins with WithPlugin, as kube-scheduler's app does; the
// operator's configuration then enables, disables and orders them per
// extension point (field plugins), and render, describe-pipeline, fit,
// list, create and rerun of that binary build TrainJobs with the same
// pipeline (cmdutil.Pipeline).
package app

import (
	"os"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/completion"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/create"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/dashboard"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/describe"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/fit"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/install"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/lifecycle"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/list"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/logs"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/operator"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/portforward"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/render"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/runtimes"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/status"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/version"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/wait"
)

// Option changes the binary's command.
type Option func(*options)

type options struct {
	outOfTree pipeline.Registry
}

// WithPlugin registers an out-of-tree pipeline plugin under name. It runs
// at every extension point it implements, after the in-tree plugins,
// unless the operator's configuration disables or orders it otherwise.
func WithPlugin(name string, factory pipeline.Factory) Option {
	return func(o *options) {
		o.outOfTree = append(o.outOfTree, pipeline.RegistryEntry{Name: name, Factory: factory})
	}
}

// NewCommand is the binary's root command with every subcommand, in help
// order.
func NewCommand(f cmdutil.Factory, streams genericiooptions.IOStreams, opts ...Option) *cobra.Command {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	return plugin.NewRootCommand(f, streams,
		create.NewCmd(o.outOfTree),
		create.NewRerunCmd(o.outOfTree),
		create.NewCmdOptimize,
		fit.NewCmd(o.outOfTree),
		list.NewCmd(o.outOfTree),
		status.NewCmdStatus,
		logs.NewCmdLogs,
		portforward.NewCmdPortForward,
		dashboard.NewCmd(o.outOfTree),
		describe.NewCmd(o.outOfTree),
		render.NewCmd(o.outOfTree),
		wait.NewCmdWait,
		lifecycle.NewCmdSuspend,
		lifecycle.NewCmdResume,
		lifecycle.NewCmdDelete,
		runtimes.NewCmdRuntimes,
		install.NewCmdInstall,
		operator.NewCommand(o.outOfTree),
		version.NewCmdVersion,
		completion.NewCmdCompletion,
	)
}

// Main runs the binary on os.Args and returns its exit code.
func Main(opts ...Option) int {
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	return cmdutil.CheckErr(os.Stderr, NewCommand(cmdutil.NewFactory(), streams, opts...).Execute())
}
