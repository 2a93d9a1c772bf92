package optest

import (
	"os"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-trainjob/kubectl-trainjob/plugin"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/operator"
)

// ChildEnv marks a test binary started as `kubectl-trainjob`: a test that
// needs the operator in another process (to kill it) runs its own binary
// with this variable set and the command's arguments.
const ChildEnv = "TRAINJOB_TEST_CHILD"

// RunChild runs the binary's commands with the process's arguments, as
// cmd/kubectl-trainjob does, when ChildEnv is set; TestMain calls it first.
// It reports whether it ran (and the exit code to use).
func RunChild() (int, bool) {
	if os.Getenv(ChildEnv) == "" {
		return 0, false
	}
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	root := plugin.NewRootCommand(cmdutil.NewFactory(), streams, operator.NewCommand(nil))
	root.SetArgs(os.Args[1:])
	return cmdutil.CheckErr(os.Stderr, root.Execute()), true
}
