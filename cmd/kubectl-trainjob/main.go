// Command kubectl-trainjob is both the kubectl plugin (`kubectl trainjob …`)
// and the operator (`kubectl-trainjob operator`).
package main

import (
	"fmt"
	"os"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-trainjob/kubectl-trainjob/plugin"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
)

func main() {
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	f := cmdutil.NewFactory()
	root := plugin.NewRootCommand(f, streams, commands...)
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(cmdutil.ExitCode(err))
	}
}
