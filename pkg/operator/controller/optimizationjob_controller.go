package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator/apply"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator/eventrecorder"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/optimization"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/optimization/search"
)

// OptimizationJobReconciler runs the hyperparameter search of
// OptimizationJobs (KEP-2605): it creates their trials as TrainJobs, at
// most parallelTrials running and numTrials in all, and reports the best
// in status.result. It keeps nothing in memory between reconciles: what
// was created is read back from the API server (the trials' labels and
// annotations, listed live rather than from the cache, which may not have
// seen the last create yet), so that a replica that takes over from one
// killed mid-search neither loses nor repeats a trial.
type OptimizationJobReconciler struct {
	client   client.Client
	live     client.Reader
	recorder eventRecorder
	now      func() time.Time
}

// NewOptimizationJobReconciler builds the reconciler of mgr's
// OptimizationJobs.
func NewOptimizationJobReconciler(mgr manager.Manager) *OptimizationJobReconciler {
	return &OptimizationJobReconciler{
		client:   mgr.GetClient(),
		live:     mgr.GetAPIReader(),
		recorder: eventrecorder.New(mgr.GetClient(), mgr.GetScheme(), OptimizationJobRecorderName),
		now:      time.Now,
	}
}

// SetupWithManager registers the controller: it watches OptimizationJobs and
// the TrainJobs they control (their trials' progress).
func (r *OptimizationJobReconciler) SetupWithManager(mgr manager.Manager) error {
	if rec, ok := r.recorder.(manager.Runnable); ok {
		if err := mgr.Add(rec); err != nil {
			return err
		}
	}
	return builder.ControllerManagedBy(mgr).
		Named(OptimizationJobControllerName).
		For(&trainer.OptimizationJob{}).
		Owns(&trainer.TrainJob{}, builder.WithPredicates(trialProgress)).
		Complete(r)
}

// trialProgress passes the changes of a trial that the search reads: its
// creation and deletion, its end (Complete or Failed), and what it reports
// once ended (the objective of an ended trial counts). The metric reports of
// a running trial, a status write every few seconds from the status server,
// change nothing the search reads: each would list the trials again.
var trialProgress = predicate.TypedFuncs[client.Object]{
	UpdateFunc: func(e event.TypedUpdateEvent[client.Object]) bool {
		old, ok := e.ObjectOld.(*trainer.TrainJob)
		tj, ok2 := e.ObjectNew.(*trainer.TrainJob)
		if !ok || !ok2 {
			return true
		}
		return finished(old) != finished(tj) ||
			finished(tj) && !equality.Semantic.DeepEqual(old.Status.TrainerStatus, tj.Status.TrainerStatus) ||
			!equality.Semantic.DeepEqual(old.OwnerReferences, tj.OwnerReferences) ||
			!maps.Equal(old.Labels, tj.Labels) || !maps.Equal(old.Annotations, tj.Annotations)
	},
}

// optimizationUpdate collects what one reconcile changes in an
// OptimizationJob's status; the reconciler writes it once at the end, then
// records the events of its transitions.
type optimizationUpdate struct {
	orig *trainer.OptimizationJob
	oj   *trainer.OptimizationJob
	now  metav1.Time
}

func (u *optimizationUpdate) setCondition(typ string, status metav1.ConditionStatus, reason, message string) {
	setCondition(&u.oj.Status.Conditions, u.oj.Generation, u.now, typ, status, reason, message)
}

func (u *optimizationUpdate) conditionTrue(typ string) bool {
	return meta.IsStatusConditionTrue(u.oj.Status.Conditions, typ)
}

