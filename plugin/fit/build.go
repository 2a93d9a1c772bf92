package fit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
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

// ReadClaims adds to the requests of each pod set what its pods claim through DRA (KEP-2782): the devices of
// each DeviceClass that the device requests of their ResourceClaimTemplates and ResourceClaims ask for, read
// through c, under the DeviceClass's name ("8 gpu.nvidia.com", as status names them), so that a node's devices
// of that class are counted as its nvidia.com/gpu is (ReadCluster). A request for all the devices of a class
// has no count and is left out; a claim whose object does not exist asks for nothing, as in the Build phase,
// and so does one the user may not read.
func ReadClaims(ctx context.Context, c client.Reader, sets []PodSet) error {
	for k := range sets {
		ps := &sets[k]
		for _, rc := range ps.Pod.Spec.ResourceClaims {
			reqs, err := pipeline.ClaimDeviceRequests(ctx, c, ps.Pod.Namespace, rc.ResourceClaimName, rc.ResourceClaimTemplateName)
			if apierrors.IsForbidden(err) {
				continue
			}
			if err != nil {
				return fmt.Errorf("the DRA claim %s of %s: %w", rc.Name, ps.Who, err)
			}
			for _, r := range reqs {
				class, mode, count := pipeline.ExactRequest(r)
				if class == "" || mode == resourcev1.DeviceAllocationModeAll {
					continue
				}
				add(ps.Requests, corev1.ResourceList{corev1.ResourceName(class): *resource.NewQuantity(max(count, 1), resource.DecimalSI)})
				if !slices.Contains(ps.Claimed, class) {
					ps.Claimed = append(ps.Claimed, class)
				}
			}
		}
	}
	return nil
}

// deviceClasses are the DeviceClasses the pods of sets claim devices of.
func deviceClasses(sets []PodSet) []string {
	var classes []string
	for _, ps := range sets {
		for _, c := range ps.Claimed {
			if !slices.Contains(classes, c) {
				classes = append(classes, c)
			}
		}
	}
	return classes
}

