// Package controller holds the operator's controllers: the TrainJob
// controller, which runs the Build and PostExecution phases of the Pipeline
// Framework (spec §3), and the runtime controllers, which only take
// upstream's legacy finalizer off runtimes.
package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/csaupgrade"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator/eventrecorder"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator/metrics"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator/runtimes"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/stage"
)

// TrainJobReconciler reconciles TrainJobs into the objects their runtime
// and the Pipeline Framework's plugins build (a JobSet and its companions),
// and reports their progress in the TrainJob's status.
type TrainJobReconciler struct {
	client client.Client
	// live reads the API server, where the cache may lag behind.
	live         client.Reader
	scheme       *runtime.Scheme
	framework    *pipeline.Framework
	recorder     eventRecorder
	snapshots    *snapshots
	creates      *creator
	stages       *stageClock
	statusWrites *statusWrites
	now          func() time.Time
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
		client:       mgr.GetClient(),
		live:         mgr.GetAPIReader(),
		scheme:       mgr.GetScheme(),
		framework:    fw,
		recorder:     eventrecorder.New(mgr.GetClient(), mgr.GetScheme(), TrainJobRecorderName),
		snapshots:    newSnapshots(mgr.GetClient(), mgr.GetAPIReader(), mgr.GetScheme()),
		creates:      newCreator(mgr.GetClient(), mgr.GetConfig(), mgr.GetHTTPClient(), mgr.GetScheme()),
		stages:       &stageClock{seen: map[types.NamespacedName]stageSince{}},
		statusWrites: &statusWrites{from: map[types.NamespacedName]string{}},
		now:          time.Now,
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
		For(&trainer.TrainJob{})
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
		return strings.HasSuffix(e.Object.GetName(), runtimes.SnapshotSuffix)
	},
}

