package stack

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// AnswerOnTerminal gives cmd a terminal for its standard input on which answer has been typed, as a user
// answers a command that asks before it acts (`kubectl trainjob delete` refuses to ask anything else but a
// terminal). Call the returned function once cmd has ended.
func AnswerOnTerminal(cmd *exec.Cmd, answer string) (closeTerminal func(), err error) {
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open a pseudo-terminal: %w", err)
	}
	n, err := unix.IoctlGetUint32(int(ptmx.Fd()), unix.TIOCGPTN)
	if err == nil {
		err = unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0)
	}
	var tty *os.File
	if err == nil {
		tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	}
	if err == nil {
		// The terminal keeps the line until the command reads it.
		_, err = ptmx.WriteString(answer)
	}
	if err != nil {
		ptmx.Close()
		if tty != nil {
			tty.Close()
		}
		return nil, fmt.Errorf("open a pseudo-terminal: %w", err)
	}
	cmd.Stdin = tty
	return func() { tty.Close(); ptmx.Close() }, nil
}
