package logs

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
)

// A step is a stage the user can ask for with --stage: the replicated job of the JobSet that runs it and the
// container that holds its main process.
type step struct {
	name          string // the --stage value
	replicatedJob string
	container     string
}

// Steps in pipeline order. The trainer's replicated job and container are both called node; the MPI launcher
// runs its process in a container called node too (spec §1.6).
var steps = []step{
	{name: trainer.DatasetInitializerName, replicatedJob: trainer.DatasetInitializerName, container: trainer.DatasetInitializerName},
	{name: trainer.ModelInitializerName, replicatedJob: trainer.ModelInitializerName, container: trainer.ModelInitializerName},
	{name: trainer.AncestorTrainer, replicatedJob: trainer.Node, container: trainer.Node},
	{name: trainer.Launcher, replicatedJob: trainer.Launcher, container: trainer.Node},
}

// stageNames are the values --stage accepts, in pipeline order.
func stageNames() []string {
	names := make([]string, len(steps))
	for i, s := range steps {
		names[i] = s.name
	}
	return names
}

func stepNamed(name string) (step, bool) {
	for _, s := range steps {
		if s.name == name {
			return s, true
		}
	}
	return step{}, false
}

// allRanks selects every rank.
const allRanks = -1

// selection is what the user asked for, before the JobSet is known.
type selection struct {
	stage     string // "" = the default: the trainer (launcher when there is one), after the initializers when following
	rank      int    // allRanks or a completion index
	rankSet   bool   // --rank was given
	node      string // --node: only pods on this host
	container string // -c
	follow    bool
	// allContainers is --all-containers: every container of each pod, init containers too.
	allContainers bool
}

// planStep is one step of a plan: which pods of which replicated job to read.
type planStep struct {
	step
	ranks     int // how many ranks (pods at a time) the replicated job has
	perJob    int // pods per Job: ranks of Job i are i*perJob … (i+1)*perJob-1
	rank      int // allRanks or one rank
	container string
	// podContainers are the names of the containers of its pods (init containers first), from the JobSet.
	podContainers []string
}

// plan is the steps to read, in pipeline order.
type plan struct {
	steps         []planStep
	node          string
	allContainers bool
}

// newPlan resolves a selection against the replicated jobs of the TrainJob's JobSet.
func newPlan(sel selection, trainJob string, js *jobsetv1alpha2.JobSet) (*plan, error) {
	present := map[string]jobsetv1alpha2.ReplicatedJob{}
	var have []string
	for _, rj := range js.Spec.ReplicatedJobs {
		present[rj.Name] = rj
	}
	for _, s := range steps {
		if _, ok := present[s.replicatedJob]; ok {
			have = append(have, s.name)
		}
	}
	var chosen []step
	switch {
	case sel.stage != "":
		s, _ := stepNamed(sel.stage)
		if _, ok := present[s.replicatedJob]; !ok {
			return nil, fmt.Errorf("TrainJob %s has no %s stage (replicated job %q); its stages are: %s", trainJob, s.name, s.replicatedJob, strings.Join(have, ", "))
		}
		chosen = []step{s}
	default:
		if sel.follow {
			for _, s := range steps[:2] {
				if _, ok := present[s.replicatedJob]; ok {
					chosen = append(chosen, s)
				}
			}
		}
		main, _ := stepNamed(trainer.AncestorTrainer)
		if _, ok := present[trainer.Launcher]; ok {
			main, _ = stepNamed(trainer.Launcher)
		} else if _, ok := present[trainer.Node]; !ok {
			return nil, fmt.Errorf("TrainJob %s has no trainer stage (replicated job %q or %q); its stages are: %s; choose one with --stage", trainJob, trainer.Node, trainer.Launcher, strings.Join(have, ", "))
		}
		chosen = append(chosen, main)
	}

	p := &plan{node: sel.node, allContainers: sel.allContainers}
	for i, s := range chosen {
		rj := present[s.replicatedJob]
		perJob := cmdutil.PodsPerJob(rj.Template.Spec)
		ps := planStep{step: s, ranks: int(rj.Replicas) * perJob, perJob: perJob, rank: sel.rank, container: s.container}
		for _, c := range slices.Concat(rj.Template.Spec.Template.Spec.InitContainers, rj.Template.Spec.Template.Spec.Containers) {
			ps.podContainers = append(ps.podContainers, c.Name)
		}
		if sel.container != "" {
			ps.container = sel.container
		}
		// Following the whole pipeline, --rank and -c are about the trainer: an initializer has one pod.
		if sel.stage == "" && i < len(chosen)-1 {
			ps.rank, ps.container = allRanks, s.container
		}
		if ps.rank != allRanks && ps.rank >= ps.ranks {
			return nil, fmt.Errorf("rank %d out of range: the %s stage of TrainJob %s has %d rank(s), 0 to %d", ps.rank, s.name, trainJob, ps.ranks, ps.ranks-1)
		}
		p.steps = append(p.steps, ps)
	}
	return p, nil
}

