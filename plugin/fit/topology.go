package fit

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/kueue"
)

// TopologyFit is whether the pod sets that ask Kueue's topology-aware scheduling for one domain of a level
// (the annotation kueue.x-k8s.io/podset-required-topology or -preferred-topology on their pod template, as
// create --topology sets it) fit within one domain of it: the nodes grouped by the level's label.
type TopologyFit struct {
	// Level is the level's node label; Required is false when one domain is only preferred.
	Level    string `json:"level"`
	Required bool   `json:"required"`
	// Pods is how many pods ask for one domain.
	Pods    int         `json:"pods"`
	Domains []DomainFit `json:"domains"`
	// Message says it in a sentence.
	Message string `json:"message"`
}

// DomainFit is how many of those pods fit in one domain, now and emptied of other pods.
type DomainFit struct {
	Value    string `json:"value"`
	Nodes    int    `json:"nodes"`
	FitNow   int    `json:"fitNow"`
	FitEmpty int    `json:"fitEmpty"`
}

// topologyOf is the pod sets' topology request: the level and whether it is required, of the first pod set
// that asks for one ("" when none does); the pod sets that ask for that level.
func topologyOf(sets []PodSet) (level string, required bool, asking []PodSet) {
	for _, ps := range sets {
		l, req := ps.Pod.Annotations[kueue.PodSetRequiredTopologyAnnotation], true
		if l == "" {
			l, req = ps.Pod.Annotations[kueue.PodSetPreferredTopologyAnnotation], false
		}
		switch {
		case l == "":
		case level == "":
			level, required, asking = l, req, append(asking, ps)
		case l == level:
			asking = append(asking, ps)
		}
	}
	return level, required, asking
}

// computeTopology places the pod sets that ask for one domain within each domain of their level, now and
// emptied of other pods; nil when none asks.
func computeTopology(sets []PodSet, cl *Cluster) *TopologyFit {
	level, required, asking := topologyOf(sets)
	if level == "" {
		return nil
	}
	t := &TopologyFit{Level: level, Required: required}
	for _, ps := range asking {
		t.Pods += ps.Count
	}
	byDomain := map[string][]corev1.Node{}
	for _, n := range cl.Nodes {
		if v, ok := n.Labels[level]; ok {
			byDomain[v] = append(byDomain[v], n)
		}
	}
	for v, nodes := range byDomain {
		t.Domains = append(t.Domains, DomainFit{Value: v, Nodes: len(nodes),
			FitNow: place(asking, nodes, cl.Used, cl.Allocated, cl.Sick).total, FitEmpty: place(asking, nodes, nil, nil, cl.Sick).total})
	}
	slices.SortFunc(t.Domains, func(a, b DomainFit) int { return strings.Compare(a.Value, b.Value) })
	t.Message = t.message()
	return t
}

// FitsNow, FitsEmpty are the domains that take every pod asking, now and emptied of other pods.
func (t *TopologyFit) FitsNow() []string {
	return t.domains(func(d DomainFit) bool { return d.FitNow == t.Pods })
}

func (t *TopologyFit) FitsEmpty() []string {
	return t.domains(func(d DomainFit) bool { return d.FitEmpty == t.Pods })
}

func (t *TopologyFit) domains(keep func(DomainFit) bool) []string {
	var out []string
	for _, d := range t.Domains {
		if keep(d) {
			out = append(out, d.Value)
		}
	}
	return out
}

// message: "all 2 pods fit in one rack now: rack-0, rack-2", "no rack takes all 2 pods now (at most 1: rack-0 1,
// rack-1 1); rack-0, rack-1 would, emptied of other pods".
func (t *TopologyFit) message() string {
	name := kueue.LevelName(t.Level)
	if len(t.Domains) == 0 {
		return fmt.Sprintf("no node has the label %s, so there is no %s to place the pods in", t.Level, name)
	}
	if now := t.FitsNow(); len(now) > 0 {
		return fmt.Sprintf("%s in one %s now: %s", countOf(t.Pods, t.Pods, "fits", "fit"), name, NodeList(now))
	}
	best := 0
	var each []string
	for _, d := range t.Domains {
		best = max(best, d.FitNow)
		each = append(each, fmt.Sprintf("%s %d", d.Value, d.FitNow))
	}
	msg := fmt.Sprintf("no %s takes %s now (at most %d: %s)", name, plural(t.Pods, "its pod", fmt.Sprintf("all %d pods", t.Pods)), best, strings.Join(each, ", "))
	if empty := t.FitsEmpty(); len(empty) > 0 {
		return msg + fmt.Sprintf("; %s would, emptied of other pods", NodeList(empty))
	}
	return msg + "; none would even emptied of other pods"
}