// Reconcile fetches a TrainJob and delegates to reconcile, unless another
// controller manages it (MultiKueue): then nothing is touched.
func (r *TrainJobReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	begin := time.Now()
	tj := &trainer.TrainJob{}
	if err := r.client.Get(ctx, req.NamespacedName, tj); err != nil {
		if apierrors.IsNotFound(err) {
			r.stages.forget(req.NamespacedName)
			r.statusWrites.forget(req.NamespacedName)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if r.statusWrites.stale(tj) {
		log.FromContext(ctx).V(2).Info("Waiting for the cache to see the last status write")
		return reconcile.Result{}, nil
	}
	if managedBy := ptr.Deref(tj.Spec.ManagedBy, trainer.TrainJobControllerManager); managedBy != trainer.TrainJobControllerManager {
		log.FromContext(ctx).V(2).Info("Skipping a TrainJob managed by another controller", "managedBy", managedBy)
		return reconcile.Result{}, nil
	}
	result, err := r.reconcile(withWritten(ctx), tj)
	metrics.ObserveReconcile(time.Since(begin), err)
	return result, err
}

// reconcile runs the named steps of spec §3.2 on a working copy of the
// status, then writes the status once.
func (r *TrainJobReconciler) reconcile(ctx context.Context, tj *trainer.TrainJob) (reconcile.Result, error) {
	u := newStatusUpdate(tj, metav1.NewTime(r.now()))
	var errs []error
	built, buildFailed := false, false
	if gk := pipeline.RuntimeRefGroupKind(tj); !runtimes.Supported(gk) {
		u.setCondition(trainer.TrainJobFailed, metav1.ConditionTrue, trainer.TrainJobRuntimeNotSupportedReason, runtimes.UnsupportedError(gk).Error())
	} else if !finished(u.tj) {
		var err error
		built, err = r.build(ctx, u)
		buildFailed = err != nil
		errs = append(errs, err)
	}
	setSuspended(u)
	errs = append(errs, r.postExecution(ctx, u, built || buildFailed))
	requeueAfter := r.enforceDeadline(ctx, u)
	if err := r.writeStatus(ctx, u); errors.Is(err, errStaleTrainJob) {
		log.FromContext(ctx).V(2).Info("Status not written: the TrainJob changed meanwhile")
		return reconcile.Result{}, nil
	} else if err != nil {
		errs = append(errs, err)
	}
	r.stages.observe(u.tj, u.now.Time)
	if err := errors.Join(errs...); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: requeueAfter}, nil
}

// build runs the Build phase and applies what it returns, in order, except
// the objects already as built. It reports whether the phase built
// anything, and sets ComponentsCreated.
func (r *TrainJobReconciler) build(ctx context.Context, u *statusUpdate) (bool, error) {
	tj := u.tj
	objs, saved, err := r.buildObjects(ctx, tj)
	if err != nil {
		var applyErr *applyError
		if !errors.As(err, &applyErr) {
			plugin := metrics.RuntimePlugin
			var pluginErr *pipeline.PluginError
			if errors.As(err, &pluginErr) {
				plugin = pluginErr.Plugin
			}
			metrics.CountBuildError(plugin)
			u.setCondition(trainer.TrainJobComponentsCreated, metav1.ConditionFalse, trainer.TrainJobJobsBuildFailedReason, ComponentsBuildFailedPrefix+err.Error())
			u.warn(ReasonResourcesCreationFailed, ActionReconciling, resourcesCreationFailedPrefix+eventNote(err.Error()))
			return false, err
		}
		return false, r.creationFailed(u, err)
	}
	// Once a reconcile has built, the objects may exist where the cache
	// does not show them yet.
	mayExist := meta.FindStatusCondition(tj.Status.Conditions, trainer.TrainJobComponentsCreated) != nil
	var errApply error
	for _, obj := range objs {
		if errApply = r.applyBuilt(ctx, tj, obj, mayExist); errApply != nil {
			break
		}
	}
	if err := errors.Join(saved(), errApply); err != nil {
		return false, r.creationFailed(u, err)
	}
	u.setCondition(trainer.TrainJobComponentsCreated, metav1.ConditionTrue, trainer.TrainJobJobsCreatedReason, ComponentsCreatedMessage)
	return len(objs) > 0, nil
}

// buildObjects resolves the TrainJob's runtime through its snapshot and runs
// the Build phase of the framework. When the snapshot is still to be taken,
// it is applied meanwhile, and saved waits for that and returns its error:
// the caller calls it once it has applied the objects (buildObjects does
// when it fails, and then returns the snapshot's error first).
func (r *TrainJobReconciler) buildObjects(ctx context.Context, tj *trainer.TrainJob) (objs []client.Object, saved func() error, err error) {
	rt, snapshot, err := r.snapshots.runtime(ctx, tj)
	if err != nil {
		return nil, nil, err
	}
	saved = func() error { return nil }
	if snapshot != nil {
		done := make(chan error, 1)
		go func() { done <- r.createSnapshot(ctx, tj, snapshot) }()
		saved = func() error {
			if err := <-done; err != nil {
				return fmt.Errorf("create runtime snapshot: %w", err)
			}
			return nil
		}
	}
	objs, _, err = r.framework.Build(ctx, tj, rt, pipeline.BuildOptions{})
	if err != nil {
		if saveErr := saved(); saveErr != nil {
			return nil, nil, saveErr
		}
		return nil, nil, err
	}
	return objs, saved, nil
}

// createSnapshot creates the runtime snapshot as field manager `trainer`. A
// create costs the API server less than the server-side apply of a new
// object, and the snapshot is never rewritten while it exists; when it
// exists already (a reconcile took it and then failed to write the status,
// and the cache has not seen it yet), it is applied over, as the runtime it
// holds must be the one this reconcile builds from.
func (r *TrainJobReconciler) createSnapshot(ctx context.Context, tj *trainer.TrainJob, snapshot *corev1.ConfigMap) error {
	err := r.client.Create(ctx, snapshot.DeepCopy(), client.FieldOwner(FieldManager))
	if apierrors.IsAlreadyExists(err) {
		return r.apply(ctx, tj, snapshot)
	}
	if err != nil {
		return &applyError{kind: "ConfigMap", name: snapshot.Name, err: err}
	}
	return nil
}

func (r *TrainJobReconciler) creationFailed(u *statusUpdate, err error) error {
	u.setCondition(trainer.TrainJobComponentsCreated, metav1.ConditionFalse, trainer.TrainJobJobsCreationFailedReason, ComponentsCreationFailedPrefix+err.Error())
	u.warn(ReasonResourcesCreationFailed, ActionReconciling, resourcesCreationFailedPrefix+eventNote(err.Error()))
	return err
}

// applyError is a failure to apply an object the Build phase built.
type applyError struct {
	kind, name string
	err        error
}

func (e *applyError) Error() string { return fmt.Sprintf("apply %s %s: %v", e.kind, e.name, e.err) }
func (e *applyError) Unwrap() error { return e.err }

// apply server-side applies an object for tj, as field manager `trainer`,
// taking ownership of every field it sets.
func (r *TrainJobReconciler) apply(ctx context.Context, tj *trainer.TrainJob, obj client.Object) error {
	u, err := applyObject(r.scheme, obj, tj.Name)
	if err != nil {
		return &applyError{kind: fmt.Sprintf("%T", obj), name: obj.GetName(), err: err}
	}
	return r.applyUnstructured(ctx, u)
}

// applyBuilt writes an object the Build phase returned, with the hash of
// what is written in AppliedHashAnnotation, unless the object already
// carries that hash. A new object is created (a create costs the API server
// less than the server-side apply of a new object; see creator); one that
// exists is applied over, after takeOverCreate.
func (r *TrainJobReconciler) applyBuilt(ctx context.Context, tj *trainer.TrainJob, obj client.Object, mayExist bool) error {
	built, gvk, hash, err := builtObject(r.scheme, obj, tj.Name)
	if err != nil {
		return &applyError{kind: fmt.Sprintf("%T", obj), name: obj.GetName(), err: err}
	}
	state, live, err := r.asBuilt(ctx, built, gvk, hash, mayExist)
	switch {
	case err != nil:
		return &applyError{kind: gvk.Kind, name: built.GetName(), err: err}
	case state == builtSame:
		return nil
	case state == builtAbsent:
		err := r.creates.create(ctx, built, gvk)
		if err == nil {
			remember(ctx, gvk, built)
			return nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return &applyError{kind: gvk.Kind, name: built.GetName(), err: err}
		}
		live = nil
	}
	u, err := unstructuredToApply(built, gvk)
	if err != nil {
		return &applyError{kind: gvk.Kind, name: built.GetName(), err: err}
	}
	if err := r.takeOverCreate(ctx, u, live); err != nil {
		return &applyError{kind: gvk.Kind, name: built.GetName(), err: err}
	}
	return r.applyUnstructured(ctx, u)
}

// takeOverCreate readies the object u names, as live (read from the API
// server when nil), for the apply of u: the fields the operator set when it
// created it are owned by that create (field manager `trainer`, operation
// Update), and an apply leaving one of them out would not remove it. When u
// leaves one out, the create's fields are moved to the operator's apply
// first (csaupgrade). Resuming a TrainJob, say, changes only what the
// create set, and writes nothing more than the apply.
func (r *TrainJobReconciler) takeOverCreate(ctx context.Context, u *unstructured.Unstructured, live client.Object) error {
	if live == nil {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(u.GroupVersionKind())
		err := r.live.Get(ctx, client.ObjectKeyFromObject(u), got)
		if apierrors.IsNotFound(err) {
			return nil // the apply creates it
		}
		if err != nil {
			return err
		}
		live = got
	}
	var created *metav1.ManagedFieldsEntry
	for _, e := range live.GetManagedFields() {
		if e.Manager == FieldManager && e.Operation == metav1.ManagedFieldsOperationUpdate && e.Subresource == "" {
			created = &e
		}
	}
	if created == nil {
		return nil
	}
	if omits, err := omitsAny(u, created.FieldsV1); err != nil || !omits {
		return err
	}
	patch, err := csaupgrade.UpgradeManagedFieldsPatch(live, sets.New(FieldManager), FieldManager)
	if err != nil || patch == nil {
		return err
	}
	return r.client.Patch(ctx, live, client.RawPatch(types.JSONPatchType, patch))
}

func (r *TrainJobReconciler) applyUnstructured(ctx context.Context, u *unstructured.Unstructured) error {
	gvk := u.GroupVersionKind()
	err := r.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldManager), client.ForceOwnership)
	if err != nil {
		return &applyError{kind: gvk.Kind, name: u.GetName(), err: err}
	}
	// The API server answered with the object as stored.
	u.SetGroupVersionKind(gvk)
	r.rememberApplied(ctx, u)
	return nil
}

