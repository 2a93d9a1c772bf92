package stack

import (
	"os/exec"
	"testing"
)

// TestAnswerOnTerminal: the command's standard input is a terminal, and it reads the answer from it.
func TestAnswerOnTerminal(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", `test -t 0 || { echo "stdin is no terminal"; exit 1; }; read answer; echo "answer=$answer"`)
	closeTerminal, err := AnswerOnTerminal(cmd, "y\n")
	if err != nil {
		t.Fatal(err)
	}
	defer closeTerminal()
	out, err := cmd.Output()
	if err != nil || string(out) != "answer=y\n" {
		t.Errorf("got %q, %v; want answer=y", out, err)
	}
}
