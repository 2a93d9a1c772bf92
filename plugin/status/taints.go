package status

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/printers"
)

// TaintBlock says that the unschedulable pods of a TrainJob are kept off nodes that would take them only by
// taints they do not tolerate: on each of Nodes the pods' node selector and affinity match and their requests
// fit what the node can allocate, but the node carries Taints; and no node they tolerate could take them.
type TaintBlock struct {
	// Pods is how many pods the taints block.
	Pods int `json:"pods"`
	// Taints are the taints they do not tolerate, as key=value:effect.
	Taints []string `json:"taints"`
	// Nodes are the nodes that would take them but for the taints.
	Nodes []string `json:"nodes"`
	// ExtendedResources are the resources the pods request that share their name with a taint's key
	// (nvidia.com/gpu): a cluster whose API server runs the ExtendedResourceToleration admission plugin adds
	// the toleration of those taints to such pods by itself.
	ExtendedResources []string `json:"extendedResources,omitempty"`
	// WayOut says how to let the pods tolerate the taints.
	WayOut string `json:"wayOut"`
}

// conditionTaintPrefix marks the taints that Kubernetes puts on a node for its condition (not ready,
// unreachable, under pressure, cordoned): they go away with the condition, and a TrainJob should not
// tolerate them. A node that carries one is no place to suggest.
const conditionTaintPrefix = "node.kubernetes.io/"

// taintBlock finds whether taints alone keep the unschedulable pods of pods off the nodes, from each pod's
// scheduling failure and the nodes' taints, labels and allocatable resources. It does not count what other
// pods use on a node (that would take every pod of the cluster): a pod that fits a node it tolerates is
// waiting for room there, not blocked by a taint. It returns nil unless every unschedulable pod is blocked
// only by taints.
func taintBlock(tj *trainer.TrainJob, pods []corev1.Pod, nodes []corev1.Node) *TaintBlock {
	logger := klog.Background()
	taints, onNodes, extended := sets.New[string](), sets.New[string](), sets.New[string]()
	blocked := 0
	for i := range pods {
		p := &pods[i]
		if _, ok := unschedulable(p); !ok {
			continue
		}
		requests := resource.PodRequests(p, resource.PodResourcesOptions{})
		affinity := nodeaffinity.GetRequiredNodeAffinity(p)
		var blockers []corev1.Taint
		var blockedOn []string
		fitsTolerated := false
		for j := range nodes {
			n := &nodes[j]
			if match, err := affinity.Match(n); n.Spec.Unschedulable || err != nil || !match || !fits(requests, n.Status.Allocatable) {
				continue
			}
			var untolerated []corev1.Taint
			for _, t := range n.Spec.Taints {
				if t.Effect != corev1.TaintEffectNoSchedule && t.Effect != corev1.TaintEffectNoExecute {
					continue
				}
				if !corev1helpers.TolerationsTolerateTaint(logger, p.Spec.Tolerations, &t, false) {
					untolerated = append(untolerated, t)
				}
			}
			switch {
			case len(untolerated) == 0:
				fitsTolerated = true
			case !slices.ContainsFunc(untolerated, func(t corev1.Taint) bool { return strings.HasPrefix(t.Key, conditionTaintPrefix) }):
				blockers = append(blockers, untolerated...)
				blockedOn = append(blockedOn, n.Name)
			}
		}
		if fitsTolerated || len(blockedOn) == 0 {
			return nil
		}
		blocked++
		onNodes.Insert(blockedOn...)
		for _, t := range blockers {
			taints.Insert(printers.Taint(t))
			if q, ok := requests[corev1.ResourceName(t.Key)]; ok && !q.IsZero() {
				extended.Insert(t.Key)
			}
		}
	}
	if blocked == 0 {
		return nil
	}
	b := &TaintBlock{Pods: blocked, Taints: sets.List(taints), Nodes: sets.List(onNodes)}
	if extended.Len() > 0 {
		b.ExtendedResources = sets.List(extended)
	}
	b.WayOut = wayOut(tj, b)
	return b
}

// fits tells whether requests fit in what a node can allocate.
func fits(requests, allocatable corev1.ResourceList) bool {
	for name, q := range requests {
		if q.IsZero() {
			continue
		}
		if a, ok := allocatable[name]; !ok || a.Cmp(q) < 0 {
			return false
		}
	}
	return true
}

// Reason says in plain words what keeps the pods off the nodes.
func (b *TaintBlock) Reason() string {
	return fmt.Sprintf("%d %s unschedulable only because %s not tolerate the %s %s of %s that would otherwise take %s",
		b.Pods, plural(b.Pods, "pod", "pods"), plural(b.Pods, "it does", "they do"), plural(len(b.Taints), "taint", "taints"),
		strings.Join(b.Taints, ", "), countedNodes(b.Nodes), plural(b.Pods, "it", "them"))
}

// countedNodes is "node a", "nodes a, b" or, past three, "4 nodes (a, b, c, …)".
func countedNodes(nodes []string) string {
	switch {
	case len(nodes) == 1:
		return "node " + nodes[0]
	case len(nodes) <= 3:
		return "nodes " + strings.Join(nodes, ", ")
	}
	return fmt.Sprintf("%d nodes (%s, …)", len(nodes), strings.Join(nodes[:3], ", "))
}

// wayOut says how to let the pods tolerate the taints: a toleration in the runtime's pod template or in the
// TrainJob's runtimePatches; for taints named after an extended resource the pods request, the cluster's
// ExtendedResourceToleration admission plugin does it for every such pod.
func wayOut(tj *trainer.TrainJob, b *TaintBlock) string {
	keys := sets.New[string]()
	for _, t := range b.Taints {
		keys.Insert(strings.FieldsFunc(t, func(r rune) bool { return r == '=' || r == ':' })[0])
	}
	toleration := fmt.Sprintf("add a toleration of %s to the runtime %s (tolerations of its pod template) or to the TrainJob's spec.runtimePatches",
		strings.Join(sets.List(keys), ", "), RuntimeName(tj))
	if len(b.ExtendedResources) == 0 {
		return toleration + ", or ask for resources that fit a node the pods tolerate"
	}
	return fmt.Sprintf("the cluster's API server does not add the toleration to pods that request %s: enable its admission plugin ExtendedResourceToleration (GKE and AKS run it), or %s",
		strings.Join(b.ExtendedResources, ", "), toleration)
}
