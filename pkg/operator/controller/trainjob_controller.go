// Package controller holds the operator's controllers: the TrainJob
// controller, which runs the Build and PostExecution phases of the Pipeline
// Framework (spec §3); the runtime controllers, which only take
// upstream's legacy finalizer off runtimes; and the OptimizationJob
// controller (KEP-2605), which runs a hyperparameter search as TrainJobs.
package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/admission"
	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator/apply"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator/eventrecorder"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator/metrics"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/snapshot"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/stage"
)

// TrainJobReconciler reconciles TrainJobs into the objects their runtime
// and the Pipeline Framework's plugins build (a JobSet and its companions),
// and reports their progress in the TrainJob's status.
type TrainJobReconciler struct {
	client    client.Client
	framework *pipeline.Framework
	recorder  eventRecorder
	snapshots *snapshot.Store
	// applier is the one write path: the children and the status.
	applier *apply.Applier
	stages  *stageClock
	// metrics count reconciles and build errors (metrics.Default).
	metrics *metrics.Metrics
	// conflicts remembers since when each TrainJob's writes have kept
	// meeting other writers'.
	conflicts *conflictRuns
	now       func() time.Time
}

// eventRecorder records the TrainJob controller's Events.
type eventRecorder interface {
	Eventf(regarding, related runtime.Object, eventType, reason, action, note string, args ...any)
}

// NewTrainJobReconciler builds the reconciler of mgr's TrainJobs. Its
// Events are written by an eventrecorder.Recorder that SetupWithManager
// adds to mgr.
func NewTrainJobReconciler(mgr manager.Manager, fw *pipeline.Framework) *TrainJobReconciler {
	return &TrainJobReconciler{
		client:    mgr.GetClient(),
		framework: fw,
		recorder:  eventrecorder.New(mgr.GetClient(), mgr.GetScheme(), TrainJobRecorderName),
		snapshots: snapshot.NewStore(mgr.GetClient(), mgr.GetAPIReader(), mgr.GetScheme()),
		applier:   apply.New(mgr.GetClient(), mgr.GetAPIReader(), mgr.GetScheme(), mgr.GetConfig(), mgr.GetHTTPClient()),
		stages:    newStageClock(metrics.Default),
		metrics:   metrics.Default,
		conflicts: newConflictRuns(),
		now:       time.Now,
	}
}

// SetupWithManager registers the controller: it watches TrainJobs, the
// deletion of their runtime snapshots, and what the plugins ask for (the
// JobSet plugin its JobSets, MPI its Secrets and ConfigMaps, …).
func (r *TrainJobReconciler) SetupWithManager(mgr manager.Manager) error {
	if rec, ok := r.recorder.(manager.Runnable); ok {
		if err := mgr.Add(rec); err != nil {
			return err
		}
	}
	b := builder.ControllerManagedBy(mgr).
		Named(TrainJobControllerName).
		For(&trainer.TrainJob{}).
		WithOptions(crcontroller.Options{RateLimiter: retryRateLimiter()})
	// Not metadata only: the snapshot is read from the structured cache,
	// which must have seen the deletion when the reconcile runs.
	b = pipeline.Owns(b, &corev1.ConfigMap{}, builder.WithPredicates(snapshotDeleted))
	for _, rb := range r.framework.ReconcilerBuilders() {
		b = rb(b, mgr.GetClient(), mgr.GetCache())
	}
	return b.Complete(r)
}

// snapshotDeleted passes the deletion of a runtime snapshot, so that it is
// taken again at once (from the runtime as it is now).
var snapshotDeleted = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	UpdateFunc:  func(event.UpdateEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	DeleteFunc: func(e event.DeleteEvent) bool {
		return strings.HasSuffix(e.Object.GetName(), snapshot.Suffix)
	},
}