// Cluster is what fit reads of the cluster: its nodes, and what the pods on them request.
type Cluster struct {
	// Nodes are the cluster's nodes; what each can allocate includes, under the DeviceClass's name, the DRA
	// devices of each class that ReadOptions.DeviceClasses names, which its ResourceSlices publish.
	Nodes []corev1.Node
	// Used is what the pods on each node request, by node name; nil counts the nodes as empty. The DRA devices
	// of a node allocated to claims count under their DeviceClass's name.
	Used map[string]corev1.ResourceList
	// Allocated say, by node and DeviceClass, which of the node's DRA devices are allocated to which pod:
	// "gpu-0,gpu-1 allocated to pod team-b/x".
	Allocated map[string]map[corev1.ResourceName][]string
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

// NodePod is a pod on a node: who it is, whose (its TrainJob, with ReadOptions.TrainJobs) and what it
// requests.
type NodePod struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// TrainJob is the TrainJob the pod is of: read with ReadOptions.TrainJobs, and only when its controller
	// chain holds (creditTrainJobs); a pod that only carries a JobSet's label is no TrainJob's.
	TrainJob string              `json:"trainJob,omitempty"`
	Requests corev1.ResourceList `json:"requests,omitempty"`

	jobSet string                 // the JobSet name label the pod carries
	job    *metav1.OwnerReference // the pod's controller
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
	// DeviceClasses are the DeviceClasses whose DRA devices the pods claim (ReadClaims): each node's devices of
	// these classes are read from its ResourceSlices and, with Pods, those allocated to claims (the
	// ResourceClaims, as with Claims) count as used.
	DeviceClasses []string
	// TrainJobs tells, with Pods, each pod's TrainJob (NodePod.TrainJob): that of a pod with a JobSet's label,
	// judged by its controller chain from the Jobs, JobSets and TrainJobs of every namespace (creditTrainJobs).
	TrainJobs bool
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
	if !opts.Pods && len(opts.DeviceClasses) == 0 {
		return cl, nil
	}
	devices, err := gpuhealth.ReadDevices(ctx, c, "")
	if err != nil {
		return nil, err
	}
	cl.Devices = devices
	drivers := deviceDrivers(ctx, c, opts.DeviceClasses)
	addDevices(cl.Nodes, devices.Slices, drivers)
	dra := opts.Claims || len(drivers) > 0
	if dra && slices.Contains(devices.Forbidden, "ResourceSlices") {
		cl.Notes = append(cl.Notes, "you may not list ResourceSlices, so no node's DRA devices are counted (ask for list on resourceslices.resource.k8s.io)")
	}
	if !opts.Pods {
		return cl, nil
	}
	if dra {
		var claims resourcev1.ResourceClaimList
		err := c.List(ctx, &claims)
		switch {
		case apierrors.IsForbidden(err):
			cl.Notes = append(cl.Notes, "you may not list the ResourceClaims of every namespace, so no DRA device is counted as allocated: \"now\" is as if every device were free")
		case err != nil && !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err):
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
	used, pods, ownPods, err := podRequests(ctx, c, opts.Own)
	switch {
	case apierrors.IsForbidden(err):
		cl.Notes = append(cl.Notes, "you may not list the pods of every namespace, so what pods already request on the nodes is not counted: \"now\" is as if the nodes were empty")
		return cl, nil
	case err != nil:
		return nil, err
	}
	cl.Used, cl.Pods = used, pods
	if opts.TrainJobs {
		if err := cl.creditTrainJobs(ctx, c); err != nil {
			return nil, err
		}
	}
	if len(drivers) > 0 {
		cl.addAllocated(devices.Slices, drivers, ownPods)
	}
	if own := len(ownPods); own > 0 {
		cl.Notes = append(cl.Notes, fmt.Sprintf("the %d %s of TrainJob %s already on nodes %s not counted: fit says whether it would fit if it started now",
			own, plural(own, "pod", "pods"), opts.Own.Name, plural(own, "is", "are")))
	}
	return cl, nil
}

// podRequests is what the pods bound to a node and not ended request on each node, a pod counting as 1 of
// the node's "pods", without those of own; those pods by node; and the UIDs of own's, which it left out. Own's
// pods are those its JobSet's label selects and cmdutil.Lineage owns (read once, at the first such pod): a pod
// that only carries the label is counted as any other.
func podRequests(ctx context.Context, c client.Reader, own *trainer.TrainJob) (map[string]corev1.ResourceList, map[string][]NodePod, map[types.UID]bool, error) {
	used := map[string]corev1.ResourceList{}
	onNode := map[string][]NodePod{}
	ownPods := map[types.UID]bool{}
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
			return nil, nil, nil, err
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if ok, err := isOwn(p); err != nil {
				return nil, nil, nil, err
			} else if ok {
				ownPods[p.UID] = true
				continue
			}
			if used[p.Spec.NodeName] == nil {
				used[p.Spec.NodeName] = corev1.ResourceList{}
			}
			requests := pipeline.PodRequests(&p.Spec)
			add(used[p.Spec.NodeName], requests)
			add(used[p.Spec.NodeName], corev1.ResourceList{corev1.ResourcePods: onePod})
			onNode[p.Spec.NodeName] = append(onNode[p.Spec.NodeName], NodePod{Namespace: p.Namespace, Name: p.Name,
				Requests: requests, jobSet: p.Labels[jobsetv1alpha2.JobSetNameKey], job: metav1.GetControllerOf(p)})
		}
		if cont = pods.Continue; cont == "" {
			return used, onNode, ownPods, nil
		}
	}
}

