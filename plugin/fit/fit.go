package fit

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/printers"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/status"
)

// Kind identifies the document `fit -o json|yaml` prints (of apiVersion status.SummaryAPIVersion).
const Kind = "TrainJobFit"

// Verdict is whether a TrainJob fits.
type Verdict string

const (
	// Fits: every pod fits now, beside what the pods already on the nodes request.
	Fits Verdict = "Fits"
	// NotNow: not every pod fits now, but all would on the nodes emptied of other pods: the TrainJob waits
	// for room.
	NotNow Verdict = "NotNow"
	// Nowhere: not every pod fits even on the nodes emptied of other pods: it waits until the cluster grows
	// or changes.
	Nowhere Verdict = "Nowhere"
)

// Fit is what fit says of a TrainJob: what the screen shows and -o json|yaml prints.
type Fit struct {
	APIVersion string  `json:"apiVersion"`
	Kind       string  `json:"kind"`
	Name       string  `json:"name"`
	Namespace  string  `json:"namespace"`
	Verdict    Verdict `json:"verdict"`
	// Message says the verdict in a sentence.
	Message string `json:"message"`
	// Pods is how many pods the TrainJob runs, FitNow how many fit now, FitEmpty how many would on the
	// nodes emptied of other pods.
	Pods     int `json:"pods"`
	FitNow   int `json:"fitNow"`
	FitEmpty int `json:"fitEmpty"`
	// Nodes is how many nodes the cluster has.
	Nodes          int      `json:"nodes"`
	ReplicatedJobs []JobFit `json:"replicatedJobs"`
	// Topology is whether the pods that ask Kueue for one domain of a level (one rack) fit in one; a required
	// level no domain takes now makes the verdict NotNow (or Nowhere) even when the pods fit the cluster.
	Topology *TopologyFit `json:"topology,omitempty"`
	Notes    []string     `json:"notes,omitempty"`
}

// JobFit is one replicated job of the TrainJob's JobSet.
type JobFit struct {
	Name           string              `json:"name"`
	Pods           int                 `json:"pods"`
	RequestsPerPod corev1.ResourceList `json:"requestsPerPod,omitempty"`
	FitNow         int                 `json:"fitNow"`
	FitEmpty       int                 `json:"fitEmpty"`
	// Placements are the nodes its pods fit on now.
	Placements []Placement `json:"placements,omitempty"`
	// Blocked says why the rest do not fit: even on emptied nodes when FitEmpty < Pods, else now.
	Blocked []Blocker `json:"blocked,omitempty"`
	// Message says it all in a sentence.
	Message string `json:"message"`
}

// Compute places the pod sets on the cluster's nodes now and emptied of other pods, and says what fits where
// and why the rest does not.
func Compute(namespace, name string, sets []PodSet, cl *Cluster) *Fit {
	f := &Fit{APIVersion: status.SummaryAPIVersion, Kind: Kind, Name: name, Namespace: namespace, Nodes: len(cl.Nodes), Notes: cl.Notes}
	for _, ps := range sets {
		f.Pods += ps.Count
	}
	now, empty := place(sets, cl.Nodes, cl.Used, cl.Allocated, cl.Sick), place(sets, cl.Nodes, nil, nil, cl.Sick)
	f.FitNow, f.FitEmpty = now.total, empty.total
	switch {
	case f.FitNow == f.Pods:
		f.Verdict = Fits
	case f.FitEmpty == f.Pods:
		f.Verdict = NotNow
	default:
		f.Verdict = Nowhere
	}
	for k := range sets {
		ps := &sets[k]
		j := JobFit{Name: ps.Name, Pods: ps.Count, RequestsPerPod: shown(ps.Requests), FitNow: len(now.placed[k]), FitEmpty: len(empty.placed[k]), Placements: now.placed[k]}
		switch {
		case j.FitEmpty < j.Pods:
			j.Blocked = empty.blocked[k]
		case j.FitNow < j.Pods:
			j.Blocked = now.blocked[k]
		}
		j.Message = jobMessage(ps, &j)
		f.ReplicatedJobs = append(f.ReplicatedJobs, j)
	}
	if t := computeTopology(sets, cl); t != nil {
		f.Topology = t
		if t.Required && f.Verdict == Fits && len(t.FitsNow()) == 0 {
			f.Verdict = Nowhere
			if len(t.FitsEmpty()) > 0 {
				f.Verdict = NotNow
			}
		}
	}
	f.Message = f.headline()
	if note := tolerationNote(sets, cl.Nodes); note != "" {
		f.Notes = append(f.Notes, note)
	}
	return f
}

// shown are the requests without the pod itself.
func shown(l corev1.ResourceList) corev1.ResourceList {
	out := l.DeepCopy()
	delete(out, corev1.ResourcePods)
	if len(out) == 0 {
		return nil
	}
	return out
}