// Reconcile fetches an OptimizationJob and runs its search one step: create
// the trials it has room for, then report. An OptimizationJob being deleted,
// or that has ended, is left alone.
func (r *OptimizationJobReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	oj := &trainer.OptimizationJob{}
	if err := r.client.Get(ctx, req.NamespacedName, oj); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !oj.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	u := &optimizationUpdate{orig: oj, oj: oj.DeepCopy(), now: metav1.NewTime(r.now())}
	if u.oj.Status == nil {
		u.oj.Status = &trainer.OptimizationJobStatus{}
	}
	if u.conditionTrue(optimization.Complete) || u.conditionTrue(optimization.Failed) {
		return reconcile.Result{}, nil
	}
	alg, err := search.New(&oj.Spec, optimization.Seed(oj.UID))
	if err != nil {
		u.setCondition(optimization.Failed, metav1.ConditionTrue, optimization.InvalidSpecReason, err.Error())
		return reconcile.Result{}, r.writeStatus(ctx, u)
	}
	var trials trainer.TrainJobList
	if err := r.live.List(ctx, &trials, client.InNamespace(oj.Namespace), client.MatchingLabels{optimization.JobNameLabel: oj.Name}); err != nil {
		return reconcile.Result{}, err
	}
	s := optimization.Observe(oj, trials.Items)
	before := optimization.RecordedCreated(oj)
	out := r.createTrials(ctx, u, alg, s)
	report(u, s, out)
	if err := r.recordCreated(ctx, u, before, s.Created); apierrors.IsConflict(err) {
		log.FromContext(ctx).V(2).Info("The OptimizationJob changed during the reconcile")
		return reconcile.Result{Requeue: true}, out.err
	} else if err != nil {
		return reconcile.Result{}, errors.Join(out.err, err)
	}
	if err := r.writeStatus(ctx, u); apierrors.IsConflict(err) {
		return reconcile.Result{Requeue: true}, out.err
	} else if err != nil {
		return reconcile.Result{}, errors.Join(out.err, err)
	}
	return reconcile.Result{RequeueAfter: out.retryAfter}, out.err
}

// creation is what createTrials came to.
type creation struct {
	// exhausted: the algorithm has no more points to try.
	exhausted bool
	// err is a failed create, reported in Created and retried.
	err error
	// retryAfter is when to look again at a trial's name held by a TrainJob
	// the OptimizationJob does not control.
	retryAfter time.Duration
}

// createTrials creates the next trials, in index order, while fewer than
// parallelTrials run and fewer than numTrials were created, and counts
// them in s. A trial's name is its index: a create that meets the trial a
// previous attempt made (AlreadyExists, controlled by the OptimizationJob)
// counts it; one that meets another's TrainJob stops the search until that
// TrainJob is gone.
func (r *OptimizationJobReconciler) createTrials(ctx context.Context, u *optimizationUpdate, alg search.Algorithm, s *optimization.Search) creation {
	oj := u.orig
	for s.Created < int(oj.Spec.NumTrials) && s.Running < int(oj.Spec.ParallelTrials) {
		a, ok := alg.Next(s.Made)
		if !ok {
			return creation{exhausted: true}
		}
		trial, err := optimization.NewTrial(oj, s.Created, a)
		if err == nil {
			err = r.client.Create(ctx, trial, client.FieldOwner(apply.FieldManager))
		}
		if apierrors.IsAlreadyExists(err) {
			err = r.live.Get(ctx, client.ObjectKeyFromObject(trial), trial)
			if err == nil && !metav1.IsControlledBy(trial, oj) {
				return r.notControlled(u, trial)
			}
		}
		if err != nil {
			u.setCondition(optimization.Created, metav1.ConditionFalse, optimization.TrainJobsCreationFailedReason,
				fmt.Sprintf("Failed to create trial %s: %v", optimization.TrialName(oj.Name, s.Created), err))
			return creation{err: err}
		}
		log.FromContext(ctx).V(2).Info("Created a trial", "trainJob", trial.Name, "parameters", a)
		s.Made = append(s.Made, a)
		s.Trials = append(s.Trials, trial)
		s.Created++
		s.Running++
	}
	return creation{}
}

// notControlled reports a trial's name held by a TrainJob the
// OptimizationJob does not control, which is never adopted: Created=False
// until it is gone, looked at again after as long as it has been there
// (from a second up to maxNotControlledWait), since nothing watched says
// when it goes.
func (r *OptimizationJobReconciler) notControlled(u *optimizationUpdate, holder *trainer.TrainJob) creation {
	u.setCondition(optimization.Created, metav1.ConditionFalse, optimization.TrialNotControlledReason, fmt.Sprintf(
		"TrainJob %s/%s holds the name of the next trial and is not controlled by this OptimizationJob: delete or rename it to let the search go on",
		holder.Namespace, holder.Name))
	since := meta.FindStatusCondition(u.oj.Status.Conditions, optimization.Created).LastTransitionTime.Time
	return creation{retryAfter: min(max(u.now.Sub(since), time.Second), maxNotControlledWait)}
}

