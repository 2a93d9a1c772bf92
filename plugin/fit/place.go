package fit

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/gpuhealth"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/printers"
)

// Reason is why a node cannot take a pod: the first of the scheduler's filters that refuses it, in the order
// the scheduler runs them.
type Reason string

const (
	// ReasonCordoned: the node is marked unschedulable (kubectl cordon) and the pod does not tolerate it.
	ReasonCordoned Reason = "Cordoned"
	// ReasonNodeAffinity: the node does not match the pod's nodeSelector or required node affinity.
	ReasonNodeAffinity Reason = "NodeAffinity"
	// ReasonSickGPUs: the node's GPUs are sick (plugin/gpuhealth) and the pod asks for GPUs. The scheduler
	// may still put it there (a condition alone does not keep it off), but a rank there would die.
	ReasonSickGPUs Reason = "SickGPUs"
	// ReasonTaint: the node has a NoSchedule or NoExecute taint the pod does not tolerate.
	ReasonTaint Reason = "Taint"
	// ReasonResources: what the node can allocate, less what is requested there already, is less than the pod
	// requests.
	ReasonResources Reason = "Resources"
)

// PodSet is the pods of one replicated job of the JobSet: Count pods alike, in Jobs of PerJob pods.
type PodSet struct {
	// Name is the replicated job's name.
	Name string
	// Who names the pods in a sentence: "the trainer", "the dataset initializer", "the pods of launcher".
	Who    string
	Count  int
	PerJob int
	// Pod is one of them, as the API server admits it (ExtendedResourceToleration applied).
	Pod *corev1.Pod
	// Requests are what one pod requests, a pod counted as 1 of the node's "pods".
	Requests corev1.ResourceList
	// Tolerated are the keys of the tolerations ExtendedResourceToleration added.
	Tolerated []string
	// Claimed are the DeviceClasses whose DRA devices the pods claim (ReadClaims), each counted in Requests
	// under its name.
	Claimed []string
}

// NewPodSet is the pod set of count pods like pod, perJob to a Job, of a replicated job whose
// trainjob-ancestor-step label is ancestor. The pod gets what the API server's admission plugin
// ExtendedResourceToleration gives it.
func NewPodSet(name, ancestor string, count, perJob int, pod *corev1.Pod) PodSet {
	pod = pod.DeepCopy()
	ps := PodSet{Name: name, Who: who(name, ancestor), Count: count, PerJob: max(perJob, 1), Pod: pod}
	ps.Requests = pipeline.PodRequests(&pod.Spec)
	if ps.Requests == nil {
		ps.Requests = corev1.ResourceList{}
	}
	ps.Tolerated = extendedResourceToleration(pod, ps.Requests)
	ps.Requests[corev1.ResourcePods] = onePod
	return ps
}

// onePod is what a pod takes of a node's "pods".
var onePod = *resource.NewQuantity(1, resource.DecimalSI)

// who names the pods of a replicated job in a sentence.
func who(name, ancestor string) string {
	switch {
	case ancestor == trainer.AncestorTrainer:
		return "the trainer"
	case ancestor != "":
		return "the " + strings.ReplaceAll(ancestor, "-", " ")
	}
	return "the pods of " + name
}

