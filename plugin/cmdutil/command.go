package cmdutil

import (
	"context"

	"github.com/spf13/cobra"
)

// Command is the contract of every command's options, as kubectl's own commands have it: Complete resolves
// what the flags and arguments leave open (namespace, clients, NAME, the printer) and keeps what Run needs of
// cmd, Validate rejects bad input with a clear message before anything is read, and Run does the work,
// writing only to the command's streams. Each options type asserts it (var _ cmdutil.Command = (*XOptions)(nil))
// and its NewCmd's RunE is RunCommand, so every command goes through the same steps.
type Command interface {
	Complete(f Factory, cmd *cobra.Command, args []string) error
	Validate() error
	Run(ctx context.Context) error
}

// RunCommand runs o as cmd's RunE: Complete, Validate, then Run with cmd's context, stopping at the first
// error.
func RunCommand(f Factory, o Command, cmd *cobra.Command, args []string) error {
	if err := o.Complete(f, cmd, args); err != nil {
		return err
	}
	if err := o.Validate(); err != nil {
		return err
	}
	return o.Run(cmd.Context())
}