// streams is how many log streams the plan reads, and whether that number is known before the pods are
// (with --node it depends on where the pods land).
func (p *plan) streams() (int, bool) {
	n := 0
	for _, s := range p.steps {
		pods := 1
		if s.rank == allRanks {
			pods = s.ranks
		}
		if p.allContainers {
			pods *= max(len(s.podContainers), 1)
		}
		n += pods
	}
	return n, p.node == ""
}

// podTarget is a pod the plan reads, with the step and rank it runs.
type podTarget struct {
	step *planStep
	rank int
	pod  *corev1.Pod
}

// match tells which step of the plan a pod belongs to and its rank; ok is false for a pod the plan does not
// read. It relies only on the labels the JobSet controller puts on pods.
func (p *plan) match(pod *corev1.Pod) (podTarget, bool) {
	if p.node != "" && pod.Spec.NodeName != p.node {
		return podTarget{}, false
	}
	rjName := pod.Labels[jobsetv1alpha2.ReplicatedJobNameKey]
	for i := range p.steps {
		s := &p.steps[i]
		if s.replicatedJob != rjName {
			continue
		}
		rank, ok := cmdutil.PodRank(pod, s.perJob)
		if !ok || (s.rank != allRanks && rank != s.rank) {
			return podTarget{}, false
		}
		return podTarget{step: s, rank: rank, pod: pod}, true
	}
	return podTarget{}, false
}

// targets is what the plan reads of pods: the newest pod of each step and rank, in pipeline order.
func (p *plan) targets(pods []corev1.Pod) []podTarget {
	var targets []podTarget
	for i := range pods {
		if t, ok := p.match(&pods[i]); ok {
			targets = append(targets, t)
		}
	}
	return latest(targets)
}

// latest keeps, of the targets, the newest pod of each step and rank (a Job replaces a failed pod, a JobSet
// restart replaces them all), in pipeline order, then rank order.
func latest(targets []podTarget) []podTarget {
	type key struct {
		step string
		rank int
	}
	newest := map[key]podTarget{}
	for _, t := range targets {
		k := key{t.step.name, t.rank}
		if cur, ok := newest[k]; !ok || cmdutil.NewerPod(t.pod, cur.pod) {
			newest[k] = t
		}
	}
	out := make([]podTarget, 0, len(newest))
	for _, t := range newest {
		out = append(out, t)
	}
	order := func(name string) int { return slices.Index(stageNames(), name) }
	slices.SortFunc(out, func(a, b podTarget) int {
		if d := order(a.step.name) - order(b.step.name); d != 0 {
			return d
		}
		return a.rank - b.rank
	})
	return out
}

// containerOf picks the container to read in a pod: the one asked for or the step's main container, or the
// only container of a pod that has no container of that name.
func containerOf(pod *corev1.Pod, want string, explicit bool) (string, error) {
	var names []string
	for _, c := range pod.Spec.Containers {
		if c.Name == want {
			return want, nil
		}
		names = append(names, c.Name)
	}
	for _, c := range pod.Spec.InitContainers {
		if c.Name == want {
			return want, nil
		}
	}
	if !explicit && len(names) == 1 {
		return names[0], nil
	}
	return "", fmt.Errorf("pod %s has no container %q; choose one of [%s] with -c", pod.Name, want, strings.Join(names, " "))
}

// containerStatus is the status of a container of a pod, or nil.
func containerStatus(pod *corev1.Pod, name string) *corev1.ContainerStatus {
	for _, list := range [][]corev1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}

// started tells whether a container has run, so that it has logs to read.
func started(st *corev1.ContainerStatus) bool {
	return st != nil && (st.State.Running != nil || st.State.Terminated != nil || st.LastTerminationState.Terminated != nil)
}

// waitingReason says why a container has no logs yet.
func waitingReason(pod *corev1.Pod, st *corev1.ContainerStatus) string {
	if st != nil && st.State.Waiting != nil && st.State.Waiting.Reason != "" {
		return st.State.Waiting.Reason
	}
	if pod.Spec.NodeName == "" {
		return "not scheduled"
	}
	return string(pod.Status.Phase)
}
