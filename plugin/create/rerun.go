package create

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/completion"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/kueue"
)

const rerunLong = `Run a TrainJob again: create a copy of the TrainJob NAME as its creator wrote it, named NEW.

The copy has the fields of the spec and the annotations its creator set, and all its labels: not the
defaults the API server, a webhook or a controller added since (Kueue's runtimePatches, a suspend by
Kueue, the status). The API server's managedFields tell them apart: the creator is the field manager that
owns spec.runtimeRef, which only the create sets. The copy's annotation trainer.kubeflow.org/rerun-of names
NAME.

Without NEW the copy is named NAME-rerun-N, N counting the reruns of the namespace (a rerun of
llama-rerun-1 is llama-rerun-2). --set FLAG=VALUE changes the copy as create's flag FLAG would (nodes,
image, env, resources-per-node, runtime, label, …; repeatable); a command after -- replaces the trainer's.
As with create, the runtime must exist, and --wait and --follow wait for the copy to end.`

const rerunExample = `  # Run llama again, as llama-rerun-1
  kubectl trainjob rerun llama

  # On four nodes of another image, named llama-4
  kubectl trainjob rerun llama llama-4 --set nodes=4 --set image=ghcr.io/example/llama-ft:1.1

  # Print the copy without creating it
  kubectl trainjob rerun llama --set env=EPOCHS=10 --dry-run=client -o yaml`

// NewCmdRerun is `kubectl trainjob rerun`.
func NewCmdRerun(f cmdutil.Factory, streams cmdutil.Streams) *cobra.Command {
	return NewCmdRerunWithOptions(f, NewCreateOptions(streams))
}

// NewRerunCmd is `kubectl trainjob rerun` of a binary whose pipeline adds outOfTree (app.WithPlugin).
func NewRerunCmd(outOfTree pipeline.Registry) func(cmdutil.Factory, cmdutil.Streams) *cobra.Command {
	return func(f cmdutil.Factory, streams cmdutil.Streams) *cobra.Command {
		o := NewCreateOptions(streams)
		o.Pipeline.OutOfTree = outOfTree
		return NewCmdRerunWithOptions(f, o)
	}
}

// NewCmdRerunWithOptions is `kubectl trainjob rerun` with preset options (a pinned clock in tests).
func NewCmdRerunWithOptions(f cmdutil.Factory, o *CreateOptions) *cobra.Command {
	o.rerun = true
	names := completion.TrainJobNames(f)
	cmd := &cobra.Command{
		Use:                   "rerun NAME [NEW] [--set FLAG=VALUE]... [-- COMMAND [ARG...]]",
		DisableFlagsInUseLine: true,
		Short:                 "Run a TrainJob again: create a copy of it as its creator wrote it",
		Long:                  rerunLong,
		Example:               rerunExample,
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp // NEW is a name that does not exist yet
			}
			return names(cmd, args, toComplete)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.RunCommand(f, o, cmd, args)
		},
	}
	cmd.Flags().StringArrayVar(&o.sets, "set", nil, "Change the copy as create's flag FLAG=VALUE would, e.g. nodes=4 or env=EPOCHS=10 (repeatable)")
	o.addRunFlags(cmd)
	var settable []cobra.Completion
	for _, name := range specFlagNames() {
		settable = append(settable, name+"=")
	}
	_ = cmd.RegisterFlagCompletionFunc("set", cobra.FixedCompletions(settable, cobra.ShellCompDirectiveNoFileComp|cobra.ShellCompDirectiveNoSpace))
	return cmd
}

// completeRerun is rerun's Complete: it resolves NAME, NEW, the --set changes and the trainer command after
// --, then what create resolves.
func (o *CreateOptions) completeRerun(f cmdutil.Factory, cmd *cobra.Command, args []string) error {
	if dash := cmd.ArgsLenAtDash(); dash >= 0 {
		o.spec.command, args = args[dash:], args[:dash]
		if len(o.spec.command) == 0 {
			return errors.New("nothing after --: give the trainer's command, e.g. -- torchrun train.py")
		}
	}
	switch len(args) {
	case 0:
		return errors.New("give the NAME of the TrainJob to run again; see kubectl trainjob rerun --help")
	case 1, 2:
		o.From = args[0]
		if len(args) == 2 {
			o.spec.name = args[1]
		}
	default:
		return fmt.Errorf("too many arguments %q: give NAME and, optionally, NEW (the trainer's command goes after --)", strings.Join(args, " "))
	}
	if err := o.spec.set(o.sets); err != nil {
		return err
	}
	return o.completeRun(f)
}

// RerunWith runs `rerun FROM [NAME] --set SETS...` in namespace as the command does, with the clients of a
// caller that has them already (the dashboard), without waiting; it writes what rerun prints to streams and
// returns the copy it created.
func RerunWith(ctx context.Context, streams cmdutil.Streams, c client.WithWatch, kq *kueue.Client, p cmdutil.Pipeline,
	namespace, from, name string, sets []string) (*trainer.TrainJob, error) {
	o := NewCreateOptions(streams)
	o.rerun, o.From, o.Pipeline, o.client, o.kueue, o.stdin = true, from, p, c, kq, streams.In
	o.spec.namespace, o.spec.name = namespace, name
	if err := o.spec.set(sets); err != nil {
		return nil, err
	}
	var err error
	if o.printer, err = o.PrintFlags.WithTypeSetter(c.Scheme()).ToPrinter(); err != nil {
		return nil, err
	}
	return o.send(ctx)
}