func (f *Fit) headline() string {
	tj := fmt.Sprintf("TrainJob %s/%s", f.Namespace, f.Name)
	switch {
	case f.Pods == 0:
		return tj + " runs no pods"
	case f.FitNow == f.Pods && f.Verdict == NotNow:
		return fmt.Sprintf("%s does not fit now: %s", tj, f.Topology.Message)
	case f.FitNow == f.Pods && f.Verdict == Nowhere:
		return fmt.Sprintf("%s fits nowhere: %s", tj, f.Topology.Message)
	case f.Verdict == Fits:
		return fmt.Sprintf("%s fits now: %s", tj, countOf(f.Pods, f.Pods, "fits", "fit"))
	case f.Verdict == NotNow:
		return fmt.Sprintf("%s does not fit now: %s; all would on the nodes emptied of other pods", tj, countOf(f.FitNow, f.Pods, "fits", "fit"))
	case f.Nodes == 0:
		return tj + " fits nowhere: the cluster has no nodes"
	}
	return fmt.Sprintf("%s fits nowhere: even on the nodes emptied of other pods, %s", tj, countOf(f.FitEmpty, f.Pods, "fits", "fit"))
}

// countOf says how many of n pods fit: "all 4 pods fit", "none of its 2 pods fits", "2 of its 4 pods fit".
func countOf(k, n int, one, many string) string {
	switch {
	case n == 1 && k == 1:
		return "its pod " + one
	case n == 1:
		return "its pod does not " + many
	case k == n:
		return fmt.Sprintf("all %d pods %s", n, many)
	case k == 0:
		return fmt.Sprintf("none of its %d pods %s", n, one)
	case k == 1:
		return fmt.Sprintf("1 of its %d pods %s", n, one)
	}
	return fmt.Sprintf("%d of its %d pods %s", k, n, many)
}

// jobMessage says in a sentence what fits of one replicated job and what keeps the rest out.
func jobMessage(ps *PodSet, j *JobFit) string {
	if j.Pods == 0 {
		return ps.Who + " runs no pods"
	}
	on := ""
	if len(j.Placements) > 0 {
		on = ", on " + NodeList(placedNodes(j.Placements))
	}
	if j.FitNow == j.Pods {
		return fmt.Sprintf("%s: %s now%s", ps.Who, countOf(j.Pods, j.Pods, "fits", "fit"), on)
	}
	msg := ps.Who + " needs " + podsOf(ps.Requests, j.Pods)
	switch {
	case j.FitEmpty < j.Pods:
		msg += fmt.Sprintf(", and %s even on nodes emptied of other pods (%d now)", fitCount(j.FitEmpty), j.FitNow)
	default:
		msg += fmt.Sprintf("; %s now%s", fitCount(j.FitNow), on)
	}
	var why []string
	for _, b := range j.Blocked {
		why = append(why, b.Message)
	}
	return msg + ": " + strings.Join(why, "; ")
}

// podsOf is "4 pods of 8 nvidia.com/gpu, 16 cpu each", "1 pod of 4 cpu", "2 pods".
func podsOf(requests corev1.ResourceList, n int) string {
	s := fmt.Sprintf("%d %s", n, plural(n, "pod", "pods"))
	if req := RequestsString(requests); req != "nothing" {
		s += " of " + req + plural(n, "", " each")
	}
	return s
}

// fitCount is "none fits", "1 fits", "3 fit".
func fitCount(n int) string {
	switch n {
	case 0:
		return "none fits"
	case 1:
		return "1 fits"
	}
	return fmt.Sprintf("%d fit", n)
}

// placedNodes are the nodes of placements, each once, in the order they first take a pod; a node that takes
// several reads "node (3)".
func placedNodes(placements []Placement) []string {
	var nodes []string
	count := map[string]int{}
	for _, p := range placements {
		if count[p.Node] == 0 {
			nodes = append(nodes, p.Node)
		}
		count[p.Node]++
	}
	for i, n := range nodes {
		if count[n] > 1 {
			nodes[i] = fmt.Sprintf("%s (%d)", n, count[n])
		}
	}
	return nodes
}

// tolerationNote says that pods were counted as tolerating taints named after an extended resource they
// request, when a node has such a taint: that holds only where the API server runs ExtendedResourceToleration.
func tolerationNote(sets []PodSet, nodes []corev1.Node) string {
	var keys, taints []string
	for _, ps := range sets {
		for _, key := range ps.Tolerated {
			for _, n := range nodes {
				for _, t := range n.Spec.Taints {
					if t.Key == key && t.Effect == corev1.TaintEffectNoSchedule && !slices.Contains(taints, printers.Taint(t)) {
						taints = append(taints, printers.Taint(t))
						if !slices.Contains(keys, key) {
							keys = append(keys, key)
						}
					}
				}
			}
		}
	}
	if len(taints) == 0 {
		return ""
	}
	return fmt.Sprintf("pods that request %s are counted as tolerating the %s %s, as the API server's admission plugin ExtendedResourceToleration makes them (GKE and AKS run it); without it they stay off those nodes",
		strings.Join(keys, ", "), plural(len(taints), "taint", "taints"), strings.Join(taints, ", "))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
