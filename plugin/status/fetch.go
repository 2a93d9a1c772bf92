package status

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/list"
)

// Fetch reads the TrainJob and everything Summarize needs. The JobSet and the Jobs are optional: a user
// without the right to read them, or a TrainJob whose controller has not built them yet, still gets a
// summary (stage times then come from the pods).
func Fetch(ctx context.Context, c client.Reader, namespace, name string) (Objects, error) {
	tj, err := list.GetTrainJob(ctx, c, namespace, name)
	if err != nil {
		return Objects{}, err
	}
	in := Objects{TrainJob: tj}
	js := &jobsetv1alpha2.JobSet{}
	switch err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, js); {
	case err == nil:
		in.JobSet = js
	case !optional(err):
		return in, err
	}
	children := client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: name}
	jobs := &batchv1.JobList{}
	if err := c.List(ctx, jobs, client.InNamespace(namespace), children); err != nil && !optional(err) {
		return in, err
	}
	in.Jobs = jobs.Items
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(namespace), children); err != nil {
		return in, err
	}
	in.Pods = pods.Items
	events := &corev1.EventList{}
	if err := c.List(ctx, events, client.InNamespace(namespace)); err != nil && !optional(err) {
		return in, err
	}
	in.Events = events.Items
	return in, nil
}

// optional tells whether a read may fail without failing the summary.
func optional(err error) bool {
	return apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || apierrors.IsMethodNotSupported(err)
}
