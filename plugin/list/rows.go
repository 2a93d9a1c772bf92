package list

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/stage"
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
	Percentage *int32      `json:"percentage,omitempty"`
	Progress   string      `json:"progress"`
	ETA        string      `json:"eta"`
	Queue      string      `json:"queue"`
	Created    metav1.Time `json:"created"`
	Duration   string      `json:"duration"`
}

// Rows makes list's rows of TrainJobs read by c, sized with fw (the pipeline the operator runs); each runtime
// is read once for all the rows it makes.
type Rows struct {
	nodes *runtimeDefaults
}

// NewRows reads runtimes with c and sizes TrainJobs with fw.
func NewRows(c client.Reader, fw *pipeline.Framework) *Rows {
	return &Rows{nodes: newRuntimeDefaults(c, fw)}
}

// Of are the rows of items at time now, with the stages the TrainJobs alone tell (no Kueue Workloads read).
func (r *Rows) Of(ctx context.Context, items []trainer.TrainJob, now time.Time) []Row {
	r.nodes.prefetch(ctx, items)
	rows := make([]Row, 0, len(items))
	var q *queues
	for i := range items {
		tj := &items[i]
		n, gpus := r.nodes.of(ctx, tj)
		st := q.stageOf(tj)
		row := Row{Namespace: tj.Namespace, Name: tj.Name, Stage: st, Reason: q.reasonOf(tj, st), Runtime: runtimeOf(tj),
			Nodes: n, GPUs: gpus, Progress: progressOf(tj), ETA: etaOf(tj), Queue: queueOf(tj),
			Created: tj.CreationTimestamp, Duration: durationOf(tj, now)}
		if ts := tj.Status.TrainerStatus; ts != nil {
			row.Percentage = ts.ProgressPercentage
		}
		rows = append(rows, row)
	}
	return rows
}
