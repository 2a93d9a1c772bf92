package status

import (
	"cmp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/kueue"
)

// maxWarnings is how many recent warnings a summary keeps.
const maxWarnings = 10

// eventConditionSlack is how far apart an Event and a condition transition with the same reason may be and
// still be one transition (a controller records the Event in the reconcile that writes the condition).
const eventConditionSlack = 5 * time.Second

// workloadConditions are the conditions of a Kueue Workload that the timeline shows: its way through the
// queue. (PodsReady and Finished repeat what the TrainJob's own conditions say.)
var workloadConditions = []string{kueue.ConditionQuotaReserved, kueue.ConditionAdmitted, kueue.ConditionEvicted,
	kueue.ConditionPreempted, kueue.ConditionRequeued}

// timeline merges creation, the conditions' transitions and the TrainJob's Events, and those of its Kueue
// Workload wl when it has one. An Event with the reason of a condition transition of the same object recorded
// within eventConditionSlack of it is the same transition and is dropped.
func timeline(tj *trainer.TrainJob, wl *kueue.Workload, events []corev1.Event) []TimelineEntry {
	created := tj.CreationTimestamp
	entry := func(t metav1.Time) TimelineEntry {
		return TimelineEntry{Time: t, Since: t.Sub(created.Time).String()}
	}
	out := []TimelineEntry{}
	e := entry(created)
	e.Source = SourceCreated
	out = append(out, e)
	addConditions := func(source string, conds []metav1.Condition) {
		for _, c := range conds {
			e := entry(c.LastTransitionTime)
			e.Source, e.Type, e.Status, e.Reason, e.Message = source, c.Type, string(c.Status), c.Reason, c.Message
			out = append(out, e)
		}
	}
	addEvents := func(source string, conds []metav1.Condition, ours func(*corev1.Event) bool) {
		for _, ev := range events {
			if !ours(&ev) {
				continue
			}
			t := eventTime(&ev)
			if slices.ContainsFunc(conds, func(c metav1.Condition) bool {
				d := c.LastTransitionTime.Sub(t.Time)
				return c.Reason == ev.Reason && d <= eventConditionSlack && d >= -eventConditionSlack
			}) {
				continue
			}
			e := entry(t)
			e.Source, e.Type, e.Reason, e.Message = source, ev.Type, ev.Reason, ev.Message
			if ev.Count > 1 {
				e.Count = ev.Count
			}
			out = append(out, e)
		}
	}
	addConditions(SourceCondition, tj.Status.Conditions)
	addEvents(SourceEvent, tj.Status.Conditions, func(ev *corev1.Event) bool { return isTrainJobEvent(tj, ev) })
	if wl != nil {
		conds := slices.DeleteFunc(slices.Clone(wl.Status.Conditions), func(c metav1.Condition) bool {
			return !slices.Contains(workloadConditions, c.Type)
		})
		addConditions(SourceWorkloadCondition, conds)
		addEvents(SourceWorkloadEvent, conds, func(ev *corev1.Event) bool { return isWorkloadEvent(wl, ev) })
	}
	slices.SortStableFunc(out, func(a, b TimelineEntry) int { return a.Time.Compare(b.Time.Time) })
	return out
}

func isTrainJobEvent(tj *trainer.TrainJob, ev *corev1.Event) bool {
	o := ev.InvolvedObject
	if o.UID != "" {
		return o.UID == tj.UID
	}
	return o.Kind == trainer.TrainJobKind && o.Name == tj.Name
}

// eventTime is when an Event first happened: firstTimestamp (core/v1 recorders) or eventTime (events/v1).
func eventTime(ev *corev1.Event) metav1.Time {
	switch {
	case !ev.FirstTimestamp.IsZero():
		return ev.FirstTimestamp
	case !ev.EventTime.IsZero():
		return metav1.Time{Time: ev.EventTime.Time}
	}
	return ev.CreationTimestamp
}

// eventLastSeen is when an Event last happened.
func eventLastSeen(ev *corev1.Event) metav1.Time {
	switch {
	case ev.Series != nil && !ev.Series.LastObservedTime.IsZero():
		return metav1.Time{Time: ev.Series.LastObservedTime.Time}
	case !ev.LastTimestamp.IsZero():
		return ev.LastTimestamp
	}
	return eventTime(ev)
}

// warnings are the Warning Events of the TrainJob, its JobSet, its Jobs and pods, newest first. Pods of
// earlier attempts are gone, so an Event's pod belongs to the TrainJob when its name extends a Job's name.
func warnings(in Objects) []Warning {
	tj := in.TrainJob
	jobNames := map[string]bool{}
	for _, j := range in.Jobs {
		jobNames[j.Name] = true
	}
	podNames := map[string]bool{}
	for _, p := range in.Pods {
		podNames[p.Name] = true
	}
	ours := func(ev *corev1.Event) bool {
		o := ev.InvolvedObject
		switch o.Kind {
		case trainer.TrainJobKind:
			return isTrainJobEvent(tj, ev)
		case "JobSet":
			return o.Name == tj.Name
		case "Job":
			return jobNames[o.Name]
		case "Pod":
			if podNames[o.Name] {
				return true
			}
			for j := range jobNames {
				if strings.HasPrefix(o.Name, j+"-") {
					return true
				}
			}
		}
		return false
	}
	var out []Warning
	for _, ev := range in.Events {
		if ev.Type != corev1.EventTypeWarning || !ours(&ev) {
			continue
		}
		w := Warning{LastSeen: eventLastSeen(&ev), Object: ev.InvolvedObject.Kind + "/" + ev.InvolvedObject.Name,
			Reason: ev.Reason, Message: ev.Message}
		if ev.Count > 1 {
			w.Count = ev.Count
		}
		out = append(out, w)
	}
	slices.SortStableFunc(out, func(a, b Warning) int {
		return cmp.Or(b.LastSeen.Compare(a.LastSeen.Time), strings.Compare(a.Object, b.Object))
	})
	if len(out) > maxWarnings {
		out = out[:maxWarnings]
	}
	return out
}
