package describe

import (
	"context"
	"fmt"
	"io"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/admission"
	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/dryrun"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/optimization"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/optimization/search"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/optimizationjob"
)

// Description is what describe-pipeline shows.
type Description struct {
	TrainJob string        `json:"trainJob"`
	Runtime  string        `json:"runtime"`
	Trial    *Trial        `json:"trial,omitempty"`
	Now      *Now          `json:"now,omitempty"`
	Phases   []PhaseReport `json:"phases"`
	Warnings []string      `json:"warnings,omitempty"`
	Error    string        `json:"error,omitempty"`
}

// Trial is what the controller of an OptimizationJob injected into a TrainJob that is its trial (KEP-2605): the
// assignment, as its annotation holds it, and the KUBEFLOW_TRAINER_OPT_<NAME> variables of spec.trainer.env,
// which the pipeline puts into the trainer's containers as any env of the TrainJob.
type Trial struct {
	OptimizationJob string `json:"optimizationJob"`
	// Index is the trial's place in the search (our controller's label), nil when unknown.
	Index *int `json:"index,omitempty"`
	// Parameters are the assignment of the annotation trainer.kubeflow.org/trial-parameters, if any.
	Parameters []trainer.ParameterAssignment `json:"parameters,omitempty"`
	Env        []corev1.EnvVar               `json:"env,omitempty"`
}

// trialOf is what an OptimizationJob injected into tj, nil when no OptimizationJob controls it.
func trialOf(tj *trainer.TrainJob) *Trial {
	ref := metav1.GetControllerOf(tj)
	if ref == nil || ref.Kind != trainer.OptimizationJobKind {
		return nil
	}
	t := &Trial{OptimizationJob: ref.Name}
	if i, ok := optimization.TrialIndex(tj); ok {
		t.Index = &i
	}
	if a, err := optimization.TrialParameters(tj); err == nil {
		t.Parameters = a
	}
	if tj.Spec.Trainer != nil {
		for _, e := range tj.Spec.Trainer.Env {
			if strings.HasPrefix(e.Name, search.EnvPrefix) {
				t.Env = append(t.Env, e)
			}
		}
	}
	return t
}

// PhaseReport is one phase of the framework.
type PhaseReport struct {
	Name   string        `json:"name"`
	When   string        `json:"when"`
	Points []PointReport `json:"extensionPoints"`
}

// PointReport is one extension point and its plugins in execution order.
type PointReport struct {
	Name    string         `json:"name"`
	Plugins []PluginReport `json:"plugins"`
}

// PluginReport is what one plugin did at one point.
type PluginReport struct {
	Name    string            `json:"name"`
	Changes []pipeline.Change `json:"changes,omitempty"`
	Objects []string          `json:"objects,omitempty"`
	Result  string            `json:"result,omitempty"`
}

// Describe runs the PreExecution and Build phases offline with a trace and
// reports every extension point.
func Describe(ctx context.Context, fw *pipeline.Framework, tj *trainer.TrainJob, runtimes []*pipeline.Runtime) (*Description, error) {
	rt, err := dryrun.FindRuntime(tj, runtimes)
	if err != nil {
		return nil, err
	}
	d := &Description{
		TrainJob: tj.Namespace + "/" + tj.Name,
		Runtime:  rt.GroupKind().Kind + "/" + rt.Object.GetName() + frameworkOf(rt.Object),
		Trial:    trialOf(tj),
	}
	tr := &pipeline.Trace{}
	warnings, verrs := fw.Validate(ctx, rt, nil, tj)
	d.Warnings = warnings
	var buildErr error
	if len(verrs) == 0 {
		_, _, buildErr = fw.Build(ctx, tj, rt, pipeline.BuildOptions{Trace: tr})
		if buildErr != nil {
			d.Error = buildErr.Error()
		}
	} else {
		d.Error = admission.Denied(verrs.ToAggregate()).Error()
	}
	for _, ph := range pipeline.Phases {
		pr := PhaseReport{Name: ph.Name, When: ph.When}
		for _, point := range ph.Points {
			pt := PointReport{Name: string(point)}
			runs := tr.ByPoint(point)
			for _, name := range fw.Plugins(point) {
				rep := PluginReport{Name: name}
				switch point {
				case pipeline.CustomValidation:
					rep.Result = "passed"
					if len(verrs) > 0 {
						rep.Result = "refused (see error)"
					}
				case pipeline.WatchExtension, pipeline.TrainJobStatus:
				default:
					rep.Result = "not run"
					for _, r := range runs {
						if r.Plugin == name {
							rep.Changes, rep.Objects, rep.Result = r.Changes, r.Objects, resultOf(r)
						}
					}
				}
				pt.Plugins = append(pt.Plugins, rep)
			}
			pr.Points = append(pr.Points, pt)
		}
		d.Phases = append(d.Phases, pr)
	}
	return d, nil
}

func resultOf(r pipeline.Run) string {
	switch {
	case r.Error != "":
		return "error: " + r.Error
	case len(r.Changes) == 0 && len(r.Objects) == 0:
		return "no change"
	}
	return ""
}

func frameworkOf(o client.Object) string {
	if f := o.GetLabels()[trainer.FrameworkLabel]; f != "" {
		return " (" + f + ")"
	}
	return ""
}

// WriteText prints the description for people.
func (d *Description) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "TrainJob:  %s\nRuntime:   %s\n", d.TrainJob, d.Runtime)
	if t := d.Trial; t != nil {
		b.WriteString("Trial:     ")
		if t.Index != nil {
			fmt.Fprintf(&b, "%d of ", *t.Index)
		}
		fmt.Fprintf(&b, "%s%s", optimizationjob.Prefix, t.OptimizationJob)
		if len(t.Parameters) > 0 {
			fmt.Fprintf(&b, ": %s (annotation %s)", optimizationjob.Assignments(t.Parameters), optimization.ParametersAnnotation)
		}
		b.WriteString("\n")
		if len(t.Env) > 0 {
			env := make([]string, len(t.Env))
			for i, e := range t.Env {
				env[i] = e.Name + "=" + e.Value
			}
			fmt.Fprintf(&b, "           injected as spec.trainer.env %s\n", strings.Join(env, " "))
		}
	}
	if d.Now != nil {
		fmt.Fprintf(&b, "Now:       %s", d.Now.Stage)
		if len(d.Now.Conditions) > 0 {
			fmt.Fprintf(&b, " — %s", strings.Join(d.Now.Conditions, ", "))
		}
		b.WriteString("\n")
	}
	for _, ph := range d.Phases {
		fmt.Fprintf(&b, "\n%s — %s\n", ph.Name, ph.When)
		for _, pt := range ph.Points {
			fmt.Fprintf(&b, "  %s\n", pt.Name)
			if len(pt.Plugins) == 0 {
				b.WriteString("    (no plugin)\n")
			}
			for i, p := range pt.Plugins {
				fmt.Fprintf(&b, "    %d. %s", i+1, p.Name)
				if p.Result != "" {
					fmt.Fprintf(&b, ": %s", p.Result)
				}
				b.WriteString("\n")
				for _, c := range p.Changes {
					fmt.Fprintf(&b, "         %-28s %s\n", c.Where, c.What)
				}
				for _, o := range p.Objects {
					fmt.Fprintf(&b, "         builds %s\n", o)
				}
			}
		}
	}
	for _, wn := range d.Warnings {
		fmt.Fprintf(&b, "\nWarning: %s\n", wn)
	}
	if d.Error != "" {
		fmt.Fprintf(&b, "\nError: %s\n", d.Error)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