// applyObject is the unstructured form of a built object that server-side
// apply sends: prepared, without status and creationTimestamp (which only
// the server sets).
func applyObject(scheme *runtime.Scheme, obj client.Object, trainJobName string) (*unstructured.Unstructured, error) {
	built, gvk, err := prepared(scheme, obj, trainJobName)
	if err != nil {
		return nil, err
	}
	return unstructuredToApply(built, gvk)
}

// prepared is a copy of a built object as the operator writes it: with its
// apiVersion and kind, without creationTimestamp, and for ConfigMaps and
// Secrets with the label the operator's cache selects them by.
func prepared(scheme *runtime.Scheme, obj client.Object, trainJobName string) (client.Object, schema.GroupVersionKind, error) {
	gvk, err := apiutil.GVKForObject(obj, scheme)
	if err != nil {
		return nil, gvk, err
	}
	built := obj.DeepCopyObject().(client.Object)
	built.GetObjectKind().SetGroupVersionKind(gvk)
	built.SetCreationTimestamp(metav1.Time{})
	if gvk.Group == "" && (gvk.Kind == "ConfigMap" || gvk.Kind == "Secret") {
		labels := built.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[TrainJobNameLabel] = trainJobName
		built.SetLabels(labels)
	}
	return built, gvk, nil
}

