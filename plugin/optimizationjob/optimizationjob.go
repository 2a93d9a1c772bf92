// Package optimizationjob is what the commands show of an OptimizationJob (KEP-2605, kubectl trainjob
// optimize): how far its search is (trials created, complete, running, failed), the best trial so far and
// every trial with its objective and parameters. status, list and delete read it from here.
//
// It reads only what upstream's API defines, so that it works against upstream's controller as against ours: a
// trial is a TrainJob the OptimizationJob controls (its controller reference), whatever its labels; its
// parameters are its KUBEFLOW_TRAINER_OPT_<NAME> environment variables (KEP-2605) when it lacks our controller's
// annotation; the best trial is status.result when the controller wrote one. Our controller's labels and
// annotations (pkg/optimization) only add: a trial's index, and trials deleted by hand counted as created.
package optimizationjob

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/optimization"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/optimization/search"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/stage"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/printers"
)

// Resource is how kubectl names the OptimizationJob resource, and Prefix how a command's argument names one
// (kubectl's TYPE/NAME): `status optimizationjob/NAME`.
const (
	Resource = "optimizationjobs.trainer.kubeflow.org"
	Prefix   = "optimizationjob/"
)

// NameOf is NAME of an argument TYPE/NAME whose TYPE is the OptimizationJob's, as kubectl spells it (kind,
// plural, or either with the group); false for any other argument.
func NameOf(arg string) (string, bool) {
	typ, name, ok := strings.Cut(arg, "/")
	if !IsType(typ) {
		return "", false
	}
	return name, ok && name != ""
}

// IsType says whether TYPE of an argument TYPE/NAME is the OptimizationJob's (NameOf); completion asks it of
// an argument whose NAME is still being typed.
func IsType(typ string) bool {
	switch strings.ToLower(typ) {
	case "optimizationjob", "optimizationjobs", "optimizationjob.trainer.kubeflow.org", Resource:
		return true
	}
	return false
}

// States of an OptimizationJob: Complete and Failed are its terminal conditions (KEP-2605 §7.4); Running while it
// has trials, Pending before.
const (
	Pending  = "Pending"
	Running  = "Running"
	Complete = optimization.Complete
	Failed   = optimization.Failed
)

// Summary is what the commands show of an OptimizationJob.
type Summary struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	State     string `json:"state"`
	// Reason and Message are those of the condition behind State, or of Created=False (the controller cannot
	// create the next trial).
	Reason    string            `json:"reason,omitempty"`
	Message   string            `json:"message,omitempty"`
	Age       string            `json:"age"`
	Objective trainer.Objective `json:"objective"`
	Algorithm string            `json:"algorithm"`
	NumTrials int32             `json:"numTrials"`
	Parallel  int32             `json:"parallelTrials"`
	Progress  Progress          `json:"progress"`
	// Best is the trial status.result names, or while it names none the Complete trial whose last report of the
	// objective is best (the controller's choice, by the same rule); nil while there is none.
	Best *Trial `json:"best,omitempty"`
	// Trials are the trials that exist, best objective first, those without a report last in the order they
	// were created.
	Trials []Trial `json:"trials"`
}

// Progress counts the trials.
type Progress struct {
	// Created counts the trials created, those since deleted included when the controller counts them (our
	// controller's index labels and annotation); the others count the trials that exist.
	Created  int `json:"created"`
	Complete int `json:"complete"`
	Running  int `json:"running"`
	Failed   int `json:"failed"`
}

// Trial is one trial: its TrainJob's name and stage, its parameters and its last report of the objective.
type Trial struct {
	Name string `json:"name"`
	// Index is the trial's place in the search (our controller's label); nil when unknown.
	Index      *int                          `json:"index,omitempty"`
	Stage      stage.Stage                   `json:"stage"`
	Parameters []trainer.ParameterAssignment `json:"parameters"`
	// Objective is the last value of the objective's metric the trial reported (status.trainerStatus.metrics);
	// empty when none.
	Objective string `json:"objective,omitempty"`

	value   *float64
	created metav1.Time
}