// extendedResourceToleration does to pod what the API server's admission plugin of that name does (GKE, AKS
// and the local cluster run it): for each extended resource the pod requests (nvidia.com/gpu), a toleration
// of any NoSchedule taint of that name. It returns the names it tolerated.
func extendedResourceToleration(pod *corev1.Pod, requests corev1.ResourceList) []string {
	var names []string
	for name, q := range requests {
		if isExtendedResource(name) && !q.IsZero() {
			names = append(names, string(name))
		}
	}
	slices.Sort(names)
	for _, name := range names {
		t := corev1.Toleration{Key: name, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
		if !slices.Contains(pod.Spec.Tolerations, t) {
			pod.Spec.Tolerations = append(pod.Spec.Tolerations, t)
		}
	}
	return names
}

// isExtendedResource is Kubernetes' IsExtendedResourceName: a resource name with a domain that is not
// kubernetes.io's, and not a quota's "requests." name.
func isExtendedResource(name corev1.ResourceName) bool {
	s := string(name)
	if !strings.Contains(s, "/") || strings.Contains(s, corev1.ResourceDefaultNamespacePrefix) || strings.HasPrefix(s, corev1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(corev1.DefaultResourceRequestsPrefix+s)) == 0
}

// Placement is where one pod of the TrainJob goes: its replicated job, Job index and index in the Job
// (node-0-1), and the node.
type Placement struct {
	Pod  string `json:"pod"`
	Node string `json:"node"`
}

// Blocker is why some nodes cannot take a pod of a replicated job.
type Blocker struct {
	Reason Reason   `json:"reason"`
	Nodes  []string `json:"nodes"`
	// Message says it in a sentence that starts with the nodes: "cpu-node-0, cpu-node-1 have no nvidia.com/gpu".
	Message string `json:"message"`
}

// nodeState is one node during a placement: what the pods already there request, and what the TrainJob's
// pods placed so far take.
type nodeState struct {
	node   *corev1.Node
	others corev1.ResourceList
	own    corev1.ResourceList
	// sick says why the node's GPUs are sick, nil when they are not.
	sick *gpuhealth.Sickness
	// allocated say which of the node's DRA devices of each DeviceClass are allocated to which pod.
	allocated map[corev1.ResourceName][]string
}

// placement is the outcome of placing every pod set on the nodes, one pod after the other.
type placement struct {
	placed [][]Placement
	// blocked are, for each pod set that did not fit whole, why no node took its next pod.
	blocked [][]Blocker
	total   int
}

// place puts the pods of sets on nodes with a greedy first fit: pod sets in the JobSet's order, each pod on the
// first node (by name) that takes it, as if all ran at once. used is what the pods already on each node request
// (nil: nodes are empty), and allocated which DRA devices are allocated to whom (Cluster.Allocated); sick are
// the nodes whose GPUs are sick, which take no pod that asks for GPUs. A pod set whose next pod no node takes
// stops there; the sets after it are still placed. It is not the scheduler (which scores nodes and may find
// room a first fit misses), but it answers with the scheduler's filters: cordon, node selector and affinity,
// taints, resources (DRA devices among them, counted by DeviceClass).
func place(sets []PodSet, nodes []corev1.Node, used map[string]corev1.ResourceList, allocated map[string]map[corev1.ResourceName][]string, sick map[string]*gpuhealth.Sickness) placement {
	states := make([]*nodeState, len(nodes))
	for i := range nodes {
		n := nodes[i].Name
		states[i] = &nodeState{node: &nodes[i], others: used[n], own: corev1.ResourceList{}, sick: sick[n], allocated: allocated[n]}
	}
	slices.SortFunc(states, func(a, b *nodeState) int { return cmp.Compare(a.node.Name, b.node.Name) })
	p := placement{placed: make([][]Placement, len(sets)), blocked: make([][]Blocker, len(sets))}
	for k := range sets {
		ps := &sets[k]
		affinity := nodeaffinity.GetRequiredNodeAffinity(ps.Pod)
		for i := range ps.Count {
			name := fmt.Sprintf("%s-%d-%d", ps.Name, i/ps.PerJob, i%ps.PerJob)
			at := slices.IndexFunc(states, func(s *nodeState) bool { return ps.refuse(s, affinity) == nil })
			if at < 0 {
				p.blocked[k] = ps.blockers(states, affinity)
				break
			}
			add(states[at].own, ps.Requests)
			p.placed[k] = append(p.placed[k], Placement{Pod: name, Node: states[at].node.Name})
			p.total++
		}
	}
	return p
}

func add(to, l corev1.ResourceList) {
	for name, q := range l {
		sum := to[name]
		sum.Add(q)
		to[name] = sum
	}
}

// refusal is why a node cannot take one more pod of a pod set.
type refusal struct {
	reason Reason
	// one and many finish a sentence whose subject is one node, or several: "has no nvidia.com/gpu",
	// "have no nvidia.com/gpu".
	one, many string
}

// unschedulableTaint is the taint a cordoned node is treated as having: a pod that tolerates it may go there.
var unschedulableTaint = corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}

