package status

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/stage"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/failure"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/gpuhealth"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/kueue"
)

// Reader is what status reads a TrainJob with.
type Reader struct {
	Client client.Reader
	// Kueue reads what Kueue says of a TrainJob in a LocalQueue; nil reads nothing.
	Kueue *kueue.Client
	// Logs reads the end of the log of the first failed container, and with it the JobSet is kept for its
	// failure policy; nil keeps neither (a follower printing lines has no use for them).
	Logs kubernetes.Interface
}

// Fetch reads the TrainJob and everything Summarize needs, in five requests made at once: the TrainJob, its
// JobSet, the Jobs and the pods the JobSet's label selects, and the namespace's Events. Of those Jobs and pods
// only the TrainJob's are kept (cmdutil.Lineage: the controller chain to the JobSet the TrainJob controls, a
// Job created since the list read once more); a pod that only carries the labels is not shown. The JobSet,
// Jobs and Events are optional: a user without the right to read them, or a TrainJob whose controller has not
// built them yet, still gets a summary (stage times then come from the pods; without a JobSet, no pods).
//
// Then, at once: only while a pod cannot be scheduled, one more request reads the nodes, to tell whether
// taints alone keep it off them (a user who may not read nodes gets the scheduler's message instead); only when
// a pod has DRA claims, one more reads the namespace's ResourceClaims (the devices allocated, or why not); only for
// a TrainJob in a Kueue LocalQueue, with rd.Kueue, at most four more (fetchQueue); and only when a container
// failed and the TrainJob is not Complete, with rd.Logs, one more (fetchFailure): the end of the first failed
// container's log, and three more when it ran on a node: that node, its ResourceSlices and the DeviceTaintRules,
// to tell whether its GPUs are sick (plugin/gpuhealth). At most fifteen in all,
// but for a TrainJob that MultiKueue dispatched to a worker cluster: then, once its Workload names the worker,
// the worker's MultiKueueCluster and kubeconfig Secret (once per kc) and five to seven requests against the
// worker instead of the nodes and the failure (fetchWorker).
func Fetch(ctx context.Context, rd Reader, namespace, name string) (Objects, error) {
	c, kc := rd.Client, rd.Kueue
	var (
		tj                                    *trainer.TrainJob
		js                                    = &jobsetv1alpha2.JobSet{}
		jobs                                  batchv1.JobList
		pods                                  corev1.PodList
		events                                corev1.EventList
		tjErr, jsErr, jobsErr, podsErr, evErr error
		wg                                    sync.WaitGroup
	)
	children := []client.ListOption{client.InNamespace(namespace), cmdutil.ChildrenOf(name)}
	wg.Go(func() { tj, tjErr = cmdutil.GetTrainJob(ctx, c, namespace, name) })
	wg.Go(func() { jsErr = c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, js) })
	wg.Go(func() { jobsErr = c.List(ctx, &jobs, children...) })
	wg.Go(func() { podsErr = c.List(ctx, &pods, children...) })
	wg.Go(func() { evErr = c.List(ctx, &events, client.InNamespace(namespace)) })
	wg.Wait()
	// The TrainJob's own error says best what is wrong: not found, or no right to read it.
	if tjErr != nil {
		return Objects{}, tjErr
	}
	in := Objects{TrainJob: tj, Events: events.Items}
	for _, err := range []error{jsErr, jobsErr, evErr} {
		if err != nil && !optional(err) {
			return in, err
		}
	}
	if podsErr != nil {
		return in, podsErr
	}
	if jsErr != nil {
		js = nil
	}
	lineage := cmdutil.NewLineage(tj, js, jobs.Items, jobsErr, c)
	in.Jobs = lineage.Jobs(jobs.Items)
	var err error
	if in.Pods, err = lineage.Pods(ctx, pods.Items); err != nil {
		return in, err
	}
	var nodesErr, queueErr error
	if slices.ContainsFunc(in.Pods, func(p corev1.Pod) bool { _, ok := unschedulable(&p); return ok }) {
		wg.Go(func() {
			var nodes corev1.NodeList
			if nodesErr = c.List(ctx, &nodes); nodesErr == nil || optional(nodesErr) {
				in.Nodes, nodesErr = nodes.Items, nil
			}
		})
	}
	var claimsErr error
	if slices.ContainsFunc(in.Pods, func(p corev1.Pod) bool { return len(p.Spec.ResourceClaims) > 0 }) {
		wg.Go(func() {
			var claims resourcev1.ResourceClaimList
			if claimsErr = c.List(ctx, &claims, client.InNamespace(namespace)); claimsErr == nil || optional(claimsErr) || meta.IsNoMatchError(claimsErr) {
				in.Claims, claimsErr = claims.Items, nil
			}
		})
	}
	if kc != nil && kueue.Queued(tj) {
		wg.Go(func() { in.Queue, queueErr = fetchQueue(ctx, kc, c, tj) })
	}
	var gpusErr error
	if rd.Logs != nil && stage.Of(tj) != stage.Complete {
		if f := failure.First(failure.Objects{Pods: in.Pods, Jobs: in.Jobs}); f != nil {
			wg.Go(func() { in.JobSet, in.FailureLog = lineage.JobSet(), fetchFailure(ctx, rd, tj, f) })
			if f.Node != "" {
				wg.Go(func() { in.SickGPUs, gpusErr = gpuhealth.Read(ctx, c, f.Node) })
			}
		}
	}
	wg.Wait()
	if err := errors.Join(nodesErr, claimsErr, queueErr, gpusErr); err != nil {
		return in, err
	}
	return in, fetchWorker(ctx, rd, &in)
}