// creditTrainJobs sets the TrainJob of each of cl's pods that carries a JobSet's name label and is that
// TrainJob's as cmdutil.Lineage judges it: its controller chain, pod → Job → JobSet → TrainJob, holds by UID.
// It reads the Jobs with the label, the JobSets and the TrainJobs of every namespace (their metadata, in three
// requests, only when a pod carries the label). A user who may not list one of them gets no pod credited to
// a TrainJob, and a note that says so.
func (cl *Cluster) creditTrainJobs(ctx context.Context, c client.Reader) error {
	labelled := false
	for _, ps := range cl.Pods {
		labelled = labelled || slices.ContainsFunc(ps, func(p NodePod) bool { return p.jobSet != "" })
	}
	if !labelled {
		return nil
	}
	list := func(kind schema.GroupVersionKind, opts ...client.ListOption) (*metav1.PartialObjectMetadataList, error) {
		l := &metav1.PartialObjectMetadataList{}
		l.SetGroupVersionKind(kind)
		return l, c.List(ctx, l, opts...)
	}
	var (
		jobs, jobSets, trainJobs          *metav1.PartialObjectMetadataList
		jobsErr, jobSetsErr, trainJobsErr error
		wg                                sync.WaitGroup
	)
	wg.Go(func() {
		jobs, jobsErr = list(batchv1.SchemeGroupVersion.WithKind("JobList"), client.HasLabels{jobsetv1alpha2.JobSetNameKey})
	})
	wg.Go(func() { jobSets, jobSetsErr = list(jobsetv1alpha2.GroupVersion.WithKind("JobSetList")) })
	wg.Go(func() { trainJobs, trainJobsErr = list(trainer.GroupVersion.WithKind(trainer.TrainJobKind + "List")) })
	wg.Wait()
	if err := cmp.Or(jobsErr, jobSetsErr, trainJobsErr); err != nil {
		if apierrors.IsForbidden(err) || apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			cl.Notes = append(cl.Notes, "you may not list the Jobs, JobSets and TrainJobs of every namespace, so no pod is shown as a TrainJob's")
			return nil
		}
		return err
	}
	// controllers is each object's controller by the object's UID.
	controllers := func(l *metav1.PartialObjectMetadataList) map[types.UID]*metav1.OwnerReference {
		m := map[types.UID]*metav1.OwnerReference{}
		for i := range l.Items {
			m[l.Items[i].UID] = metav1.GetControllerOfNoCopy(&l.Items[i])
		}
		return m
	}
	jobOf, trainJobOf := controllers(jobs), controllers(jobSets)
	trainJobUIDs := map[types.UID]bool{}
	for _, tj := range trainJobs.Items {
		trainJobUIDs[tj.UID] = true
	}
	for _, ps := range cl.Pods {
		for i := range ps {
			p := &ps[i]
			if p.jobSet == "" || p.job == nil || p.job.Kind != "Job" || p.job.APIVersion != batchv1.SchemeGroupVersion.String() {
				continue
			}
			js := jobOf[p.job.UID]
			if js == nil || js.Kind != "JobSet" || js.APIVersion != jobsetv1alpha2.GroupVersion.String() || js.Name != p.jobSet {
				continue
			}
			tj := trainJobOf[js.UID]
			if tj != nil && tj.Kind == trainer.TrainJobKind && tj.APIVersion == trainer.GroupVersion.String() && tj.Name == js.Name && trainJobUIDs[tj.UID] {
				p.TrainJob = tj.Name
			}
		}
	}
	return nil
}

// driverSelector is how a DeviceClass selects its driver's devices: NVIDIA's, and the local cluster's,
// select `device.driver == "gpu.nvidia.com"`.
var driverSelector = regexp.MustCompile(`device\.driver\s*==\s*["']([^"']+)["']`)

// deviceDrivers are the DRA drivers of classes, by class: the driver the class's CEL selector names
// (device.driver == "…"), else, for a class that selects otherwise or that cannot be read, the class's own
// name, which NVIDIA's driver shares with its class. fit does not evaluate other selectors: every device of
// the driver counts as one of the class.
func deviceDrivers(ctx context.Context, c client.Reader, classes []string) map[corev1.ResourceName]string {
	drivers := map[corev1.ResourceName]string{}
	for _, class := range classes {
		drivers[corev1.ResourceName(class)] = class
		var dc resourcev1.DeviceClass
		if err := c.Get(ctx, client.ObjectKey{Name: class}, &dc); err != nil {
			continue
		}
		for _, sel := range dc.Spec.Selectors {
			if sel.CEL == nil {
				continue
			}
			if m := driverSelector.FindStringSubmatch(sel.CEL.Expression); m != nil {
				drivers[corev1.ResourceName(class)] = m[1]
			}
		}
	}
	return drivers
}

