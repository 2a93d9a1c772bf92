package fit

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/dryrun"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/gpuhealth"
)

// PodSets builds tj as the operator would — the one pipeline of render and describe-pipeline: the webhook's
// admission, then the Build phase, on the runtime tj references among runtimes — and returns the pods of its
// JobSet, one PodSet per replicated job in the JobSet's order, and the pipeline's warnings.
func PodSets(ctx context.Context, fw *pipeline.Framework, tj *trainer.TrainJob, runtimes []*pipeline.Runtime) ([]PodSet, []string, error) {
	res, err := dryrun.Render(ctx, fw, tj, runtimes, pipeline.BuildOptions{})
	if err != nil {
		return nil, nil, err
	}
	for _, obj := range res.Objects {
		if js, ok := obj.(*jobsetv1alpha2.JobSet); ok {
			return FromJobSet(js), res.Warnings, nil
		}
	}
	return nil, res.Warnings, fmt.Errorf("the pipeline built no JobSet for TrainJob %s", tj.Name)
}

// FromJobSet are the pods a JobSet makes: of each replicated job, replicas Jobs of parallelism pods (fewer
// when completions is less), each pod as its template says.
func FromJobSet(js *jobsetv1alpha2.JobSet) []PodSet {
	var sets []PodSet
	for _, rj := range js.Spec.ReplicatedJobs {
		job := &rj.Template.Spec
		perJob := ptr.Deref(job.Parallelism, 1)
		if job.Completions != nil && *job.Completions < perJob {
			perJob = *job.Completions
		}
		pod := &corev1.Pod{ObjectMeta: job.Template.ObjectMeta, Spec: job.Template.Spec}
		pod.Namespace = js.Namespace
		sets = append(sets, NewPodSet(rj.Name, rj.Template.Labels[trainer.AncestorLabel], int(rj.Replicas)*int(perJob), int(perJob), pod))
	}
	return sets
}

// Cluster is what fit reads of the cluster: its nodes, and what the pods on them request.
type Cluster struct {
	Nodes []corev1.Node
	// Used is what the pods on each node request, by node name; nil counts the nodes as empty.
	Used map[string]corev1.ResourceList
	// Notes say what was not counted, and why.
	Notes []string
	// Sick are the nodes whose GPUs are sick (plugin/gpuhealth), by node name; read with the pods.
	Sick map[string]*gpuhealth.Sickness
	// Pods are the pods bound to each node and not ended, by node name, that Used sums; read with the pods.
	Pods map[string][]NodePod
	// Devices are the nodes' DRA devices (their ResourceSlices), read with the pods; Claims the ResourceClaims
	// of every namespace, with ReadOptions.Claims.
	Devices gpuhealth.Devices
	Claims  []resourcev1.ResourceClaim
}

// NodePod is a pod on a node: who it is, whose (the TrainJob its JobSet label names, if any) and what it
// requests.
type NodePod struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// TrainJob is the name of the JobSet, and so of the TrainJob, whose label the pod carries.
	TrainJob string              `json:"trainJob,omitempty"`
	Requests corev1.ResourceList `json:"requests,omitempty"`
}

// ReadOptions say what ReadCluster reads.
type ReadOptions struct {
	// Pods reads what the pods on the nodes request (a list of the pods of every namespace), and which nodes'
	// GPUs are sick (their DRA devices: ResourceSlices and DeviceTaintRules). Without it the nodes count as
	// empty and healthy: enough to tell whether a TrainJob fits nowhere.
	Pods bool
	// Own, when set, is a TrainJob of the cluster: its own pods are left out of what the nodes use, so that
	// fit says whether it would fit if it started now.
	Own *trainer.TrainJob
	// Claims reads the ResourceClaims of every namespace too (with Pods), to tell which DRA devices are taken.
	// A user who may not list them gets none.
	Claims bool
}

// podsPageSize bounds one page of the list of pods: a large cluster's pods come in pages, as kubectl reads them.
const podsPageSize = 500

// ErrNodesForbidden is returned, wrapped, when the user may not list nodes: nothing can be said then.
var ErrNodesForbidden = errors.New("you may not list nodes, and fit needs them (ask for a ClusterRole that grants list on nodes)")

