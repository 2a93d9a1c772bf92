package main

import (
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin"
)

// commands are the subcommands of the binary, in help order.
var commands = []plugin.CommandAdder{}