// fetchFailure reads the last failure.LogLines lines of the log of the container that failed first, f: of its
// previous instance when it has restarted since. A log that cannot be read says why instead: the kubelet may be
// gone with its node, or the container never started.
func fetchFailure(ctx context.Context, rd Reader, tj *trainer.TrainJob, f *failure.Failure) *FailureLog {
	l := &FailureLog{Pod: f.Pod, Container: f.Container, Previous: f.Previous}
	switch {
	case f.Pod == "":
		l.Unavailable = fmt.Sprintf("no pod of Job %s is left", f.Job)
	case f.ExitCode == nil:
		l.Unavailable = "the container never started"
	default:
		opts := &corev1.PodLogOptions{Container: f.Container, Previous: f.Previous,
			TailLines: ptr.To[int64](failure.LogLines), LimitBytes: ptr.To[int64](maxFailureLogBytes)}
		data, err := rd.Logs.CoreV1().Pods(tj.Namespace).GetLogs(f.Pod, opts).DoRaw(ctx)
		if err != nil {
			l.Unavailable, l.Err = cmdutil.APIMessage(err), err
			if apierrors.IsNotFound(err) {
				l.Unavailable = logGone + l.Unavailable
			}
			break
		}
		if text := strings.TrimSuffix(string(data), "\n"); text != "" {
			l.Lines = strings.Split(text, "\n")
		}
	}
	return l
}

// logGone is why a log is unavailable when the API server no longer finds it, in the words of what it means to
// the user; the API server's message follows.
const logGone = "its node no longer has it (its pod or container was deleted, or its node left the cluster); the API server said: "

// maxFailureLogBytes bounds the log status reads: twenty lines of a program that prints no newline could be
// the whole log.
const maxFailureLogBytes = 64 << 10

// fetchQueue reads what Kueue says of tj, in a LocalQueue: one discovery request for Kueue's API group (once
// per Client), then at once, where it is served: the namespace's Workloads (tj's is the one it controls), its
// LocalQueue (for the ClusterQueue until Kueue admits the Workload), and while tj is suspended the LocalQueue's
// pending Workloads from Kueue's visibility API (for the position). Only the Workloads must be readable: the
// LocalQueue may be missing (Kueue says so in the Workload), and the visibility API is not served everywhere.
func fetchQueue(ctx context.Context, kc *kueue.Client, c client.Reader, tj *trainer.TrainJob) (*QueueObjects, error) {
	q := &QueueObjects{}
	served, err := kc.Served(ctx)
	if err != nil {
		q.Unreadable = err.Error()
		return q, nil
	}
	if q.Served = served; !served {
		return q, nil
	}
	var (
		wls     []kueue.Workload
		pending []kueue.PendingWorkload
		wlErr   error
		wg      sync.WaitGroup
	)
	lqName := tj.Labels[kueue.QueueLabel]
	wg.Go(func() { wls, wlErr = kc.Workloads(ctx, tj.Namespace) })
	if lqName != "" {
		wg.Go(func() {
			if lq, err := kc.LocalQueue(ctx, tj.Namespace, lqName); err == nil {
				q.LocalQueue = lq
			}
		})
	}
	if lqName != "" && ptr.Deref(tj.Spec.Suspend, false) {
		// Any error leaves the position unknown ("pending"): the visibility API is often not served.
		wg.Go(func() { pending, _ = kc.PendingWorkloads(ctx, tj.Namespace, lqName) })
	}
	wg.Wait()
	switch {
	case wlErr != nil && optional(wlErr):
		q.Unreadable = cmdutil.APIMessage(wlErr)
		return q, nil
	case wlErr != nil:
		return nil, fmt.Errorf("list Kueue's Workloads: %w", wlErr)
	}
	q.Workloads = wls
	if q.Workload = kueue.Of(tj, wls); q.Workload != nil {
		q.Pending = kueue.FindPending(pending, q.Workload.Namespace, q.Workload.Name)
		q.Nodes = fetchAssignedNodes(ctx, c, q.Workload)
	}
	return q, nil
}

// fetchAssignedNodes reads the nodes of the Workload's topology assignment, one request, to tell the domains
// of the level asked for (Kueue names only the nodes when the host is its Topology's lowest level). Nil when it
// has none, or the nodes cannot be read: status then names the nodes alone.
func fetchAssignedNodes(ctx context.Context, c client.Reader, wl *kueue.Workload) []corev1.Node {
	var hosts []string
	for _, ps := range wl.TopologyAssignments() {
		for _, d := range ps.AssignedDomains() {
			if len(ps.Levels) == len(d.Values) && ps.Levels[len(ps.Levels)-1] == corev1.LabelHostname {
				hosts = append(hosts, d.Values[len(d.Values)-1])
			}
		}
	}
	if len(hosts) == 0 {
		return nil
	}
	sel, err := labels.NewRequirement(corev1.LabelHostname, selection.In, hosts)
	if err != nil {
		return nil
	}
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes, client.MatchingLabelsSelector{Selector: labels.NewSelector().Add(*sel)}); err != nil {
		return nil
	}
	return nodes.Items
}

// optional tells whether a read may fail without failing the summary.
func optional(err error) bool {
	return apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || apierrors.IsMethodNotSupported(err)
}
