package list

import (
	"context"
	"slices"
	"sync"
	"time"

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
	Namespace string      `json:"namespace"`
	Name      string      `json:"name"`
	Stage     stage.Stage `json:"stage"`
	Reason    string      `json:"reason"`
	Runtime   string      `json:"runtime"`
	Nodes     string      `json:"nodes"`
	GPUs      string      `json:"gpus"`
	// Percentage is the trainer's progressPercentage, when it reports one.
	Percentage *int32 `json:"percentage,omitempty"`
	Progress   string `json:"progress"`
	ETA        string `json:"eta"`
	Queue      string `json:"queue"`
	// Position is where a Queued TrainJob's Workload is in its queues, as status says it ("pending" when
	// Kueue's visibility API does not tell); "" when it is not Queued.
	Position string      `json:"position,omitempty"`
	Created  metav1.Time `json:"created"`
	Duration string      `json:"duration"`
}

// Rows makes list's rows of TrainJobs read by c, sized with fw (the pipeline the operator runs); each runtime
// is read once for all the rows it makes.
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

// Of are the rows of items at time now; without InQueues, with the stages the TrainJobs alone tell (no Kueue
// Workloads read).
func (r *Rows) Of(ctx context.Context, items []trainer.TrainJob, now time.Time) ([]Row, error) {
	r.nodes.prefetch(ctx, items)
	rows := make([]Row, 0, len(items))
	var q *queues
	if r.kueue != nil && slices.ContainsFunc(items, func(tj trainer.TrainJob) bool { return kueue.Queued(&tj) }) {
		var err error
		if q, err = readQueues(ctx, r.kueue, r.namespace, items); err != nil {
			return nil, err
		}
		q.readPositions(ctx, items)
	}
	for i := range items {
		tj := &items[i]
		n, gpus := r.nodes.of(ctx, tj)
		st := q.stageOf(tj)
		row := Row{Namespace: tj.Namespace, Name: tj.Name, Stage: st, Reason: q.reasonOf(tj, st), Runtime: runtimeOf(tj),
			Nodes: n, GPUs: gpus, Progress: progressOf(tj), ETA: etaOf(tj), Queue: queueOf(tj),
			Position: q.positionOf(tj), Created: tj.CreationTimestamp, Duration: durationOf(tj, now)}
		if ts := tj.Status.TrainerStatus; ts != nil {
			row.Percentage = ts.ProgressPercentage
		}
		rows = append(rows, row)
	}
	return rows, nil
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
				for i := range pending {
					if pending[i].Name == wl.Name {
						q.positions[tj.UID] = pending[i].Position(cq, lq.name)
					}
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