// refuse is why node s cannot take one more pod of ps, or nil when it can.
func (ps *PodSet) refuse(s *nodeState, affinity nodeaffinity.RequiredNodeAffinity) *refusal {
	logger := klog.Background()
	n := s.node
	if n.Spec.Unschedulable && !corev1helpers.TolerationsTolerateTaint(logger, ps.Pod.Spec.Tolerations, &unschedulableTaint, false) {
		return &refusal{ReasonCordoned, "is cordoned", "are cordoned"}
	}
	if match, err := affinity.Match(n); err != nil || !match {
		return ps.affinityRefusal(n)
	}
	if s.sick != nil && pipeline.GPUsPerNode(corev1.ResourceRequirements{Requests: ps.Requests}, nil) > 0 {
		what := "sick GPUs: " + strings.Join(s.sick.Signs, "; ")
		return &refusal{ReasonSickGPUs, "has " + what, "have " + what}
	}
	var taints []string
	for _, t := range n.Spec.Taints {
		if (t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute) &&
			!corev1helpers.TolerationsTolerateTaint(logger, ps.Pod.Spec.Tolerations, &t, false) {
			taints = append(taints, printers.Taint(t))
		}
	}
	if len(taints) > 0 {
		what := fmt.Sprintf("tainted %s, which %s does not tolerate", strings.Join(taints, ", "), ps.Who)
		return &refusal{ReasonTaint, "is " + what, "are " + what}
	}
	return ps.resourceRefusal(s)
}

// affinityRefusal says which label of the node selector the node lacks or has another value of; for a
// required node affinity, that it does not match.
func (ps *PodSet) affinityRefusal(n *corev1.Node) *refusal {
	keys := make([]string, 0, len(ps.Pod.Spec.NodeSelector))
	for k := range ps.Pod.Spec.NodeSelector {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		want := ps.Pod.Spec.NodeSelector[k]
		got, ok := n.Labels[k]
		switch {
		case !ok:
			what := fmt.Sprintf("the label %s=%s that %s selects", k, want, ps.Who)
			return &refusal{ReasonNodeAffinity, "lacks " + what, "lack " + what}
		case got != want:
			what := fmt.Sprintf("%s=%s, not %s", k, got, want)
			return &refusal{ReasonNodeAffinity, "has " + what, "have " + what}
		}
	}
	what := "the required node affinity of " + ps.Who
	return &refusal{ReasonNodeAffinity, "does not match " + what, "do not match " + what}
}

// resourceRefusal says which requested resources node s lacks, or nil when the pod fits.
func (ps *PodSet) resourceRefusal(s *nodeState) *refusal {
	var one, many []string
	for _, name := range resourceOrder(ps.Requests) {
		need := ps.Requests[name]
		if need.IsZero() {
			continue
		}
		alloc := s.node.Status.Allocatable[name]
		free := alloc.DeepCopy()
		others, own := s.others[name], s.own[name]
		free.Sub(others)
		free.Sub(own)
		if free.Cmp(need) >= 0 {
			continue
		}
		switch {
		case name == corev1.ResourcePods:
			one = append(one, fmt.Sprintf("room for no more pods (%s at most)", alloc.String()))
			many = append(many, one[len(one)-1])
		case alloc.IsZero():
			one, many = append(one, "no "+string(name)), append(many, "no "+string(name))
		case alloc.Cmp(need) < 0:
			what := fmt.Sprintf("only %s %s in all", alloc.String(), name)
			one, many = append(one, what), append(many, what)
		default:
			if free.Sign() < 0 {
				free = resource.Quantity{}
			}
			by := usedBy(others, own, s.allocated[name])
			one = append(one, fmt.Sprintf("%s of its %s %s free (%s)", free.String(), alloc.String(), name, by))
			many = append(many, fmt.Sprintf("%s of their %s %s free (%s)", free.String(), alloc.String(), name, by))
		}
	}
	if len(one) == 0 {
		return nil
	}
	return &refusal{ReasonResources, "has " + strings.Join(one, ", "), "have " + strings.Join(many, ", ")}
}

