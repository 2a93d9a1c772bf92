package logs

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/stage"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
)

// A TrainJob that MultiKueue dispatched (plugin/kueue) runs as a copy of the same name on a worker cluster:
// its pods and their logs are there. logs reads them through the kubeconfig Secret MultiKueue itself uses,
// when the user may read it, exactly as it reads a TrainJob that runs here; when not, it says where the
// TrainJob runs and how to read its logs there.

// dispatchPollInterval is how often `logs -f` looks whether MultiKueue has dispatched the TrainJob and created
// its copy on the worker.
const dispatchPollInterval = time.Second

// onWorker points the command's clients at the worker cluster of TrainJob tj, which MultiKueue dispatched,
// and returns the worker's copy of tj, which the command then reads as it reads any TrainJob. Without -f the
// TrainJob must be dispatched and its copy there; with -f it waits until they are. ended is set when tj has
// ended and MultiKueue deleted its copy, with its pods and their logs: without -f that is an error; with -f a
// note, and the error is tj's outcome, as at the end of a follow.
func (o *LogsOptions) onWorker(ctx context.Context, tj *trainer.TrainJob) (remote *trainer.TrainJob, ended bool, err error) {
	var at where
	err = wait.PollUntilContextCancel(ctx, dispatchPollInterval, true, func(ctx context.Context) (bool, error) {
		if at, err = o.findCopy(ctx, tj); err != nil || at.remote != nil || at.ended || !o.Follow {
			return true, err
		}
		// Read the TrainJob again while waiting: it may end, or go.
		tj, err = cmdutil.GetTrainJob(ctx, o.client, o.Namespace, o.Name)
		return false, err
	})
	switch {
	case err != nil:
		return nil, false, err
	case at.ended:
		on := "on its worker cluster"
		if at.cluster != "" {
			on = "on cluster " + at.cluster
		}
		gone := fmt.Sprintf("TrainJob %s is %s: MultiKueue deleted its copy %s, with its pods and their logs, once it finished", tj.Name, stage.Of(tj), on)
		if !o.Follow {
			return nil, true, fmt.Errorf("%s", gone)
		}
		fmt.Fprintf(o.ErrOut, "note: %s\n", gone)
		return nil, true, outcome(tj)
	case at.remote == nil:
		return nil, false, fmt.Errorf("%s; follow it with: kubectl trainjob logs %s -f", at.waiting, o.Name)
	}
	return at.remote, false, nil
}

// where is what findCopy found of a dispatched TrainJob's copy.
type where struct {
	cluster string
	// remote is the worker's copy, when there.
	remote *trainer.TrainJob
	// ended: the TrainJob ended and its copy is gone.
	ended bool
	// waiting says what it waits for: a worker, or its copy there.
	waiting string
}

// findCopy looks once for the worker's copy of tj, and when it is there points the command's clients at the
// worker. A worker the user cannot reach is an error that says where tj runs and how to read its logs there.
func (o *LogsOptions) findCopy(ctx context.Context, tj *trainer.TrainJob) (where, error) {
	w, _, err := o.kueue.WorkerOf(ctx, tj)
	switch {
	case err != nil:
		return where{}, err
	case w == nil && stage.Of(tj).Terminal():
		return where{ended: true}, nil
	case w == nil:
		return where{waiting: fmt.Sprintf("TrainJob %s waits for MultiKueue to dispatch it to a worker cluster (stage %s)", tj.Name, stage.Of(tj))}, nil
	case w.Config == nil:
		return where{}, fmt.Errorf("TrainJob %s runs on MultiKueue cluster %s, and %s: to read its logs, %s",
			tj.Name, w.Cluster, w.Unreachable, w.Reach("logs", tj.Namespace, tj.Name))
	}
	at := where{cluster: w.Cluster}
	c, err := cmdutil.ClientFor(w.Config, o.client.Scheme())
	if err != nil {
		return at, err
	}
	cs, err := logsClientset(w.Config)
	if err != nil {
		return at, err
	}
	remote := &trainer.TrainJob{}
	err = c.Get(ctx, client.ObjectKeyFromObject(tj), remote)
	switch {
	case apierrors.IsNotFound(err) && stage.Of(tj).Terminal():
		at.ended = true
	case apierrors.IsNotFound(err):
		at.waiting = fmt.Sprintf("TrainJob %s is dispatched to MultiKueue cluster %s, where its copy is not created yet", tj.Name, w.Cluster)
	case err != nil:
		return at, fmt.Errorf("TrainJob %s runs on MultiKueue cluster %s; reading it there through Secret %s: %w", tj.Name, w.Cluster, w.Secret, err)
	default:
		at.remote = remote
		o.client, o.clientset = c, cs
	}
	return at, nil
}
