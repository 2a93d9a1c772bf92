// Package plugin is the kubectl plugin face of the binary: `kubectl trainjob …`.
// "Plugin" here is kubectl's word (a command kubectl finds on the PATH); the
// Pipeline Framework's plugins (Torch, MPI, JobSet, …) are pkg/pipeline/plugins.
// Each command lives in its own file or package with an Options struct that
// implements cmdutil.Command (Complete, Validate, Run) as kubectl's own
// commands do, and whose RunE is cmdutil.RunCommand; their help is
// kubectl's: descriptions and examples normalized by k8s.io/kubectl's
// util/templates, kubectl's usage template with the commands in groups, and
// kubectl's global flags listed by `kubectl trainjob options`.
package plugin

import (
	"flag"

	"github.com/spf13/cobra"
	_ "k8s.io/client-go/plugin/pkg/client/auth" // auth plugins of kubeconfigs (exec, oidc, …)
	"k8s.io/klog/v2"
	"k8s.io/kubectl/pkg/cmd/options"
	"k8s.io/kubectl/pkg/util/templates"

	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
)

// CommandAdder adds a subcommand; each command package provides one.
type CommandAdder func(f cmdutil.Factory, streams cmdutil.Streams) *cobra.Command

// rootLong is the root's help, with the exit codes of every command.
const rootLong = `
kubectl trainjob creates Kubeflow TrainJobs (trainer.kubeflow.org/v1alpha1) and
shows where each one is in its pipeline: its stage, its condition transitions,
the pods of each stage and why they wait, and their logs. It works against
Kubeflow Trainer's own controller and against its operator
(kubectl trainjob operator), which is the same binary.

Exit codes:

* 0: success (for wait, logs -f, port-forward and create --wait: the TrainJob is Complete)
* 1: error
* 2: the TrainJob Failed
* 3: timed out waiting
* 4: fit: the TrainJob does not fit now (it would on the nodes emptied of other pods)
* 5: fit: the TrainJob fits nowhere, not even on the nodes emptied of other pods`

// commandGroups are the groups the root's help lists its commands in, by name; a command of no group is
// listed under "Other Commands".
var commandGroups = []struct {
	message string
	names   []string
}{
	{"Run TrainJobs:", []string{"create", "fit", "rerun", "optimize", "suspend", "resume", "delete"}},
	{"Follow and reach them:", []string{"list", "status", "logs", "wait", "port-forward", "dashboard"}},
	{"See the pipeline:", []string{"describe-pipeline", "render", "runtimes"}},
	{"Install and run the operator:", []string{"install", "operator", "version"}},
}

// NewRootCommand is `kubectl trainjob` with the given subcommands.
func NewRootCommand(f cmdutil.Factory, streams cmdutil.Streams, adders ...CommandAdder) *cobra.Command {
	root := &cobra.Command{
		Use:               "kubectl-trainjob",
		Short:             "Create TrainJobs and see where each one is in its pipeline",
		Long:              rootLong,
		Annotations:       map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl trainjob"},
		SilenceUsage:      true,
		SilenceErrors:     true,
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	f.AddFlags(root.PersistentFlags())
	// -v as kubectl has it: -v=6 logs every API request with its status and time, -v=8 with the bodies.
	logFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(logFlags)
	root.PersistentFlags().AddGoFlag(logFlags.Lookup("v"))
	root.PersistentFlags().Lookup("v").Usage = "Log level: 6 logs every API request, 8 also the bodies (kubectl's -v)"
	_ = root.RegisterFlagCompletionFunc("color", cobra.FixedCompletions([]string{"auto", "always", "never"}, cobra.ShellCompDirectiveNoFileComp))
	root.PersistentPreRunE = func(*cobra.Command, []string) error { return f.ValidateFlags() }
	for _, add := range adders {
		root.AddCommand(add(f, streams))
	}
	root.AddCommand(options.NewCmdOptions(streams.Out))
	templates.NormalizeAll(root)
	templates.ActsAsRootCommand(root, []string{"options"}, groups(root)...)
	return root
}

// groups are root's commands in commandGroups, leaving out the groups none of whose commands root has.
func groups(root *cobra.Command) templates.CommandGroups {
	var out templates.CommandGroups
	for _, g := range commandGroups {
		group := templates.CommandGroup{Message: g.message}
		for _, name := range g.names {
			for _, c := range root.Commands() {
				if c.Name() == name {
					group.Commands = append(group.Commands, c)
				}
			}
		}
		if len(group.Commands) > 0 {
			out = append(out, group)
		}
	}
	return out
}
