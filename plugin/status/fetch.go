package status

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/kueue"
)

// Fetch reads the TrainJob and everything Summarize needs, in four requests made at once: the TrainJob, the
// Jobs and the pods of its JobSet, and the namespace's Events. The Jobs and Events are optional: a user
// without the right to read them, or a TrainJob whose controller has not built them yet, still gets a
// summary (stage times then come from the pods). The JobSet itself is not read: the TrainJob holds its
// counts (jobsStatus), and its Jobs and pods show that it exists.
//
// Then, at once: only while a pod cannot be scheduled, a fifth request reads the nodes, to tell whether
// taints alone keep it off them (a user who may not read nodes gets the scheduler's message instead); and
// only for a TrainJob in a Kueue LocalQueue, with kc, at most four more (fetchQueue). At most nine in all,
// but for a TrainJob that MultiKueue dispatched to a worker cluster: then, once its Workload names the worker,
// the worker's MultiKueueCluster and kubeconfig Secret (once per kc) and these four or five requests against
// the worker instead of the nodes (fetchWorker): at most fifteen.
func Fetch(ctx context.Context, c client.Reader, kc *kueue.Client, namespace, name string) (Objects, error) {
	var (
		tj                             *trainer.TrainJob
		jobs                           batchv1.JobList
		pods                           corev1.PodList
		events                         corev1.EventList
		tjErr, jobsErr, podsErr, evErr error
		wg                             sync.WaitGroup
	)
	children := []client.ListOption{client.InNamespace(namespace), client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: name}}
	wg.Go(func() { tj, tjErr = cmdutil.GetTrainJob(ctx, c, namespace, name) })
	wg.Go(func() { jobsErr = c.List(ctx, &jobs, children...) })
	wg.Go(func() { podsErr = c.List(ctx, &pods, children...) })
	wg.Go(func() { evErr = c.List(ctx, &events, client.InNamespace(namespace)) })
	wg.Wait()
	// The TrainJob's own error says best what is wrong: not found, or no right to read it.
	if tjErr != nil {
		return Objects{}, tjErr
	}
	in := Objects{TrainJob: tj, Jobs: jobs.Items, Pods: pods.Items, Events: events.Items}
	for _, err := range []error{jobsErr, evErr} {
		if err != nil && !optional(err) {
			return in, err
		}
	}
	if podsErr != nil {
		return in, podsErr
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
	if kc != nil && kueue.Queued(tj) {
		wg.Go(func() { in.Queue, queueErr = fetchQueue(ctx, kc, tj) })
	}
	wg.Wait()
	if err := errors.Join(nodesErr, queueErr); err != nil {
		return in, err
	}
	return in, fetchWorker(ctx, c, kc, &in)
}

// fetchQueue reads what Kueue says of tj, in a LocalQueue: one discovery request for Kueue's API group (once
// per Client), then at once, where it is served: the namespace's Workloads (tj's is the one it controls), its
// LocalQueue (for the ClusterQueue until Kueue admits the Workload), and while tj is suspended the LocalQueue's
// pending Workloads from Kueue's visibility API (for the position). Only the Workloads must be readable: the
// LocalQueue may be missing (Kueue says so in the Workload), and the visibility API is not served everywhere.
func fetchQueue(ctx context.Context, kc *kueue.Client, tj *trainer.TrainJob) (*QueueObjects, error) {
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
		for i := range pending {
			if pending[i].Name == q.Workload.Name {
				q.Pending = &pending[i]
			}
		}
	}
	return q, nil
}

// optional tells whether a read may fail without failing the summary.
func optional(err error) bool {
	return apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || apierrors.IsMethodNotSupported(err)
}
