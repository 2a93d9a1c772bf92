package cmdutil

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
)

// Resource is how kubectl names the TrainJob resource in messages and in `-o name`.
const Resource = "trainjobs.trainer.kubeflow.org"

// GetTrainJob reads a TrainJob; a missing one is a one-line error that names the namespace and says how to
// see what exists.
func GetTrainJob(ctx context.Context, c client.Reader, namespace, name string) (*trainer.TrainJob, error) {
	tj := &trainer.TrainJob{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, tj); err != nil {
		return nil, DescribeError(err, namespace, name)
	}
	return tj, nil
}

// DescribeError turns an API error about TrainJob name into one line that says what and how to fix it.
// The API error stays inside: apierrors.IsNotFound and the like still see it.
func DescribeError(err error, namespace, name string) error {
	switch {
	case apierrors.IsNotFound(err) && name != "":
		return &describedError{err: err, msg: fmt.Sprintf("%s %q not found in namespace %q (see `kubectl trainjob list -n %s`, or pass -n NAMESPACE)",
			Resource, name, namespace, namespace)}
	case apierrors.IsForbidden(err):
		return &describedError{err: err, msg: fmt.Sprintf("%s (ask for a Role that grants it on %s in namespace %q)",
			APIMessage(err), Resource, namespace)}
	}
	return err
}

type describedError struct {
	err error
	msg string
}

func (e *describedError) Error() string { return e.msg }
func (e *describedError) Unwrap() error { return e.err }

// APIMessage is the message of an API status error, without client-side decoration.
func APIMessage(err error) string {
	if s, ok := err.(apierrors.APIStatus); ok && s.Status().Message != "" {
		return s.Status().Message
	}
	return err.Error()
}

// Namespace is the namespace of --namespace or of the kubeconfig's context, with a hint when the kubeconfig
// cannot be read.
func Namespace(f Factory) (string, error) {
	ns, _, err := f.Namespace()
	if err != nil {
		return "", fmt.Errorf("cannot read the kubeconfig: %w (pass --kubeconfig or set KUBECONFIG to a kubeconfig file)", err)
	}
	return ns, nil
}

// NamespaceAndClient resolves what every TrainJob command needs: the namespace, and a client unless c is
// one already (tests set one).
func NamespaceAndClient(f Factory, c client.WithWatch) (string, client.WithWatch, error) {
	ns, err := Namespace(f)
	if err != nil {
		return "", nil, err
	}
	if c == nil {
		if c, err = f.Client(); err != nil {
			return "", nil, err
		}
	}
	return ns, c, nil
}

// Failed is the error of a command that followed a TrainJob until it Failed: "TrainJob NAME Failed: REASON:
// MESSAGE" of its Failed condition, with exit code ExitFailed.
func Failed(tj *trainer.TrainJob) error {
	msg := "TrainJob " + tj.Name + " Failed"
	if c := meta.FindStatusCondition(tj.Status.Conditions, trainer.TrainJobFailed); c != nil && (c.Reason != "" || c.Message != "") {
		msg += ": " + c.Reason
		if c.Message != "" {
			msg += ": " + c.Message
		}
	}
	return WithExitCode(ExitFailed, errors.New(msg))
}
