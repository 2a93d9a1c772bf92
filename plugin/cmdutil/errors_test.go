package cmdutil

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	kcmdutil "k8s.io/kubectl/pkg/cmd/util"
)

// TestCheckErr: what the one place that ends a command prints, and the exit code it chooses.
func TestCheckErr(t *testing.T) {
	notFound := apierrors.NewNotFound(schema.GroupResource{Group: "trainer.kubeflow.org", Resource: "trainjobs"}, "llama")
	for _, tc := range []struct {
		name string
		err  error
		out  string
		code int
	}{
		{"success", nil, "", ExitOK},
		{"an error of the command", errors.New("invalid --rank -1"), "error: invalid --rank -1\n", ExitError},
		{"already worded", errors.New("error: twice"), "error: twice\n", ExitError},
		{"the TrainJob Failed", WithExitCode(ExitFailed, errors.New("TrainJob llama Failed")), "error: TrainJob llama Failed\n", ExitFailed},
		{"a timeout, wrapped", fmt.Errorf("waiting: %w", WithExitCode(ExitTimeout, errors.New("timed out"))), "error: waiting: timed out\n", ExitTimeout},
		{"the API server's error, as kubectl words it", notFound, "Error from server (NotFound): trainjobs.trainer.kubeflow.org \"llama\" not found\n", ExitError},
		{"one error of an aggregate", utilerrors.NewAggregate([]error{errors.New("one")}), "error: one\n", ExitError},
		{"an aggregate", utilerrors.NewAggregate([]error{errors.New("one"), notFound}), "error: one\nerror: Error from server (NotFound): trainjobs.trainer.kubeflow.org \"llama\" not found\n", ExitError},
		{"kubectl's ErrExit says nothing", kcmdutil.ErrExit, "", ExitError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			code := CheckErr(&out, tc.err)
			if out.String() != tc.out || code != tc.code {
				t.Errorf("CheckErr printed %q and chose %d, want %q and %d", out.String(), code, tc.out, tc.code)
			}
		})
	}
}
