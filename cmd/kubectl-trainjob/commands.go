package main

import (
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/plugins"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/completion"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/create"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/describe"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/install"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/lifecycle"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/list"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/logs"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/operator"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/render"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/runtimes"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/status"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/version"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/wait"
)

// commands are the subcommands of the binary, in help order.
var commands = []plugin.CommandAdder{
	create.NewCmdCreate,
	list.NewCmdList,
	status.NewCmdStatus,
	logs.NewCmdLogs,
	describe.NewCmd,
	render.NewCmd,
	wait.NewCmdWait,
	lifecycle.NewCmdSuspend,
	lifecycle.NewCmdResume,
	lifecycle.NewCmdDelete,
	runtimes.NewCmdRuntimes,
	install.NewCmdInstall,
	operator.NewCommand(plugins.NewRegistry()),
	version.NewCmdVersion,
	completion.NewCmdCompletion,
}
