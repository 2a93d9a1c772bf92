package apply

import (
	"context"
	"errors"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
)

// ErrStaleTrainJob reports a status computed from a TrainJob older than the
// one the API server holds; the newer one is reconciled when the cache gets
// it.
var ErrStaleTrainJob = errors.New("the TrainJob changed during the reconcile")

// WriteStatus writes tj's status, computed from the TrainJob read at
// resourceVersion from, with an update of the status subresource: the API
// server takes only the status from it and has no patch to apply. The
// resourceVersion is the precondition: when the TrainJob changed since it
// was read, the status was computed from a stale copy (the cache had not
// seen the last write yet) and writing it would record the same
// transitions twice; WriteStatus then returns ErrStaleTrainJob.
func (a *Applier) WriteStatus(ctx context.Context, tj *trainer.TrainJob, from string) error {
	err := a.client.Status().Update(ctx, tj)
	switch {
	case apierrors.IsConflict(err):
		return ErrStaleTrainJob
	case err != nil:
		return err
	}
	a.status.wrote(tj, from)
	return nil
}

// Stale tells whether tj, as read from the cache, predates the operator's
// last status write: a reconcile of it would compute the same status again
// and fail to write it, so the caller does nothing; the write's watch event
// brings the TrainJob back.
func (a *Applier) Stale(tj *trainer.TrainJob) bool { return a.status.stale(tj) }

// Forget drops what the Applier remembers of a TrainJob that is gone.
func (a *Applier) Forget(key types.NamespacedName) { a.status.forget(key) }

// statusWrites remembers, for every TrainJob whose status the operator
// wrote and whose write the cache has not shown yet, the resourceVersion the
// write was made from.
type statusWrites struct {
	mu   sync.Mutex
	from map[types.NamespacedName]string
}

func newStatusWrites() *statusWrites { return &statusWrites{from: map[types.NamespacedName]string{}} }

// wrote records a status write of tj from resourceVersion from.
func (w *statusWrites) wrote(tj *trainer.TrainJob, from string) {
	if tj.ResourceVersion == from {
		// The write changed nothing stored: no event will follow.
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.from[types.NamespacedName{Namespace: tj.Namespace, Name: tj.Name}] = from
}

// stale tells whether tj predates the last status write; once it does
// not, the record is dropped.
func (w *statusWrites) stale(tj *trainer.TrainJob) bool {
	key := types.NamespacedName{Namespace: tj.Namespace, Name: tj.Name}
	w.mu.Lock()
	defer w.mu.Unlock()
	from, ok := w.from[key]
	if ok && from == tj.ResourceVersion {
		return true
	}
	w.forgetLocked(key)
	return false
}

func (w *statusWrites) forget(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.forgetLocked(key)
}

func (w *statusWrites) forgetLocked(key types.NamespacedName) {
	if _, ok := w.from[key]; !ok {
		return
	}
	delete(w.from, key)
	if len(w.from) == 0 {
		// A Go map never shrinks: the one a burst of status writes grew
		// goes once they are all seen.
		w.from = map[types.NamespacedName]string{}
	}
}
