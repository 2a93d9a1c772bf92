package list

import (
	"context"
	"slices"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/stage"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/kueue"
)

// Row is one TrainJob as list's table shows it, as values: for the dashboard, which draws the same cells in a
// browser. Its cells are list's, made by the same code; a dash means unknown, as in the table.
type Row struct {
	Namespace string
	Name      string
	Stage     stage.Stage
	Reason    string
	Runtime   string
	Nodes     string
	GPUs      string
	// Percentage is the trainer's progressPercentage, when it reports one.
	Percentage *int32
	ETA        string
	Queue      string
	// Position is where a Queued TrainJob's Workload is in its queues, as status says it ("pending" when
	// Kueue's visibility API does not tell); "" when it is not Queued.
	Position string
	Created  metav1.Time
}

// Rows makes list's rows of TrainJobs read by c, sized with fw (the pipeline the operator runs); each runtime
// is read once for all the rows it makes. A row is made of each TrainJob alone (Alone), when it changes; the
// rows of those in a Kueue LocalQueue are completed from their Workloads when shown (Queue).
type Rows struct {
	nodes *runtimeDefaults
	// kueue reads the Workloads of namespace ("": every namespace), for the Queued stage and the position;
	// nil reads none.
	kueue     *kueue.Client
	namespace string
}

// NewRows reads runtimes with c and sizes TrainJobs with fw.
func NewRows(c client.Reader, fw *pipeline.Framework) *Rows {
	return &Rows{nodes: newRuntimeDefaults(c, fw)}
}

// InQueues makes rows read the Workloads of the TrainJobs of namespace ("": every namespace) in a Kueue
// LocalQueue with kc: a Queued stage and why, and where it is in the queues.
func (r *Rows) InQueues(kc *kueue.Client, namespace string) *Rows {
	r.kueue, r.namespace = kc, namespace
	return r
}

// Alone is tj's row as the TrainJob alone tells it: its stage without Kueue's Workload, and no position in
// the queues (Queue completes the rows of the TrainJobs in a LocalQueue). A caller that keeps rows makes
// the row of each TrainJob once, when it changes.
func (r *Rows) Alone(ctx context.Context, tj *trainer.TrainJob) Row {
	n, gpus := r.nodes.of(ctx, tj)
	st := stage.Of(tj)
	row := Row{Namespace: tj.Namespace, Name: tj.Name, Stage: st, Reason: reasonOf(tj, st), Runtime: runtimeOf(tj),
		Nodes: n, GPUs: gpus, ETA: etaOf(tj), Queue: queueOf(tj), Created: tj.CreationTimestamp}
	if ts := tj.Status.TrainerStatus; ts != nil {
		row.Percentage = ts.ProgressPercentage
	}
	return row
}

// Queue sets the stage, reason and position of the rows of the TrainJobs in a Kueue LocalQueue (rows[i] is of
// items[i]) as their Workloads tell, with InQueues; it reads the Workloads only when some TrainJob is in one.
// items need hold only what ForQueue keeps of each.
func (r *Rows) Queue(ctx context.Context, items []trainer.TrainJob, rows []Row) error {
	if r.kueue == nil || !slices.ContainsFunc(items, func(tj trainer.TrainJob) bool { return kueue.Queued(&tj) }) {
		return nil
	}
	q, err := readQueues(ctx, r.kueue, r.namespace, items)
	if err != nil || q == nil {
		return err
	}
	q.readPositions(ctx, items)
	for i := range items {
		if tj := &items[i]; kueue.Queued(tj) {
			st := q.stageOf(tj)
			rows[i].Stage, rows[i].Reason, rows[i].Position = st, q.reasonOf(tj, st), q.positionOf(tj)
		}
	}
	return nil
}

// ForQueue is what Queue reads of tj, when it is in a Kueue LocalQueue (nil when it is not): a caller that
// keeps rows rather than TrainJobs keeps this much of each TrainJob in a queue.
func ForQueue(tj *trainer.TrainJob) *trainer.TrainJob {
	if !kueue.Queued(tj) {
		return nil
	}
	return &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: tj.Namespace, Name: tj.Name, UID: tj.UID, Labels: map[string]string{kueue.QueueLabel: tj.Labels[kueue.QueueLabel]}},
		Spec:       trainer.TrainJobSpec{Suspend: tj.Spec.Suspend},
		Status:     trainer.TrainJobStatus{Conditions: tj.Status.Conditions, JobsStatus: tj.Status.JobsStatus},
	}
}

// readPositions reads where the Queued TrainJobs of items are in their queues, as status does: for each
// LocalQueue that holds one, the LocalQueue (its ClusterQueue) and its pending Workloads from Kueue's
// visibility API, at once. An error leaves the position pending: the visibility API is often not served.
func (q *queues) readPositions(ctx context.Context, items []trainer.TrainJob) {
	if q == nil {
		return
	}
	type localQueue struct{ namespace, name string }
	byQueue := map[localQueue][]*trainer.TrainJob{}
	for i := range items {
		if tj := &items[i]; q.stageOf(tj) == stage.Queued {
			lq := localQueue{tj.Namespace, tj.Labels[kueue.QueueLabel]}
			byQueue[lq] = append(byQueue[lq], tj)
		}
	}
	q.positions = map[types.UID]string{}
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for lq, tjs := range byQueue {
		wg.Go(func() {
			var clusterQueue string
			if l, err := q.kueue.LocalQueue(ctx, lq.namespace, lq.name); err == nil {
				clusterQueue = l.Spec.ClusterQueue
			}
			pending, _ := q.kueue.PendingWorkloads(ctx, lq.namespace, lq.name)
			mu.Lock()
			defer mu.Unlock()
			for _, tj := range tjs {
				q.positions[tj.UID] = kueue.PositionPending
				wl := q.workloads[tj.UID]
				if wl == nil {
					continue
				}
				cq := clusterQueue
				if c := wl.ClusterQueue(); c != "" {
					cq = c
				}
				if p := kueue.FindPending(pending, wl.Namespace, wl.Name); p != nil {
					q.positions[tj.UID] = p.Position(cq, lq.name)
				}
			}
		})
	}
	wg.Wait()
}

// positionOf is where tj is in its queues, when Queued and readPositions read it.
func (q *queues) positionOf(tj *trainer.TrainJob) string {
	if q == nil {
		return ""
	}
	return q.positions[tj.UID]
}