// Reconcile fetches a TrainJob and delegates to reconcile, unless another
// controller manages it (MultiKueue) or it is being deleted: then nothing is
// touched. A TrainJob being deleted is never built again: a child re-created
// under a terminating owner would hold up its deletion (foreground) or
// outlive it.
func (r *TrainJobReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	begin := time.Now()
	tj := &trainer.TrainJob{}
	if err := r.client.Get(ctx, req.NamespacedName, tj); err != nil {
		if apierrors.IsNotFound(err) {
			r.stages.forget(req.NamespacedName)
			r.applier.Forget(req.NamespacedName)
			r.conflicts.end(req.NamespacedName)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !tj.DeletionTimestamp.IsZero() {
		log.FromContext(ctx).V(2).Info("Skipping a TrainJob being deleted")
		return reconcile.Result{}, nil
	}
	if r.applier.Stale(tj) {
		log.FromContext(ctx).V(2).Info("Waiting for the cache to see the last status write")
		return reconcile.Result{}, nil
	}
	if managedBy := ptr.Deref(tj.Spec.ManagedBy, trainer.TrainJobControllerManager); managedBy != trainer.TrainJobControllerManager {
		log.FromContext(ctx).V(2).Info("Skipping a TrainJob managed by another controller", "managedBy", managedBy)
		return reconcile.Result{}, nil
	}
	result, err := r.reconcile(apply.WithWritten(ctx), tj)
	r.metrics.ObserveReconcile(time.Since(begin), err)
	return result, err
}

// reconcile runs the named steps of spec §3.2 on a working copy of the
// status, then writes the status once. What happened while the operator did
// not look comes before the build: a JobSet that ended or went, and a
// deadline that passed, end the TrainJob, and a finished TrainJob is never
// built again.
func (r *TrainJobReconciler) reconcile(ctx context.Context, tj *trainer.TrainJob) (reconcile.Result, error) {
	u := newStatusUpdate(tj, metav1.NewTime(r.now()))
	// A TrainJob that is not built has no children to wait for.
	out := buildOutcome{settled: true}
	var errs []error
	if gk := pipeline.RuntimeRefGroupKind(tj); !admission.Supported(gk) {
		u.setCondition(trainer.TrainJobFailed, metav1.ConditionTrue, trainer.TrainJobRuntimeNotSupportedReason, admission.UnsupportedError(gk).Error())
	} else if !finished(u.tj) {
		if err := r.observeEnd(ctx, u); err != nil {
			// Whether the JobSet is gone is not known: nothing is built.
			return reconcile.Result{}, err
		}
		failPastDeadline(u)
		if !finished(u.tj) {
			out = r.build(ctx, u)
		}
	}
	errs = append(errs, out.err, r.postExecution(ctx, u, out.built || !out.settled), r.deletePastDeadline(ctx, u))
	setSuspended(u, out.settled)
	requeueAfter := untilDeadline(u)
	if out.retryAfter > 0 && (requeueAfter == 0 || out.retryAfter < requeueAfter) {
		requeueAfter = out.retryAfter
	}
	if err := r.writeStatus(ctx, u); errors.Is(err, apply.ErrStaleTrainJob) {
		log.FromContext(ctx).V(2).Info("Status not written: the TrainJob changed meanwhile")
		return reconcile.Result{}, nil
	} else if err != nil {
		errs = append(errs, err)
	}
	r.stages.observe(u.tj, u.now.Time)
	if err := errors.Join(errs...); err != nil {
		return reconcile.Result{}, err
	}
	if out.conflict {
		return reconcile.Result{Requeue: true}, nil
	}
	return reconcile.Result{RequeueAfter: requeueAfter}, nil
}

// observeEnd reads the end of a TrainJob whose JobSet runs, before anything
// is built again: a JobSet that completed or failed while the operator was
// not running ends the TrainJob, and one that is gone while its runtime
// gives JobSets a ttlSecondsAfterFinished — so it may have been deleted by
// its TTL after an end the operator missed — is not created again. Its end
// is unknown and may have been a success, and a training run again would
// redo it and write over what it wrote: the TrainJob fails (JobSetDeleted).
// A JobSet without a TTL that is gone was deleted by hand while it ran, and
// is built again, as upstream does. Gone means gone from the API server,
// not only from the cache, which may not have seen the JobSet's create yet.
func (r *TrainJobReconciler) observeEnd(ctx context.Context, u *statusUpdate) error {
	if !jobSetRuns(u.tj) {
		return nil
	}
	err := r.postExecution(ctx, u, false)
	if !apierrors.IsNotFound(err) {
		return err
	}
	rt, _, err := r.snapshots.Runtime(ctx, u.tj)
	if err != nil || rt.Spec.Template.Spec.TTLSecondsAfterFinished == nil {
		// No TTL deletes its JobSets (or the runtime is unknown: the build
		// says why): a JobSet gone was deleted by hand, and is built again.
		return nil
	}
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: u.tj.Namespace, Name: u.tj.Name}}
	switch exists, err := r.applier.Exists(ctx, u.tj, js); {
	case err != nil:
		return err
	case exists:
		return nil
	}
	u.setCondition(trainer.TrainJobFailed, metav1.ConditionTrue, JobSetDeletedReason,
		fmt.Sprintf(jobSetDeletedMessage, client.ObjectKeyFromObject(js)))
	return nil
}

