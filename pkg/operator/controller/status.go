package controller

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
)

// statusUpdate collects what one reconcile changes in a TrainJob's status,
// and the events that go with it. No step writes the status itself: the
// reconciler writes it once at the end, then records the events.
type statusUpdate struct {
	// orig is the TrainJob as read; the status patch is computed against it.
	orig *trainer.TrainJob
	// tj is the working copy: steps change tj.Status.
	tj  *trainer.TrainJob
	now metav1.Time
	// events are recorded whatever happens to the status write.
	events []trainJobEvent
}

// trainJobEvent is an event to record on the TrainJob.
type trainJobEvent struct {
	Type, Reason, Action, Note string
}

func newStatusUpdate(tj *trainer.TrainJob, now metav1.Time) *statusUpdate {
	return &statusUpdate{orig: tj, tj: tj.DeepCopy(), now: now}
}

// setCondition sets a condition; its transition time changes only when its
// status does.
func (u *statusUpdate) setCondition(typ string, status metav1.ConditionStatus, reason, message string) {
	setCondition(&u.tj.Status.Conditions, u.tj.Generation, u.now, typ, status, reason, message)
}

// setCondition sets a condition of an object of generation in conditions,
// as of now; its transition time changes only when its status does.
func setCondition(conditions *[]metav1.Condition, generation int64, now metav1.Time, typ string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(conditions, metav1.Condition{
		Type:               typ,
		Status:             status,
		ObservedGeneration: generation,
		LastTransitionTime: now,
		Reason:             reason,
		Message:            truncate(message, maxConditionMessage, ""),
	})
}

// warn adds a Warning event.
func (u *statusUpdate) warn(reason, action, note string) {
	u.events = append(u.events, trainJobEvent{Type: corev1.EventTypeWarning, Reason: reason, Action: action, Note: note})
}

// changed tells whether the status differs from the one read.
func (u *statusUpdate) changed() bool {
	return !equality.Semantic.DeepEqual(u.orig.Status, u.tj.Status)
}

// transitions are the events of the conditions whose status or reason
// changed: one per condition, with its reason and message, and the
// condition type as the action.
func (u *statusUpdate) transitions() []trainJobEvent {
	return transitions(u.orig.Status.Conditions, u.tj.Status.Conditions, conditionEventType)
}

// transitions are the events of the conditions of after whose status or
// reason differ in before, of the type eventType says.
func transitions(before, after []metav1.Condition, eventType func(metav1.Condition) string) []trainJobEvent {
	var out []trainJobEvent
	for _, c := range after {
		old := meta.FindStatusCondition(before, c.Type)
		if old != nil && old.Status == c.Status && old.Reason == c.Reason {
			continue
		}
		out = append(out, trainJobEvent{Type: eventType(c), Reason: c.Reason, Action: c.Type, Note: c.Message})
	}
	return out
}

// conditionEventType is Warning for a TrainJob's condition that reports a
// failure.
var conditionEventType = failureEventType(trainer.TrainJobFailed, trainer.TrainJobComponentsCreated)

// failureEventType is the event type of a condition of a kind whose
// conditions failed (True) and created (False) report a failure: Warning
// for those, Normal for the others.
func failureEventType(failed, created string) func(metav1.Condition) string {
	return func(c metav1.Condition) string {
		if c.Type == failed && c.Status == metav1.ConditionTrue || c.Type == created && c.Status == metav1.ConditionFalse {
			return corev1.EventTypeWarning
		}
		return corev1.EventTypeNormal
	}
}

// truncate cuts s to at most n bytes, marking a cut with suffix.
func truncate(s string, n int, suffix string) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n-len(suffix)], "") + suffix
}

// eventNote fits a message into an event note (at most 1024 bytes) as
// upstream does: cut at 950 bytes and marked with " ...".
func eventNote(s string) string {
	if len(s) <= eventNoteCut {
		return s
	}
	return strings.ToValidUTF8(s[:eventNoteCut], "") + " ..."
}

// finished tells whether a TrainJob is Complete or Failed.
func finished(tj *trainer.TrainJob) bool {
	return meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobComplete) ||
		meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobFailed)
}
