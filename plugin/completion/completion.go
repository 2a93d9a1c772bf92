// Package completion is `kubectl trainjob completion` and the dynamic completions other commands use: TrainJob,
// OptimizationJob and runtime names, read from the cluster of the current kubeconfig context.
package completion

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
)

// Shells are the shells completion scripts are generated for.
var Shells = []string{"bash", "zsh", "fish", "powershell"}

const completionLong = `Print a shell completion script for kubectl-trainjob.

The script completes the binary's own name, kubectl-trainjob. For "kubectl trainjob" and a TAB,
kubectl (1.26 or later) runs kubectl_complete-trainjob from PATH: copy that two-line
script from the release archive (krew/kubectl_complete-trainjob in the repository) into
a folder on PATH and make it executable.

Names of TrainJobs, OptimizationJobs (after optimizationjob/) and runtimes are completed
from the cluster of the current context.`

const completionExample = `  # bash (needs the bash-completion package)
  source <(kubectl-trainjob completion bash)

  # zsh
  kubectl-trainjob completion zsh > "${fpath[1]}/_kubectl-trainjob"

  # fish
  kubectl-trainjob completion fish > ~/.config/fish/completions/kubectl-trainjob.fish

  # PowerShell
  kubectl-trainjob completion powershell | Out-String | Invoke-Expression`

// CompletionOptions are the options of `kubectl trainjob completion`.
type CompletionOptions struct {
	Shell string
	root  *cobra.Command
	cmdutil.Streams
}

var _ cmdutil.Command = (*CompletionOptions)(nil)

// NewCmdCompletion is `kubectl trainjob completion SHELL`.
func NewCmdCompletion(f cmdutil.Factory, streams cmdutil.Streams) *cobra.Command {
	o := &CompletionOptions{Streams: streams}
	return &cobra.Command{
		Use:                   "completion " + strings.Join(Shells, "|"),
		DisableFlagsInUseLine: true,
		Short:                 "Print a shell completion script",
		Long:                  completionLong,
		Example:               completionExample,
		Args:                  cobra.ExactArgs(1),
		ValidArgs:             Shells,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.RunCommand(f, o, cmd, args)
		},
	}
}

// Complete records the shell and the root command whose completions are generated.
func (o *CompletionOptions) Complete(_ cmdutil.Factory, cmd *cobra.Command, args []string) error {
	o.Shell, o.root = args[0], cmd.Root()
	return nil
}

// Validate rejects an unknown shell.
func (o *CompletionOptions) Validate() error {
	for _, s := range Shells {
		if s == o.Shell {
			return nil
		}
	}
	return fmt.Errorf("unknown shell %q: use one of %s", o.Shell, strings.Join(Shells, ", "))
}

// Run writes the script.
func (o *CompletionOptions) Run(context.Context) error {
	return generate(o.root, o.Shell, o.Out)
}

func generate(root *cobra.Command, shell string, out io.Writer) error {
	switch shell {
	case "bash":
		return root.GenBashCompletionV2(out, true)
	case "zsh":
		return root.GenZshCompletion(out)
	case "fish":
		return root.GenFishCompletion(out, true)
	default:
		return root.GenPowerShellCompletionWithDesc(out)
	}
}