// unstructuredToApply converts a prepared object for server-side apply.
func unstructuredToApply(built client.Object, gvk schema.GroupVersionKind) (*unstructured.Unstructured, error) {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(built)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: content}
	u.SetGroupVersionKind(gvk)
	delete(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return u, nil
}

// setSuspended sets the Suspended condition: True while spec.suspend is,
// False (Resumed) once it no longer is, absent if never suspended.
func setSuspended(u *statusUpdate) {
	switch {
	case ptr.Deref(u.tj.Spec.Suspend, false):
		u.setCondition(trainer.TrainJobSuspended, metav1.ConditionTrue, trainer.TrainJobSuspendedReason, trainer.TrainJobSuspendedMessage)
	case meta.IsStatusConditionTrue(u.tj.Status.Conditions, trainer.TrainJobSuspended):
		u.setCondition(trainer.TrainJobSuspended, metav1.ConditionFalse, trainer.TrainJobResumedReason, trainer.TrainJobResumedMessage)
	}
}

// postExecution runs the PostExecution phase: the status plugin derives the
// status from the children. A Failed/DeadlineExceeded condition already set
// is kept whatever the plugin says. tolerateMissing ignores a JobSet the
// cache does not have yet (just applied, or never built).
func (r *TrainJobReconciler) postExecution(ctx context.Context, u *statusUpdate, tolerateMissing bool) error {
	var deadline *metav1.Condition
	if c := meta.FindStatusCondition(u.tj.Status.Conditions, trainer.TrainJobFailed); c != nil && c.Reason == trainer.TrainJobDeadlineExceededReason {
		deadline = c.DeepCopy()
	}
	status, err := r.framework.Status(ctx, u.tj)
	if err != nil {
		if tolerateMissing && apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	u.tj.Status = *status
	if deadline != nil {
		meta.SetStatusCondition(&u.tj.Status.Conditions, *deadline)
	}
	return nil
}

// enforceDeadline fails a running TrainJob past its activeDeadlineSeconds
// and deletes its JobSet; before that, it returns when to look again. The
// clock starts at creation and restarts at every resume.
func (r *TrainJobReconciler) enforceDeadline(ctx context.Context, u *statusUpdate) time.Duration {
	tj := u.tj
	if tj.Spec.ActiveDeadlineSeconds == 0 || finished(tj) || ptr.Deref(tj.Spec.Suspend, false) {
		return 0
	}
	start := tj.CreationTimestamp.Time
	if c := meta.FindStatusCondition(tj.Status.Conditions, trainer.TrainJobSuspended); c != nil && c.Status == metav1.ConditionFalse {
		start = c.LastTransitionTime.Time
	}
	deadline := start.Add(time.Duration(tj.Spec.ActiveDeadlineSeconds) * time.Second)
	if remaining := deadline.Sub(u.now.Time); remaining > 0 {
		return max(remaining, time.Second)
	}
	u.setCondition(trainer.TrainJobFailed, metav1.ConditionTrue, trainer.TrainJobDeadlineExceededReason, trainer.TrainJobDeadlineExceededMessage)
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: tj.Name, Namespace: tj.Namespace}}
	if err := r.client.Delete(ctx, js); client.IgnoreNotFound(err) != nil {
		log.FromContext(ctx).Error(err, "Deleting the JobSet of a TrainJob past its deadline")
	}
	return 0
}

