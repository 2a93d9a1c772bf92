package status

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/optimizationjob"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/printers"
)

// runOptimization prints the status of the OptimizationJob name, in two requests: the OptimizationJob and the
// namespace's TrainJobs (its trials are those it controls). tried is the error of the TrainJob of the same name
// when status looked for one first: when there is no OptimizationJob either (or the cluster serves none), that
// error is the one to show.
func (o *StatusOptions) runOptimization(ctx context.Context, name string, tried error) error {
	oj := &trainer.OptimizationJob{}
	if err := o.Client.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: name}, oj); err != nil {
		if tried != nil && (apierrors.IsNotFound(err) || meta.IsNoMatchError(err)) {
			return tried
		}
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("%s %q not found in namespace %q (see `kubectl trainjob list --optimizations -n %s`, or pass -n NAMESPACE)",
				optimizationjob.Resource, name, o.Namespace, o.Namespace)
		}
		return err
	}
	if o.Watch {
		return fmt.Errorf("-w follows a TrainJob, and %s is an OptimizationJob: follow one of its trials (kubectl trainjob status TRIAL -w), or run status again", name)
	}
	trials, err := optimizationjob.ListTrials(ctx, o.Client, o.Namespace)
	if err != nil {
		return err
	}
	s := optimizationjob.Summarize(oj, trials, o.Clock.Now())
	if o.Output != "" {
		return printers.Document(o.Streams.Out, o.Output, s)
	}
	return RenderOptimization(o.Streams.Out, s)
}

// RenderOptimization writes the status screen of an OptimizationJob: its search, its progress, the best trial
// and a table of the trials, best first.
func RenderOptimization(w io.Writer, s *optimizationjob.Summary) error {
	direction := "minimize"
	if s.Objective.Direction == trainer.ObjectiveDirectionMaximize {
		direction = "maximize"
	}
	state := s.State
	if s.Reason != "" {
		state += " (" + s.Reason + ")"
	}
	fmt.Fprintf(w, "OptimizationJob %s (namespace %s): %s, age %s\n", printers.Escape(s.Name), printers.Escape(s.Namespace), printers.Escape(state), s.Age)
	if s.Message != "" {
		fmt.Fprintf(w, "            %s\n", printers.Escape(s.Message))
	}
	fmt.Fprintf(w, "Objective:  %s, %s\n", printers.Escape(s.Objective.Metric), direction)
	fmt.Fprintf(w, "Search:     %s; %d trials, %d at once\n", s.Algorithm, s.NumTrials, s.Parallel)
	p := s.Progress
	fmt.Fprintf(w, "Trials:     %d of %d created: %d complete, %d running, %d failed\n", p.Created, s.NumTrials, p.Complete, p.Running, p.Failed)
	best := "none yet (no trial has completed with a report of " + s.Objective.Metric + ")"
	if s.Best != nil {
		best = fmt.Sprintf("%s: %s %s, %s", s.Best.Name, s.Objective.Metric, cmp.Or(s.Best.Objective, printers.None),
			optimizationjob.Assignments(s.Best.Parameters))
	}
	fmt.Fprintf(w, "Best:       %s\n", printers.Escape(best))
	if len(s.Trials) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	var names []string
	for _, t := range s.Trials {
		for _, a := range t.Parameters {
			if !slices.Contains(names, a.Name) {
				names = append(names, a.Name)
			}
		}
	}
	headers := []string{"TRIAL", "STAGE", strings.ToUpper(s.Objective.Metric)}
	for _, n := range names {
		headers = append(headers, strings.ToUpper(n))
	}
	table := printers.NewTable(w, "", headers...)
	for _, t := range s.Trials {
		row := []string{t.Name, string(t.Stage), t.Objective}
		for _, name := range names {
			v := ""
			if i := slices.IndexFunc(t.Parameters, func(a trainer.ParameterAssignment) bool { return a.Name == name }); i >= 0 {
				v = t.Parameters[i].Value
			}
			row = append(row, v)
		}
		table.Row(row...)
	}
	return table.Flush()
}