// ListTrials lists the TrainJobs of namespace ("": every namespace) that OptimizationJobs may control, in one
// request: Trials picks each one's own. All of them, not those of our controller's label, as upstream's controller
// may label its trials otherwise.
func ListTrials(ctx context.Context, c client.Reader, namespace string) ([]trainer.TrainJob, error) {
	l := &trainer.TrainJobList{}
	if err := c.List(ctx, l, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	return slices.DeleteFunc(l.Items, func(tj trainer.TrainJob) bool { return controllerUID(&tj) == "" }), nil
}

// ByOwner groups trainJobs by the UID of the OptimizationJob that controls them.
func ByOwner(trainJobs []trainer.TrainJob) map[types.UID][]trainer.TrainJob {
	m := map[types.UID][]trainer.TrainJob{}
	for _, tj := range trainJobs {
		if uid := controllerUID(&tj); uid != "" {
			m[uid] = append(m[uid], tj)
		}
	}
	return m
}

// controllerUID is the UID of the OptimizationJob that controls tj, empty when none does.
func controllerUID(tj *trainer.TrainJob) types.UID {
	ref := metav1.GetControllerOf(tj)
	if ref == nil || ref.Kind != trainer.OptimizationJobKind || !strings.HasPrefix(ref.APIVersion, trainer.GroupVersion.Group+"/") {
		return ""
	}
	return ref.UID
}

// Summarize summarizes oj and its trials, the TrainJobs of trainJobs it controls.
func Summarize(oj *trainer.OptimizationJob, trainJobs []trainer.TrainJob, now time.Time) *Summary {
	s := &Summary{
		Name: oj.Name, Namespace: oj.Namespace, Age: printers.Age(oj.CreationTimestamp, now),
		NumTrials: oj.Spec.NumTrials, Parallel: oj.Spec.ParallelTrials, Algorithm: algorithm(oj), Trials: []Trial{},
	}
	if len(oj.Spec.Objectives) > 0 {
		s.Objective = oj.Spec.Objectives[0]
	}
	for i := range trainJobs {
		tj := &trainJobs[i]
		if !metav1.IsControlledBy(tj, oj) {
			continue
		}
		t := Trial{Name: tj.Name, Stage: stage.Of(tj), Parameters: parameters(oj, tj), created: tj.CreationTimestamp}
		if i, ok := optimization.TrialIndex(tj); ok {
			t.Index = &i
		}
		if v, ok := optimization.Objective(tj, s.Objective.Metric); ok {
			t.value = &v
			t.Objective = strconv.FormatFloat(v, 'g', -1, 64)
		}
		switch t.Stage {
		case stage.Complete:
			s.Progress.Complete++
		case stage.Failed:
			s.Progress.Failed++
		default:
			s.Progress.Running++
		}
		s.Trials = append(s.Trials, t)
	}
	s.Progress.Created = max(len(s.Trials), optimization.Observe(oj, trainJobs).Created)
	slices.SortStableFunc(s.Trials, func(a, b Trial) int {
		if a.value != nil && b.value != nil && *a.value != *b.value {
			if optimization.Better(s.Objective.Direction, *a.value, *b.value) {
				return -1
			}
			return 1
		}
		return cmp.Or(compareNil(a.value == nil, b.value == nil), compareCreation(a, b))
	})
	s.Best = best(oj, s)
	s.State, s.Reason, s.Message = state(oj, s.Progress)
	return s
}

// best is the trial status.result names (with the parameters it names), or the first Complete trial with a
// report: the trials are sorted best first.
func best(oj *trainer.OptimizationJob, s *Summary) *Trial {
	if oj.Status != nil && oj.Status.Result.TrainJobName != "" {
		r := oj.Status.Result
		t := Trial{Name: r.TrainJobName, Stage: printers.None, Parameters: r.Parameters}
		if i := slices.IndexFunc(s.Trials, func(t Trial) bool { return t.Name == r.TrainJobName }); i >= 0 {
			t = s.Trials[i]
			if len(r.Parameters) > 0 {
				t.Parameters = r.Parameters
			}
		}
		return &t
	}
	if i := slices.IndexFunc(s.Trials, func(t Trial) bool { return t.value != nil && t.Stage == stage.Complete }); i >= 0 {
		t := s.Trials[i]
		return &t
	}
	return nil
}

// state is the OptimizationJob's state and the reason and message of the condition that says so.
func state(oj *trainer.OptimizationJob, p Progress) (string, string, string) {
	var conds []metav1.Condition
	if oj.Status != nil {
		conds = oj.Status.Conditions
	}
	for _, typ := range []string{Complete, Failed} {
		if c := meta.FindStatusCondition(conds, typ); c != nil && c.Status == metav1.ConditionTrue {
			return typ, c.Reason, c.Message
		}
	}
	st := Running
	if p.Created == 0 {
		st = Pending
	}
	if c := meta.FindStatusCondition(conds, optimization.Created); c != nil && c.Status == metav1.ConditionFalse {
		return st, c.Reason, c.Message
	}
	return st, "", ""
}

// algorithm names the search as spec.searchAlgorithm says it, random (upstream's default) when unset.
func algorithm(oj *trainer.OptimizationJob) string {
	alg := oj.Spec.SearchAlgorithm
	switch {
	case alg != nil && alg.Grid != nil:
		return search.Grid
	case alg != nil && alg.Random != nil && alg.Random.Seed != nil:
		return fmt.Sprintf("%s, seed %d", search.Random, *alg.Random.Seed)
	}
	return search.Random
}

// parameters is tj's assignment: our controller's annotation, else the KUBEFLOW_TRAINER_OPT_<NAME> variables of
// its trainer (KEP-2605's injection, which every controller makes) in the order of spec.parameters.
func parameters(oj *trainer.OptimizationJob, tj *trainer.TrainJob) []trainer.ParameterAssignment {
	if a, err := optimization.TrialParameters(tj); err == nil {
		return a
	}
	a := []trainer.ParameterAssignment{}
	if tj.Spec.Trainer == nil {
		return a
	}
	for _, p := range oj.Spec.Parameters {
		name := search.EnvName(p.Name)
		if i := slices.IndexFunc(tj.Spec.Trainer.Env, func(e corev1.EnvVar) bool { return e.Name == name }); i >= 0 {
			a = append(a, trainer.ParameterAssignment{Name: p.Name, Value: tj.Spec.Trainer.Env[i].Value})
		}
	}
	return a
}

// compareNil orders what is missing last.
func compareNil(aNil, bNil bool) int {
	switch {
	case aNil == bNil:
		return 0
	case aNil:
		return 1
	}
	return -1
}

// compareCreation orders trials as they were created: by index where the controller gives one, else by creation
// time, then name.
func compareCreation(a, b Trial) int {
	if a.Index != nil && b.Index != nil {
		return cmp.Compare(*a.Index, *b.Index)
	}
	return cmp.Or(a.created.Compare(b.created.Time), strings.Compare(a.Name, b.Name))
}

// Assignments writes parameters as lr=0.001 batch=32.
func Assignments(params []trainer.ParameterAssignment) string {
	parts := make([]string, len(params))
	for i, p := range params {
		parts[i] = p.Name + "=" + p.Value
	}
	return strings.Join(parts, " ")
}
