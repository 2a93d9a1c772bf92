package main

import (
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin"
)

// commands are the subcommands of the binary, in help order.
var commands = []plugin.CommandAdder{
	operator.NewCommand(pipeline.Registry{}),
}