// addDevices adds to what each node can allocate, under each class's name, the devices of the class's driver
// that the node's ResourceSlices publish; a node without any gets 0 of the class.
func addDevices(nodes []corev1.Node, published []resourcev1.ResourceSlice, drivers map[corev1.ResourceName]string) {
	for i := range nodes {
		n := &nodes[i]
		for class, driver := range drivers {
			var count int64
			for _, s := range published {
				if ptr.Deref(s.Spec.NodeName, "") == n.Name && s.Spec.Driver == driver {
					count += int64(len(s.Spec.Devices))
				}
			}
			if n.Status.Allocatable == nil {
				n.Status.Allocatable = corev1.ResourceList{}
			}
			n.Status.Allocatable[class] = *resource.NewQuantity(count, resource.DecimalSI)
		}
	}
}

// addAllocated counts, on each node, the devices of the classes' drivers allocated to cl.Claims as used, with
// which devices and to which pod, but for the claims reserved for ownPods. A device is on the node of the
// ResourceSlice of its driver and pool.
func (cl *Cluster) addAllocated(published []resourcev1.ResourceSlice, drivers map[corev1.ResourceName]string, ownPods map[types.UID]bool) {
	nodeOf := map[string]string{} // driver/pool: node
	for _, s := range published {
		if n := ptr.Deref(s.Spec.NodeName, ""); n != "" {
			nodeOf[s.Spec.Driver+"/"+s.Spec.Pool.Name] = n
		}
	}
	classOf := map[string]corev1.ResourceName{}
	for class, driver := range drivers {
		classOf[driver] = class
	}
	for i := range cl.Claims {
		cl.addClaim(&cl.Claims[i], nodeOf, classOf, ownPods)
	}
}

// addClaim counts the devices allocated to claim rc as used on their nodes, unless it is reserved for one of
// ownPods.
func (cl *Cluster) addClaim(rc *resourcev1.ResourceClaim, nodeOf map[string]string, classOf map[string]corev1.ResourceName, ownPods map[types.UID]bool) {
	a := rc.Status.Allocation
	if a == nil {
		return
	}
	holder := "ResourceClaim " + rc.Namespace + "/" + rc.Name
	for _, r := range rc.Status.ReservedFor {
		if ownPods[r.UID] {
			return
		}
		if r.Resource == "pods" && r.APIGroup == "" {
			holder = "pod " + rc.Namespace + "/" + r.Name
		}
	}
	type key struct {
		node  string
		class corev1.ResourceName
	}
	var keys []key
	devices := map[key][]string{}
	for _, d := range a.Devices.Results {
		class, ok := classOf[d.Driver]
		node := nodeOf[d.Driver+"/"+d.Pool]
		if !ok || node == "" {
			continue
		}
		k := key{node, class}
		if _, seen := devices[k]; !seen {
			keys = append(keys, k)
		}
		devices[k] = append(devices[k], d.Device)
	}
	for _, k := range keys {
		if cl.Used[k.node] == nil {
			cl.Used[k.node] = corev1.ResourceList{}
		}
		add(cl.Used[k.node], corev1.ResourceList{k.class: *resource.NewQuantity(int64(len(devices[k])), resource.DecimalSI)})
		if cl.Allocated == nil {
			cl.Allocated = map[string]map[corev1.ResourceName][]string{}
		}
		if cl.Allocated[k.node] == nil {
			cl.Allocated[k.node] = map[corev1.ResourceName][]string{}
		}
		cl.Allocated[k.node][k.class] = append(cl.Allocated[k.node][k.class], strings.Join(devices[k], ",")+" allocated to "+holder)
	}
}
