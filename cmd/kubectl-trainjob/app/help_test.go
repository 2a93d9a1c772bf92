package app

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/golden"
)

// help runs `kubectl trainjob ARGS…` on the binary's command, as main runs it, and returns what it printed.
func help(t *testing.T, args ...string) string {
	t.Helper()
	// The global flags' defaults that depend on the machine.
	t.Setenv("HOME", "/home/user")
	t.Setenv("KUBECACHEDIR", "")
	var out, errOut bytes.Buffer
	root := NewCommand(cmdutil.NewFactory(), cmdutil.Streams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	root.SetArgs(args)
	code := cmdutil.CheckErr(&errOut, root.Execute())
	if code != cmdutil.ExitOK || errOut.Len() > 0 {
		t.Fatalf("kubectl trainjob %s: exit %d\n%s", strings.Join(args, " "), code, errOut.String())
	}
	return out.String()
}

// TestHelp: the help of the root (commands in groups, the exit codes), of the commands rerun and port-forward,
// and of the global flags (`options`), as kubectl's templates print them.
func TestHelp(t *testing.T) {
	for name, args := range map[string][]string{
		"root":         {"--help"},
		"rerun":        {"rerun", "--help"},
		"port-forward": {"port-forward", "--help"},
		"options":      {"options"},
	} {
		t.Run(name, func(t *testing.T) {
			golden.Assert(t, filepath.Join("testdata", "help", name+".golden"), []byte(help(t, args...)))
		})
	}
}

// TestEveryCommandHasHelp: every command says what it does, how, and with examples, normalized as kubectl
// normalizes its own (util/templates): a description in paragraphs, examples indented by two blanks.
func TestEveryCommandHasHelp(t *testing.T) {
	root := NewCommand(cmdutil.NewFactory(), cmdutil.Streams{In: strings.NewReader(""), Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}})
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Hidden || sub.Name() == "help" {
				continue
			}
			t.Run(sub.CommandPath(), func(t *testing.T) {
				if sub.Short == "" || sub.Long == "" {
					t.Errorf("no Short or no Long")
				}
				if strings.Contains(sub.Long, "\n\n\n") || strings.HasPrefix(sub.Long, "\n") {
					t.Errorf("Long is not normalized:\n%s", sub.Long)
				}
				if sub.Name() == "options" {
					return
				}
				if sub.Example == "" {
					t.Errorf("no Example")
				}
				for line := range strings.Lines(sub.Example) {
					if strings.TrimSpace(line) != "" && !strings.HasPrefix(line, "  ") {
						t.Errorf("example line %q is not indented by two blanks", line)
					}
				}
			})
			walk(sub)
		}
	}
	walk(root)
}
