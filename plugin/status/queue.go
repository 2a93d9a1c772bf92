package status

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

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
			q.Position = p.Position(q.ClusterQueue, q.LocalQueue)
		}
	}
	q.Evictions = evictions(wl, qo.Workloads, in.Events)
	q.Topology = topologyOf(wl, qo.Nodes)
	return q
}

// topologyOf is what the Workload's pod sets asked of Kueue's topology-aware scheduling (a required or
// preferred level; the implicit requests Kueue makes of every pod set are left out) and, once admitted, the
// domains of that level Kueue put them in: the domain of each assigned node, by its label, when nodes holds
// it, else the nodes alone.
func topologyOf(wl *kueue.Workload, nodes []corev1.Node) []PodSetTopology {
	domainOf := map[string]map[string]string{} // hostname → node labels
	for _, n := range nodes {
		domainOf[n.Labels[corev1.LabelHostname]] = n.Labels
	}
	var out []PodSetTopology
	for _, ps := range wl.Spec.PodSets {
		r := ps.TopologyRequest
		if r == nil || r.Required == nil && r.Preferred == nil {
			continue
		}
		t := PodSetTopology{PodSet: ps.Name, Level: ptr.Deref(r.Required, ptr.Deref(r.Preferred, "")), Required: r.Required != nil}
		var assigned *kueue.TopologyAssignment
		if a := wl.Status.Admission; a != nil && wl.Admitted() {
			for _, psa := range a.PodSetAssignments {
				if psa.Name == ps.Name {
					assigned = psa.TopologyAssignment
				}
			}
		}
		if assigned != nil {
			for _, d := range assigned.AssignedDomains() {
				if len(d.Values) == 0 {
					continue
				}
				node := d.Values[len(d.Values)-1]
				value := domainOf[node][t.Level]
				if i := slices.IndexFunc(t.Domains, func(td TopologyDomain) bool { return td.Value == value && value != "" }); i >= 0 {
					t.Domains[i].Nodes = append(t.Domains[i].Nodes, node)
					t.Domains[i].Pods += d.Pods
					continue
				}
				t.Domains = append(t.Domains, TopologyDomain{Value: value, Nodes: []string{node}, Pods: d.Pods})
			}
		}
		out = append(out, t)
	}
	return out
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
