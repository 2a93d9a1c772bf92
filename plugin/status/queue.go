package status

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/stage"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/kueue"
)

// workloadOf is the TrainJob's Kueue Workload, if read.
func workloadOf(in Objects) *kueue.Workload {
	if in.Queue == nil {
		return nil
	}
	return in.Queue.Workload
}

func isWorkloadEvent(wl *kueue.Workload, ev *corev1.Event) bool {
	o := ev.InvolvedObject
	if o.Kind != "Workload" {
		return false
	}
	if o.UID != "" {
		return o.UID == wl.UID
	}
	return o.Name == wl.Name
}

// summarizeQueue is what Kueue says of a TrainJob in a LocalQueue, in stage st.
func summarizeQueue(in Objects, st stage.Stage) *Queue {
	qo := in.Queue
	if qo == nil {
		return nil
	}
	q := &Queue{LocalQueue: in.TrainJob.Labels[kueue.QueueLabel]}
	switch {
	case !qo.Served && qo.Unreadable != "":
		q.Note = qo.Unreadable
		return q
	case !qo.Served:
		q.Note = "Kueue is not installed: the API server does not serve " + kueue.Group
		return q
	}
	if lq := qo.LocalQueue; lq != nil {
		q.ClusterQueue = lq.Spec.ClusterQueue
	}
	wl := qo.Workload
	switch {
	case qo.Unreadable != "":
		q.Note = "cannot read Kueue's Workloads: " + qo.Unreadable
		return q
	case wl == nil:
		q.Note = "Kueue has not made the TrainJob's Workload yet"
		return q
	}
	q.Workload, q.Priority, q.PriorityClass = wl.Name, wl.Spec.Priority, wl.PriorityClass()
	q.Active, q.Admitted, q.AdmittedAt, q.NotAdmitted = wl.Active(), wl.Admitted(), wl.AdmittedAt(), wl.NotAdmitted()
	if cq := wl.ClusterQueue(); cq != "" {
		q.ClusterQueue = cq
	}
	if st == stage.Queued {
		q.Position = PositionPending
		if p := qo.Pending; p != nil {
			q.PositionInClusterQueue, q.PositionInLocalQueue = &p.PositionInClusterQueue, &p.PositionInLocalQueue
			q.Position = fmt.Sprintf("%d ahead in ClusterQueue %s, %d in LocalQueue %s", p.PositionInClusterQueue, q.ClusterQueue,
				p.PositionInLocalQueue, q.LocalQueue)
		}
	}
	q.Evictions = evictions(wl, qo.Workloads, in.Events)
	return q
}

// evictions are the times Kueue evicted wl, oldest first: from its Events (EvictedDueTo<Reason>), which count
// every eviction while the API server keeps them, and from its Evicted condition while it is True (an
// eviction whose Event is gone, or not recorded yet). A preemption names its preemptor when it is among wls.
func evictions(wl *kueue.Workload, wls []kueue.Workload, events []corev1.Event) []Eviction {
	evicted := meta.FindStatusCondition(wl.Status.Conditions, kueue.ConditionEvicted)
	if evicted != nil && evicted.Status != metav1.ConditionTrue {
		evicted = nil
	}
	var out []Eviction
	for _, ev := range events {
		reason, ok := strings.CutPrefix(ev.Reason, kueue.EvictedEventPrefix)
		if !ok || !isWorkloadEvent(wl, &ev) {
			continue
		}
		e := Eviction{Time: eventTime(&ev), Reason: reason, Message: ev.Message}
		if ev.Count > 1 {
			e.Count = ev.Count
		}
		out = append(out, e)
		if evicted != nil && reason == evicted.Reason {
			if d := eventLastSeen(&ev).Sub(evicted.LastTransitionTime.Time); d <= eventConditionSlack && d >= -eventConditionSlack {
				evicted = nil // the Event of the eviction the condition tells
			}
		}
	}
	if evicted != nil {
		out = append(out, Eviction{Time: evicted.LastTransitionTime, Reason: evicted.Reason, Message: evicted.Message})
	}
	for i := range out {
		out[i].By = kueue.Preemptor(out[i].Message, wls)
	}
	slices.SortStableFunc(out, func(a, b Eviction) int { return a.Time.Compare(b.Time.Time) })
	return out
}