// usedBy says who requests what is used of a resource on a node; of DRA devices allocated to claims, which
// devices, and to whom (allocated).
func usedBy(others, own resource.Quantity, allocated []string) string {
	there := others.String() + " requested by pods already there"
	if len(allocated) > 0 {
		there = strings.Join(allocated, "; ")
	}
	switch {
	case own.IsZero():
		return there
	case others.IsZero():
		return own.String() + " taken by this TrainJob"
	}
	return fmt.Sprintf("%s, %s taken by this TrainJob", there, own.String())
}

// blockers are the refusals of every node for the next pod of ps, grouped: nodes refused alike share one.
func (ps *PodSet) blockers(states []*nodeState, affinity nodeaffinity.RequiredNodeAffinity) []Blocker {
	var out []Blocker
	var keys []refusal
	for _, s := range states {
		r := ps.refuse(s, affinity)
		if r == nil {
			continue
		}
		at := slices.Index(keys, *r)
		if at < 0 {
			keys = append(keys, *r)
			out = append(out, Blocker{Reason: r.reason})
			at = len(out) - 1
		}
		out[at].Nodes = append(out[at].Nodes, s.node.Name)
	}
	for i := range out {
		verb := keys[i].one
		if len(out[i].Nodes) > 1 {
			verb = keys[i].many
		}
		out[i].Message = NodeList(out[i].Nodes) + " " + verb
	}
	return out
}

// NodeList names nodes in a sentence: "a", "a, b, c", or past four "a, b, c and 5 more".
func NodeList(nodes []string) string {
	if len(nodes) <= 4 {
		return strings.Join(nodes, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(nodes[:3], ", "), len(nodes)-3)
}

// isDeviceClass tells whether a requested resource is a DeviceClass of DRA devices (ReadClaims): a DNS
// subdomain with a dot, which no resource of Kubernetes' own is, and without the domain of an extended
// resource.
func isDeviceClass(name corev1.ResourceName) bool {
	return strings.Contains(string(name), ".") && !strings.Contains(string(name), "/")
}

// resourceOrder is the order resources are named in: extended resources and DRA device classes (the GPUs)
// first, then cpu, memory, ephemeral-storage, the rest by name, and pods last.
func resourceOrder(l corev1.ResourceList) []corev1.ResourceName {
	rank := func(n corev1.ResourceName) int {
		switch {
		case isExtendedResource(n) || isDeviceClass(n):
			return 0
		case n == corev1.ResourceCPU:
			return 1
		case n == corev1.ResourceMemory:
			return 2
		case n == corev1.ResourceEphemeralStorage:
			return 3
		case n == corev1.ResourcePods:
			return 5
		}
		return 4
	}
	names := make([]corev1.ResourceName, 0, len(l))
	for n := range l {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b corev1.ResourceName) int { return cmp.Or(cmp.Compare(rank(a), rank(b)), cmp.Compare(a, b)) })
	return names
}

// RequestsString is what one pod requests, in resourceOrder, without the pod itself: "8 nvidia.com/gpu,
// 16 cpu, 64Gi memory"; "nothing" when it requests nothing.
func RequestsString(l corev1.ResourceList) string {
	var parts []string
	for _, n := range resourceOrder(l) {
		if q := l[n]; n != corev1.ResourcePods && !q.IsZero() {
			parts = append(parts, q.String()+" "+string(n))
		}
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}