// report sets the conditions and the result from the search s after
// createTrials came to out.
func report(u *optimizationUpdate, s *optimization.Search, out creation) {
	spec := &u.oj.Spec
	if s.Best != nil {
		params := s.Made[mustIndex(s.Best)]
		u.oj.Status.Result = trainer.Result{TrainJobName: s.Best.Name, Parameters: append([]trainer.ParameterAssignment(nil), params...)}
	}
	allCreated := s.Created >= int(spec.NumTrials) || out.exhausted
	switch {
	case out.err != nil || out.retryAfter > 0:
		// Created=False says why; set by createTrials.
	case allCreated:
		u.setCondition(optimization.Created, metav1.ConditionTrue, optimization.AllTrialsCreatedReason,
			fmt.Sprintf("All %d trials are created", s.Created))
	case s.Created > 0:
		u.setCondition(optimization.Created, metav1.ConditionTrue, optimization.TrialsCreatedReason,
			fmt.Sprintf("%d of %d trials are created", s.Created, spec.NumTrials))
	}
	if !allCreated || s.Running > 0 {
		return
	}
	counts := fmt.Sprintf("%d trials: %d Complete, %d Failed, %d deleted", s.Created, s.Succeeded, s.Failed, s.Created-len(s.Trials))
	reason := optimization.MaxTrialsReachedReason
	if s.Created < int(spec.NumTrials) {
		reason = optimization.SearchSpaceExhaustedReason
	}
	if s.Best == nil {
		u.setCondition(optimization.Failed, metav1.ConditionTrue, optimization.NoTrialSucceededReason, fmt.Sprintf(
			"No trial completed with metric %q reported (%s)", spec.Objectives[0].Metric, counts))
		return
	}
	u.setCondition(optimization.Complete, metav1.ConditionTrue, reason, fmt.Sprintf("%s; the best is %s with %s %s",
		counts, s.Best.Name, spec.Objectives[0].Metric, strconv.FormatFloat(s.BestValue, 'g', -1, 64)))
}

// mustIndex is the index of a trial Observe counted.
func mustIndex(tj *trainer.TrainJob) int {
	i, _ := optimization.TrialIndex(tj)
	return i
}

// recordCreated raises the OptimizationJob's count of created trials to
// created, when before, the count recorded, is lower: this reconcile created
// some, or a crash or a conflict kept an earlier one from recording those it
// made. It keeps a trial deleted by hand counted even when it was the last
// one made. The patch fails when the
// OptimizationJob changed since it was read (a conflict); the trials made
// are counted all the same by their labels.
func (r *OptimizationJobReconciler) recordCreated(ctx context.Context, u *optimizationUpdate, before, created int) error {
	if created <= before {
		return nil
	}
	patched := u.orig.DeepCopy()
	patch := client.MergeFromWithOptions(u.orig, client.MergeFromWithOptimisticLock{})
	if patched.Annotations == nil {
		patched.Annotations = map[string]string{}
	}
	patched.Annotations[optimization.TrialsCreatedAnnotation] = strconv.Itoa(created)
	if err := r.client.Patch(ctx, patched, patch); err != nil {
		return err
	}
	u.oj.ResourceVersion = patched.ResourceVersion
	return nil
}

// writeStatus writes the status when the reconcile changed it, then
// records an event per condition transition.
func (r *OptimizationJobReconciler) writeStatus(ctx context.Context, u *optimizationUpdate) error {
	before := ptr.Deref(u.orig.Status, trainer.OptimizationJobStatus{})
	if equality.Semantic.DeepEqual(before, *u.oj.Status) {
		return nil
	}
	if err := r.client.Status().Update(ctx, u.oj); err != nil {
		return err
	}
	for _, e := range transitions(before.Conditions, u.oj.Status.Conditions, optimizationEventType) {
		r.recorder.Eventf(u.orig, nil, e.Type, e.Reason, e.Action, "%s", eventNote(e.Note))
	}
	return nil
}

// optimizationEventType is Warning for an OptimizationJob's condition that
// reports a failure.
var optimizationEventType = failureEventType(optimization.Failed, optimization.Created)
