package list

import (
	"cmp"
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	cliprinters "k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/optimizationjob"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/printers"
)

// optimizationColumns are the columns of list --optimizations; those of priority 1 are -o wide's.
var optimizationColumns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name"},
	{Name: "Status", Type: "string", Description: "Complete or Failed (its conditions), else Running once it has trials, Pending before"},
	{Name: "Trials", Type: "string", Description: "Trials created of numTrials"},
	{Name: "Complete", Type: "integer"},
	{Name: "Running", Type: "integer"},
	{Name: "Failed", Type: "integer"},
	{Name: "Best", Type: "string", Description: "The best trial's last report of the objective metric"},
	{Name: "Age", Type: "string"},
	{Name: "Objective", Type: "string", Priority: 1},
	{Name: "Best Trial", Type: "string", Priority: 1, Description: "status.result, else the Complete trial with the best report"},
	{Name: "Reason", Type: "string", Priority: 1},
}

// runOptimizations lists OptimizationJobs, one table of their own as kubectl get shows one kind, in a LIST of
// OptimizationJobs per page and, for the table, one LIST of the TrainJobs of the namespace (their trials).
func (o *ListOptions) runOptimizations(ctx context.Context) error {
	var items []trainer.OptimizationJob
	if err := eachPage(ctx, o, func(l *trainer.OptimizationJobList) { items = append(items, l.Items...) }); err != nil {
		return describeOptimizationListError(err, o.Namespace)
	}
	if len(items) == 0 {
		o.noneFound()
		return nil
	}
	if o.printer != nil {
		objs := make([]client.Object, len(items))
		for i := range items {
			objs[i] = &items[i]
		}
		return o.printObjects(objs, trainer.OptimizationJobKind, true)
	}
	trials, err := optimizationjob.ListTrials(ctx, o.Client, o.Namespace)
	if err != nil {
		return o.describeListError(err)
	}
	byOwner := optimizationjob.ByOwner(trials)
	now := o.Clock.Now()
	t := &metav1.Table{ColumnDefinitions: optimizationColumns}
	for i := range items {
		oj := &items[i]
		s := optimizationjob.Summarize(oj, byOwner[oj.UID], now)
		best, bestTrial := printers.None, printers.None
		if s.Best != nil {
			bestTrial = s.Best.Name
			if s.Best.Objective != "" {
				best = s.Best.Objective
			}
		}
		t.Rows = append(t.Rows, metav1.TableRow{Object: runtime.RawExtension{Object: oj}, Cells: []any{
			oj.Name, s.State, fmt.Sprintf("%d/%d", s.Progress.Created, s.NumTrials), s.Progress.Complete, s.Progress.Running,
			s.Progress.Failed, best, s.Age, objective(s), bestTrial, cmp.Or(s.Reason, printers.None)}})
	}
	w := cliprinters.GetNewTabWriter(o.Streams.Out)
	table := cliprinters.NewTablePrinter(cliprinters.PrintOptions{NoHeaders: o.NoHeaders, Wide: o.wide, WithNamespace: o.AllNamespaces})
	if err := table.PrintObj(t, w); err != nil {
		return err
	}
	return w.Flush()
}

// objective is the metric and its direction: val_loss (min).
func objective(s *optimizationjob.Summary) string {
	if s.Objective.Metric == "" {
		return printers.None
	}
	dir := "min"
	if s.Objective.Direction == trainer.ObjectiveDirectionMaximize {
		dir = "max"
	}
	return s.Objective.Metric + " (" + dir + ")"
}

// describeOptimizationListError says what an error of the LIST of OptimizationJobs means: a cluster without their
// CRD (upstream's is a separate install), or a user without the right.
func describeOptimizationListError(err error, namespace string) error {
	switch {
	case meta.IsNoMatchError(err) || apierrors.IsNotFound(err):
		return fmt.Errorf("this cluster serves no OptimizationJobs: the CRD %s is not installed (kubectl trainjob install installs it)", optimizationjob.Resource)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("%s (ask for a Role that grants it on %s in namespace %q)", cmdutil.APIMessage(err), optimizationjob.Resource, namespace)
	}
	return err
}