// jobSetRuns tells whether the TrainJob's JobSet was built and let run: its
// components are created, and it is neither suspended nor waiting for its
// resume to reach the JobSet.
func jobSetRuns(tj *trainer.TrainJob) bool {
	return meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobComponentsCreated) &&
		!ptr.Deref(tj.Spec.Suspend, false) && !meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobSuspended)
}

// buildOutcome is what the Build phase and the writes of its objects came to.
type buildOutcome struct {
	// built: the Build phase returned objects, and they are written.
	built bool
	// settled: the children are as built (or there are none to build).
	settled bool
	// err is a failure, reported in ComponentsCreated and retried.
	err error
	// conflict: a write met another writer's; retried quietly, as the next
	// reconcile starts from what that writer wrote.
	conflict bool
	// retryAfter is when to look again at a name held by an object the
	// TrainJob does not control.
	retryAfter time.Duration
}

// build runs the Build phase and ensures what it returns, and sets
// ComponentsCreated.
func (r *TrainJobReconciler) build(ctx context.Context, u *statusUpdate) buildOutcome {
	tj := u.tj
	objs, err := r.buildObjects(ctx, tj)
	var notControlled *pipeline.NotControlledError
	switch {
	case errors.As(err, &notControlled):
		return r.notControlled(u, notControlled)
	case err != nil:
		plugin := metrics.RuntimePlugin
		var pluginErr *pipeline.PluginError
		if errors.As(err, &pluginErr) {
			plugin = pluginErr.Plugin
		}
		r.metrics.CountBuildError(plugin)
		componentsFailed(u, trainer.TrainJobJobsBuildFailedReason, ComponentsBuildFailedPrefix, err)
		return buildOutcome{err: err}
	}
	err = r.applier.Ensure(ctx, tj, objs)
	key := types.NamespacedName{Namespace: tj.Namespace, Name: tj.Name}
	if !apierrors.IsConflict(err) {
		r.conflicts.end(key)
	}
	switch {
	case errors.Is(err, apply.ErrOwnerDeleted):
		log.FromContext(ctx).V(2).Info("Not building again: the TrainJob is being deleted")
		return buildOutcome{}
	case errors.As(err, &notControlled):
		return r.notControlled(u, notControlled)
	case apierrors.IsConflict(err):
		since := r.conflicts.begin(key, u.now.Time)
		if u.now.Sub(since) < persistentConflict {
			log.FromContext(ctx).V(1).Info("A write met another writer's; retrying", "error", err.Error())
			return buildOutcome{conflict: true}
		}
		err = fmt.Errorf("writes have met other writers' for %v: %w", u.now.Sub(since).Round(time.Second), err)
		componentsFailed(u, trainer.TrainJobJobsCreationFailedReason, ComponentsCreationFailedPrefix, err)
		return buildOutcome{err: err}
	case err != nil:
		componentsFailed(u, trainer.TrainJobJobsCreationFailedReason, ComponentsCreationFailedPrefix, err)
		return buildOutcome{err: err}
	}
	u.setCondition(trainer.TrainJobComponentsCreated, metav1.ConditionTrue, trainer.TrainJobJobsCreatedReason, ComponentsCreatedMessage)
	return buildOutcome{built: len(objs) > 0, settled: true}
}