// writeStatus updates the status subresource when the reconcile changed it,
// then records the events: one per condition transition once the status is
// written, and the warnings in any case. An update of the status costs the
// API server a quarter less than a merge patch of it (no patch to apply to
// the stored object), and the API server takes only the status from it.
// The update fails if the TrainJob changed since it was read (its
// resourceVersion is the precondition): the status was computed from a stale copy
// (the cache had not seen the last write yet), and writing it would record
// the same transitions twice. It then returns errStaleTrainJob: the change
// that made the copy stale is on its way to the cache, and brings the
// TrainJob back to the work queue.
func (r *TrainJobReconciler) writeStatus(ctx context.Context, u *statusUpdate) error {
	var events []trainJobEvent
	if u.changed() {
		transitions := u.transitions()
		err := r.client.Status().Update(ctx, u.tj)
		switch {
		case apierrors.IsConflict(err):
			return errStaleTrainJob
		case err != nil:
			r.record(u.orig, u.events)
			return fmt.Errorf("update TrainJob status: %w", err)
		}
		r.statusWrites.wrote(u.tj, u.orig.ResourceVersion)
		events = transitions
	}
	r.record(u.orig, append(events, u.events...))
	return nil
}

// errStaleTrainJob reports a reconcile of a TrainJob older than the one the
// API server holds; the newer one is reconciled when the cache gets it.
var errStaleTrainJob = errors.New("the TrainJob changed during the reconcile")

func (r *TrainJobReconciler) record(tj *trainer.TrainJob, events []trainJobEvent) {
	for _, e := range events {
		r.recorder.Eventf(tj, nil, e.Type, e.Reason, e.Action, "%s", eventNote(e.Note))
	}
}

// stageClock remembers the stage of every TrainJob and since when, to time
// stage transitions.
type stageClock struct {
	mu   sync.Mutex
	seen map[types.NamespacedName]stageSince
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
			metrics.ObserveStageTransition(prev.stage, s, now.Sub(prev.since))
		}
		c.seen[key] = stageSince{uid: tj.UID, stage: s, since: now}
	}
}

func (c *stageClock) forget(key types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.seen, key)
}
