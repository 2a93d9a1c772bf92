package status

import (
	"context"
	"slices"
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
)

// Fetch reads the TrainJob and everything Summarize needs, in four requests made at once: the TrainJob, the
// Jobs and the pods of its JobSet, and the namespace's Events. The Jobs and Events are optional: a user
// without the right to read them, or a TrainJob whose controller has not built them yet, still gets a
// summary (stage times then come from the pods). The JobSet itself is not read: the TrainJob holds its
// counts (jobsStatus), and its Jobs and pods show that it exists. Only while a pod cannot be scheduled, a
// fifth request reads the nodes, to tell whether taints alone keep it off them; a user who may not read
// nodes gets the scheduler's message instead.
func Fetch(ctx context.Context, c client.Reader, namespace, name string) (Objects, error) {
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
	if slices.ContainsFunc(in.Pods, func(p corev1.Pod) bool { _, ok := unschedulable(&p); return ok }) {
		var nodes corev1.NodeList
		if err := c.List(ctx, &nodes); err != nil && !optional(err) {
			return in, err
		}
		in.Nodes = nodes.Items
	}
	return in, nil
}

// optional tells whether a read may fail without failing the summary.
func optional(err error) bool {
	return apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || apierrors.IsMethodNotSupported(err)
}