// retryRateLimiter spaces the retries of TrainJobs whose reconcile failed
// or met another writer. controller-runtime's default lets all TrainJobs
// together retry 10 times a second after a burst of 100, and one TrainJob
// after up to 1000 s: when a new leader takes over a burst of creates, the
// races of its first reconciles (a write that meets the cache a moment
// behind) queue hundreds of retries, the last of them a minute or more
// late. Here a TrainJob's own retries back off exponentially to
// maxRetryDelay, and all of them together may retry 100 times a second after
// a burst of 1000: the client's rate limit (clientConnection.qps) protects
// the API server, not this one.
func retryRateLimiter() workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](5*time.Millisecond, maxRetryDelay),
		&workqueue.TypedBucketRateLimiter[reconcile.Request]{Limiter: rate.NewLimiter(100, 1000)},
	)
}

// maxRetryDelay bounds the wait before a failing TrainJob is reconciled
// again.
const maxRetryDelay = 30 * time.Second

// componentsFailed reports a build, or a write of what it built, that
// failed: in a Warning event, and in ComponentsCreated=False (reason, and
// prefix before the error) unless the TrainJob's components were created
// before. Those exist and run as they were built (a missing CA Secret, say,
// changes nothing in a running JobSet): ComponentsCreated stays True, and
// the event, repeated at every retry, says what failed.
func componentsFailed(u *statusUpdate, reason, prefix string, err error) {
	if !meta.IsStatusConditionTrue(u.tj.Status.Conditions, trainer.TrainJobComponentsCreated) {
		u.setCondition(trainer.TrainJobComponentsCreated, metav1.ConditionFalse, reason, prefix+err.Error())
	}
	u.warn(ReasonResourcesCreationFailed, ActionReconciling, resourcesCreationFailedPrefix+eventNote(err.Error()))
}

// persistentConflict is how long a TrainJob's writes may keep meeting other
// writers' before it says so: one conflict is the normal race of two
// writers, settled by the next reconcile; conflicts that go on are another
// controller fighting over the same object, which the user must hear of.
const persistentConflict = 30 * time.Second

// conflictRuns remembers, per TrainJob, when its current run of write
// conflicts began.
type conflictRuns struct {
	mu    sync.Mutex
	since map[types.NamespacedName]time.Time
}

func newConflictRuns() *conflictRuns {
	return &conflictRuns{since: map[types.NamespacedName]time.Time{}}
}

// begin notes a conflict at now and returns when the run of conflicts began.
func (c *conflictRuns) begin(key types.NamespacedName, now time.Time) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	since, ok := c.since[key]
	if !ok {
		since = now
		c.since[key] = now
	}
	return since
}

// end ends the run: the last write went through, or failed otherwise.
func (c *conflictRuns) end(key types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.since, key)
}

// maxNotControlledWait bounds the wait between two looks at a name held by
// an object the TrainJob does not control.
const maxNotControlledWait = 30 * time.Second

// notControlled reports a child's name held by an object the TrainJob does
// not control, in ComponentsCreated (whose transition is a Warning event).
// The name is looked at again after as long as it has been held, from a
// second up to maxNotControlledWait: the holder may not be watched (the
// cache has only the operator's ConfigMaps and Secrets); the child of a
// deleted TrainJob of the same name wakes the TrainJob when it goes.
func (r *TrainJobReconciler) notControlled(u *statusUpdate, err *pipeline.NotControlledError) buildOutcome {
	u.setCondition(trainer.TrainJobComponentsCreated, metav1.ConditionFalse, ComponentNotControlledReason, err.Error())
	since := meta.FindStatusCondition(u.tj.Status.Conditions, trainer.TrainJobComponentsCreated).LastTransitionTime.Time
	return buildOutcome{retryAfter: min(max(u.now.Sub(since), time.Second), maxNotControlledWait)}
}

