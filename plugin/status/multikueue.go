package status

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/scheme"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/kueue"
)

// A TrainJob that MultiKueue dispatched (plugin/kueue) runs as a copy on a worker cluster: here, on the
// management cluster, it has no Jobs or pods, and its status is the copy's, brought back by Kueue. status
// reads the rest from the worker, through the kubeconfig Secret MultiKueue itself uses, when the user may
// read it: the copy, its Jobs, pods and Events, and the nodes while a pod cannot be scheduled there. They
// take the place of the management cluster's in the summary, so that the stage's reason, the Pods section
// and the warnings are the worker's, as for a TrainJob that runs here. The Worker line says where it runs,
// and, when the worker cannot be read, why not and how to see it.

// Worker is where a dispatched TrainJob runs.
type Worker struct {
	// Cluster is the worker cluster: the MultiKueueCluster the TrainJob's Workload names (status.clusterName).
	Cluster string `json:"cluster"`
	// Secret is the MultiKueue kubeconfig Secret (namespace/name) the worker is read through.
	Secret string `json:"secret,omitempty"`
	// Read tells whether the worker's objects were read: the jobs, pods and warnings are then the worker's.
	Read bool `json:"read"`
	// Note says why they were not, and how to see them.
	Note string `json:"note,omitempty"`
}

// Line is what the screen says of the worker.
func (w *Worker) Line() string {
	if w.Read {
		return w.Cluster + " (MultiKueue cluster; read through Secret " + w.Secret + ")"
	}
	return w.Cluster + " (MultiKueue cluster): " + w.Note
}

// WorkerObjects are what was read of the worker of a dispatched TrainJob.
type WorkerObjects struct {
	Worker *kueue.Worker
	// TrainJob is the worker's copy; nil when it is not there (not created yet, or deleted once finished) or
	// could not be read.
	TrainJob *trainer.TrainJob
	// Unreadable says why the worker's objects could not be read through the Secret ("" when they were).
	Unreadable string
}

// fetchWorker reads the worker of a dispatched TrainJob whose Workload names one, into in: the worker's
// MultiKueueCluster and Secret (kc.Worker: two requests, once per Client), then Fetch's five requests (six
// while a pod is unschedulable) against the worker, and, with rd.Logs, when a container failed there, one
// more: the end of that container's log, which is where the failure's cause is. The worker's pods are those
// of the JobSet its copy of the TrainJob controls. A
// worker that cannot be read is no error: in.Worker says why.
func fetchWorker(ctx context.Context, rd Reader, in *Objects) error {
	c, kc := rd.Client, rd.Kueue
	tj, q := in.TrainJob, in.Queue
	if kc == nil || !kueue.Dispatched(tj) || q == nil || q.Workload == nil || q.Workload.WorkerCluster() == "" {
		return nil
	}
	w, err := kc.Worker(ctx, q.Workload.WorkerCluster())
	if err != nil {
		return err
	}
	in.Worker = &WorkerObjects{Worker: w}
	if w.Config == nil {
		return nil
	}
	s := scheme.New
	if withScheme, ok := c.(interface{ Scheme() *runtime.Scheme }); ok {
		s = withScheme.Scheme
	}
	wc, err := cmdutil.ClientFor(w.Config, s())
	if err != nil {
		in.Worker.Unreadable = err.Error()
		return nil
	}
	workerRd := Reader{Client: wc}
	if rd.Logs != nil {
		if workerRd.Logs, err = kubernetes.NewForConfig(w.Config); err != nil {
			in.Worker.Unreadable = err.Error()
			return nil
		}
	}
	worker, err := Fetch(ctx, workerRd, tj.Namespace, tj.Name)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		in.Worker.Unreadable = cmdutil.APIMessage(err)
		return nil
	}
	in.Worker.TrainJob = worker.TrainJob
	in.Jobs, in.Pods, in.Nodes = worker.Jobs, worker.Pods, worker.Nodes
	in.JobSet, in.FailureLog = worker.JobSet, worker.FailureLog
	in.Events = append(slices.Clip(in.Events), asManagers(worker.Events, worker.TrainJob, tj)...)
	return nil
}

// asManagers are the worker's Events, those of its copy of the TrainJob made the management cluster's
// TrainJob's: the copy is the TrainJob as it runs.
func asManagers(events []corev1.Event, remote, tj *trainer.TrainJob) []corev1.Event {
	out := make([]corev1.Event, len(events))
	for i, ev := range events {
		if ev.InvolvedObject.UID == remote.UID {
			ev.InvolvedObject.UID = tj.UID
		}
		out[i] = ev
	}
	return out
}

// summarizeWorker is where a dispatched TrainJob runs, nil for any other.
func summarizeWorker(in Objects, terminal bool) *Worker {
	wo := in.Worker
	if wo == nil {
		return nil
	}
	w := &Worker{Cluster: wo.Worker.Cluster, Secret: wo.Worker.Secret}
	tj := in.TrainJob
	switch {
	case wo.Worker.Config == nil:
		w.Note = wo.Worker.Unreachable + "; to see its pods, " + wo.Worker.Reach("status", tj.Namespace, tj.Name)
	case wo.Unreadable != "":
		w.Note = "cannot read it through Secret " + w.Secret + ": " + wo.Unreadable
	case wo.TrainJob == nil && terminal:
		w.Note = "MultiKueue deleted the TrainJob's copy there, with its pods and their logs, once it finished"
	case wo.TrainJob == nil:
		w.Note = "MultiKueue has not created the TrainJob's copy there yet"
	default:
		w.Read = true
	}
	return w
}
