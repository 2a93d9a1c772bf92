package cmdutil

import (
	"errors"
	"fmt"
	"io"
	"strings"

	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	kcmdutil "k8s.io/kubectl/pkg/cmd/util"
)

// Exit codes of every command (documented in --help, docs/commands.md and the README).
const (
	ExitOK      = 0 // success, or the TrainJob is Complete
	ExitError   = 1 // any error
	ExitFailed  = 2 // the TrainJob Failed
	ExitTimeout = 3 // a wait timed out
	ExitNotNow  = 4 // fit: the TrainJob does not fit the cluster now, but would on its nodes emptied
	ExitNowhere = 5 // fit: the TrainJob does not fit the cluster's nodes even emptied
)

// ExitCodeError carries the exit code of a command that did not succeed.
type ExitCodeError struct {
	Code int
	Err  error
}

func (e *ExitCodeError) Error() string { return e.Err.Error() }
func (e *ExitCodeError) Unwrap() error { return e.Err }

// WithExitCode wraps err so the binary exits with code.
func WithExitCode(code int, err error) error { return &ExitCodeError{Code: code, Err: err} }

// ExitCode is the process exit code for a command's error.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var ec *ExitCodeError
	if errors.As(err, &ec) {
		return ec.Code
	}
	return ExitError
}

// CheckErr is the one place that prints a command's error and chooses the exit code: it writes err to w as
// kubectl's cmdutil.CheckErr words it — kubectl's own messages for the API server's errors it knows
// ("Error from server (NotFound): …", a refused connection), one "error: " line per error of an aggregate,
// "error: " before anything else — and returns the code the binary exits with (ExitCode). It returns ExitOK
// and prints nothing for nil. kubectl's CheckErr itself ends the process through a handler that is global
// state; the binary's main and the tests that run commands in-process call this instead, so they print the
// same.
func CheckErr(w io.Writer, err error) int {
	if err == nil {
		return ExitOK
	}
	if msg := ErrorMessage(err); msg != "" {
		fmt.Fprintln(w, msg)
	}
	return ExitCode(err)
}

// ErrorMessage is what CheckErr prints for err, without the final newline: "" for kubectl's ErrExit (exit 1,
// nothing said).
func ErrorMessage(err error) string {
	if agg, ok := err.(utilerrors.Aggregate); ok && len(agg.Errors()) == 1 {
		err = agg.Errors()[0]
	}
	if errors.Is(err, kcmdutil.ErrExit) {
		return ""
	}
	if agg, ok := err.(utilerrors.Aggregate); ok {
		return strings.TrimSuffix(kcmdutil.MultipleErrors("error: ", agg.Errors()), "\n")
	}
	msg, ok := kcmdutil.StandardErrorMessage(err)
	if !ok {
		msg = err.Error()
		if !strings.HasPrefix(msg, "error: ") {
			msg = "error: " + msg
		}
	}
	return strings.TrimSuffix(msg, "\n")
}