// buildObjects resolves the TrainJob's runtime through its snapshot and runs
// the Build phase of the framework. It returns the objects to ensure, the
// snapshot first when it is still to be taken: a snapshot is taken only
// with a build, so that a runtime fixed after a failed build is the one
// taken.
func (r *TrainJobReconciler) buildObjects(ctx context.Context, tj *trainer.TrainJob) ([]client.Object, error) {
	rt, snap, err := r.snapshots.Runtime(ctx, tj)
	if err != nil {
		return nil, err
	}
	objs, _, err := r.framework.Build(ctx, tj, rt, pipeline.BuildOptions{})
	if err != nil || snap == nil {
		return objs, err
	}
	return append([]client.Object{snap}, objs...), nil
}

// setSuspended sets the Suspended condition of a TrainJob that has not
// finished: True while spec.suspend is and the children are as built (a
// suspended JobSet, or none), False (Resumed) once spec.suspend no longer is
// and the JobSet as built runs, absent if never suspended.
func setSuspended(u *statusUpdate, settled bool) {
	switch {
	case finished(u.tj) || !settled:
	case ptr.Deref(u.tj.Spec.Suspend, false):
		u.setCondition(trainer.TrainJobSuspended, metav1.ConditionTrue, trainer.TrainJobSuspendedReason, trainer.TrainJobSuspendedMessage)
	case meta.IsStatusConditionTrue(u.tj.Status.Conditions, trainer.TrainJobSuspended):
		u.setCondition(trainer.TrainJobSuspended, metav1.ConditionFalse, trainer.TrainJobResumedReason, trainer.TrainJobResumedMessage)
	}
}

// postExecution runs the PostExecution phase: the status plugin derives the
// status from the children. Complete and Failed are terminal: once one is
// True, the plugin changes neither (a JobSet restarted after the TrainJob
// failed does not make it Complete, upstream #3891), and the two are never
// True together. tolerateMissing ignores a JobSet the cache does not have
// yet (just applied, or never built).
func (r *TrainJobReconciler) postExecution(ctx context.Context, u *statusUpdate, tolerateMissing bool) error {
	status, err := r.framework.Status(ctx, u.tj)
	if err != nil {
		if tolerateMissing && apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	terminal := finished(u.tj)
	before := u.tj.Status.Conditions
	u.tj.Status = *status
	switch {
	case terminal:
		for _, typ := range []string{trainer.TrainJobComplete, trainer.TrainJobFailed} {
			keepCondition(&u.tj.Status.Conditions, before, typ)
		}
	case meta.IsStatusConditionTrue(u.tj.Status.Conditions, trainer.TrainJobFailed):
		keepCondition(&u.tj.Status.Conditions, before, trainer.TrainJobComplete)
	}
	return nil
}

// keepCondition sets the condition typ of conditions back to what it was
// in before (absent when it was absent).
func keepCondition(conditions *[]metav1.Condition, before []metav1.Condition, typ string) {
	if c := meta.FindStatusCondition(before, typ); c != nil {
		meta.SetStatusCondition(conditions, *c)
		return
	}
	meta.RemoveStatusCondition(conditions, typ)
}

// deadline is when a TrainJob that runs passes its activeDeadlineSeconds;
// false when it has none, has finished, or is suspended. The clock starts
// at creation and restarts at every resume (Resumed: once the JobSet runs
// again).
func deadline(tj *trainer.TrainJob) (time.Time, bool) {
	if tj.Spec.ActiveDeadlineSeconds == 0 || finished(tj) || ptr.Deref(tj.Spec.Suspend, false) ||
		meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobSuspended) {
		return time.Time{}, false
	}
	start := tj.CreationTimestamp.Time
	if c := meta.FindStatusCondition(tj.Status.Conditions, trainer.TrainJobSuspended); c != nil {
		start = c.LastTransitionTime.Time
	}
	return start.Add(time.Duration(tj.Spec.ActiveDeadlineSeconds) * time.Second), true
}