// ReadCluster reads the nodes and, with opts.Pods, what the pods bound to them and not yet ended request. A
// user who may not list pods everywhere gets the nodes counted as empty, and a note that says so.
func ReadCluster(ctx context.Context, c client.Reader, opts ReadOptions) (*Cluster, error) {
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil {
		if apierrors.IsForbidden(err) {
			return nil, fmt.Errorf("%w: %s", ErrNodesForbidden, cmdutil.APIMessage(err))
		}
		return nil, err
	}
	cl := &Cluster{Nodes: nodes.Items}
	if !opts.Pods {
		return cl, nil
	}
	devices, err := gpuhealth.ReadDevices(ctx, c, "")
	if err != nil {
		return nil, err
	}
	cl.Devices = devices
	if opts.Claims {
		var claims resourcev1.ResourceClaimList
		if err := c.List(ctx, &claims); err != nil && !apierrors.IsForbidden(err) && !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err) {
			return nil, fmt.Errorf("list ResourceClaims: %w", err)
		}
		cl.Claims = claims.Items
	}
	for i := range cl.Nodes {
		if s := gpuhealth.Of(&cl.Nodes[i], devices); s != nil {
			if cl.Sick == nil {
				cl.Sick = map[string]*gpuhealth.Sickness{}
			}
			cl.Sick[s.Node] = s
		}
	}
	used, pods, own, err := podRequests(ctx, c, opts.Own)
	switch {
	case apierrors.IsForbidden(err):
		cl.Notes = append(cl.Notes, "you may not list the pods of every namespace, so what pods already request on the nodes is not counted: \"now\" is as if the nodes were empty")
		return cl, nil
	case err != nil:
		return nil, err
	}
	cl.Used, cl.Pods = used, pods
	if own > 0 {
		cl.Notes = append(cl.Notes, fmt.Sprintf("the %d %s of TrainJob %s already on nodes %s not counted: fit says whether it would fit if it started now",
			own, plural(own, "pod", "pods"), opts.Own.Name, plural(own, "is", "are")))
	}
	return cl, nil
}

// podRequests is what the pods bound to a node and not ended request on each node, a pod counting as 1 of
// the node's "pods", without those of own; those pods by node; and how many of own's it left out. Own's pods are those its
// JobSet's label selects and cmdutil.Lineage owns (read once, at the first such pod): a pod that only carries
// the label is counted as any other.
func podRequests(ctx context.Context, c client.Reader, own *trainer.TrainJob) (map[string]corev1.ResourceList, map[string][]NodePod, int, error) {
	used := map[string]corev1.ResourceList{}
	onNode := map[string][]NodePod{}
	ownPods := 0
	var lineage *cmdutil.Lineage
	isOwn := func(p *corev1.Pod) (bool, error) {
		if own == nil || p.Namespace != own.Namespace || p.Labels[jobsetv1alpha2.JobSetNameKey] != own.Name {
			return false, nil
		}
		if lineage == nil {
			var err error
			if lineage, err = cmdutil.ReadLineage(ctx, c, own); err != nil {
				return false, err
			}
		}
		return lineage.Owns(ctx, p)
	}
	bound := fields.AndSelectors(fields.OneTermNotEqualSelector("spec.nodeName", ""),
		fields.OneTermNotEqualSelector("status.phase", string(corev1.PodSucceeded)),
		fields.OneTermNotEqualSelector("status.phase", string(corev1.PodFailed)))
	cont := ""
	for {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.MatchingFieldsSelector{Selector: bound}, client.Limit(podsPageSize), client.Continue(cont)); err != nil {
			return nil, nil, 0, err
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if ok, err := isOwn(p); err != nil {
				return nil, nil, 0, err
			} else if ok {
				ownPods++
				continue
			}
			if used[p.Spec.NodeName] == nil {
				used[p.Spec.NodeName] = corev1.ResourceList{}
			}
			requests := pipeline.PodRequests(&p.Spec)
			add(used[p.Spec.NodeName], requests)
			add(used[p.Spec.NodeName], corev1.ResourceList{corev1.ResourcePods: onePod})
			onNode[p.Spec.NodeName] = append(onNode[p.Spec.NodeName], NodePod{Namespace: p.Namespace, Name: p.Name,
				TrainJob: p.Labels[jobsetv1alpha2.JobSetNameKey], Requests: requests})
		}
		if cont = pods.Continue; cont == "" {
			return used, onNode, ownPods, nil
		}
	}
}