// failPastDeadline fails a TrainJob past its deadline (deletePastDeadline
// then deletes its JobSet), whether it passed a moment ago or while no
// replica of the operator ran.
func failPastDeadline(u *statusUpdate) {
	if d, ok := deadline(u.tj); ok && !u.now.Time.Before(d) {
		u.setCondition(trainer.TrainJobFailed, metav1.ConditionTrue, trainer.TrainJobDeadlineExceededReason, trainer.TrainJobDeadlineExceededMessage)
	}
}

// untilDeadline is when to look again at a TrainJob that runs with a
// deadline: at least a second from now.
func untilDeadline(u *statusUpdate) time.Duration {
	d, ok := deadline(u.tj)
	if !ok {
		return 0
	}
	return max(d.Sub(u.now.Time), time.Second)
}

// deletePastDeadline deletes the JobSet of a TrainJob failed past its
// deadline, through the applier: only its own, and at every reconcile until
// it is gone, so that a failed delete is tried again.
func (r *TrainJobReconciler) deletePastDeadline(ctx context.Context, u *statusUpdate) error {
	c := meta.FindStatusCondition(u.tj.Status.Conditions, trainer.TrainJobFailed)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != trainer.TrainJobDeadlineExceededReason {
		return nil
	}
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: u.tj.Namespace, Name: u.tj.Name}}
	if err := r.applier.Delete(ctx, u.tj, js); err != nil {
		return fmt.Errorf("delete the JobSet of a TrainJob past its deadline: %w", err)
	}
	return nil
}

// writeStatus writes the status when the reconcile changed it, then
// records the events: one per condition transition once the status is
// written, and the warnings in any case.
func (r *TrainJobReconciler) writeStatus(ctx context.Context, u *statusUpdate) error {
	var events []trainJobEvent
	if u.changed() {
		transitions := u.transitions()
		switch err := r.applier.WriteStatus(ctx, u.tj, u.orig.ResourceVersion); {
		case errors.Is(err, apply.ErrStaleTrainJob):
			return err
		case err != nil:
			r.record(u.orig, u.events)
			return fmt.Errorf("update TrainJob status: %w", err)
		}
		events = transitions
	}
	r.record(u.orig, append(events, u.events...))
	return nil
}

func (r *TrainJobReconciler) record(tj *trainer.TrainJob, events []trainJobEvent) {
	for _, e := range events {
		r.recorder.Eventf(tj, nil, e.Type, e.Reason, e.Action, "%s", eventNote(e.Note))
	}
}

// stageClock remembers the stage of every TrainJob and since when, to time
// stage transitions into metrics.
type stageClock struct {
	metrics *metrics.Metrics
	mu      sync.Mutex
	seen    map[types.NamespacedName]stageSince
}

func newStageClock(m *metrics.Metrics) *stageClock {
	return &stageClock{metrics: m, seen: map[types.NamespacedName]stageSince{}}
}

type stageSince struct {
	uid   types.UID
	stage stage.Stage
	since time.Time
}

// observe notes the stage of tj at now, and records the time spent in the
// previous stage when it changed. A TrainJob first seen in its first stage
// has been there since its creation; in another (the operator restarted),
// the time it entered it is unknown, so its first transition is not timed.
func (c *stageClock) observe(tj *trainer.TrainJob, now time.Time) {
	s := stage.Of(tj)
	key := types.NamespacedName{Namespace: tj.Namespace, Name: tj.Name}
	c.mu.Lock()
	defer c.mu.Unlock()
	prev, ok := c.seen[key]
	switch {
	case !ok || prev.uid != tj.UID:
		since := time.Time{}
		if s == stage.Pending || s == stage.Suspended {
			since = tj.CreationTimestamp.Time
		}
		c.seen[key] = stageSince{uid: tj.UID, stage: s, since: since}
	case prev.stage != s:
		if !prev.since.IsZero() {
			c.metrics.ObserveStageTransition(prev.stage, s, now.Sub(prev.since))
		}
		c.seen[key] = stageSince{uid: tj.UID, stage: s, since: now}
	}
}

func (c *stageClock) forget(key types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.seen, key)
}
