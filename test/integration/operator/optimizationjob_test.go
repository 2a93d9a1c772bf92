package operator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator/controller"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/optimization"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/optimization/search"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/integration/operator/internal/optest"
)

// invalidOptimizationJob is a schema (CRD, CEL) refusal of OptimizationJob name.
func invalidOptimizationJob(name, detail string) admission {
	return admission{422, fmt.Sprintf(`OptimizationJob.trainer.kubeflow.org %q is invalid: %s`, name, detail)}
}

// optimizationJobYAML is an OptimizationJob fixture in namespace ns.
func optimizationJobYAML(t testing.TB, ns, doc string) *trainer.OptimizationJob {
	t.Helper()
	oj := decode(t, doc, &trainer.OptimizationJob{})
	oj.Namespace = ns
	return oj
}

// TestOptimizationJobUpstreamSample: KEP-2605's sample OptimizationJob
// decodes field for field into our type and the API server keeps it as it
// was written, with upstream's defaults (a log-uniform space is Float, and
// the template's spec has a TrainJob's).
func TestOptimizationJobUpstreamSample(t *testing.T) {
	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	doc, err := os.ReadFile("testdata/optimizationjob.yaml")
	if err != nil {
		t.Fatal(err)
	}
	oj := optimizationJobYAML(t, ns, string(doc))
	want := oj.Spec.DeepCopy()
	want.Parameters[0].SearchSpace.LogUniform.Type = trainer.ParameterTypeFloat
	// The template's defaults are a TrainJob's.
	want.TrainJobTemplate.Spec.Suspend = ptr.To(false)
	want.TrainJobTemplate.Spec.ManagedBy = ptr.To(trainer.TrainJobControllerManager)
	create(t, oj)

	got := &trainer.OptimizationJob{}
	if err := env.Client.Get(t.Context(), key(oj), got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(*want, got.Spec); diff != "" {
		t.Errorf("spec as stored (-want +got):\n%s", diff)
	}
}

// TestOptimizationJobDefaults: upstream's defaults: random search, one
// trial at a time, one trial in all, Minimize, Float.
func TestOptimizationJobDefaults(t *testing.T) {
	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	oj := optimizationJobYAML(t, ns, `
metadata: {name: defaults}
spec:
  objectives: [{metric: loss}]
  parameters: [{name: lr, searchSpace: {uniform: {min: "0.1", max: "1"}}}]
  trainJobTemplate: {spec: {runtimeRef: {name: torch}}}`)
	create(t, oj)
	got := &trainer.OptimizationJob{}
	if err := env.Client.Get(t.Context(), key(oj), got); err != nil {
		t.Fatal(err)
	}
	want := oj.Spec.DeepCopy()
	want.Objectives[0].Direction = trainer.ObjectiveDirectionMinimize
	want.SearchAlgorithm = &trainer.SearchAlgorithm{Random: &trainer.RandomAlgorithm{}}
	want.NumTrials, want.ParallelTrials = 1, 1
	want.Parameters[0].SearchSpace.Uniform.Type = trainer.ParameterTypeFloat
	want.TrainJobTemplate.Spec.Suspend = ptr.To(false)
	want.TrainJobTemplate.Spec.ManagedBy = ptr.To(trainer.TrainJobControllerManager)
	if diff := cmp.Diff(*want, got.Spec); diff != "" {
		t.Errorf("spec as defaulted (-want +got):\n%s", diff)
	}

	// The spec is immutable (read again on a conflict: the controller
	// writes the status meanwhile).
	var err error
	optest.Eventually(t, "update the spec", func(ctx context.Context) error {
		if err := optest.Get(ctx, env.Client, key(oj), got); err != nil {
			return err
		}
		got.Spec.NumTrials = 2
		if err = env.Client.Update(ctx, got); apierrors.IsConflict(err) {
			return err
		}
		return nil
	})
	checkAdmission(t, err, invalidOptimizationJob("defaults", `spec: Invalid value: OptimizationJobSpec is immutable and cannot be updated after creation`))
}

// TestOptimizationJobCreateValidation: what upstream's schema and CEL rules
// refuse, with their messages.
func TestOptimizationJobCreateValidation(t *testing.T) {
	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	const template = `trainJobTemplate: {spec: {runtimeRef: {name: torch}}}`
	cases := []struct {
		name string
		doc  string
		want admission
	}{
		{name: "more parallel trials than trials", doc: `
metadata: {name: parallel}
spec:
  objectives: [{metric: loss}]
  parameters: [{name: lr, searchSpace: {uniform: {min: "0.1", max: "1"}}}]
  numTrials: 2
  parallelTrials: 3
  ` + template, want: invalidOptimizationJob("parallel", `spec: Invalid value: parallelTrials cannot exceed numTrials`)},
		{name: "grid over a uniform space", doc: `
metadata: {name: grid-uniform}
spec:
  objectives: [{metric: loss}]
  searchAlgorithm: {grid: {}}
  parameters: [{name: lr, searchSpace: {uniform: {min: "0.1", max: "1"}}}]
  ` + template, want: invalidOptimizationJob("grid-uniform", `spec: Invalid value: Grid search requires all parameters to be Categorical; Uniform and LogUniform are not supported.`)},
		{name: "grid over categorical spaces", doc: `
metadata: {name: grid}
spec:
  objectives: [{metric: loss}]
  searchAlgorithm: {grid: {}}
  parameters: [{name: batch, searchSpace: {categorical: {choices: ["16", "32"]}}}]
  ` + template, want: allowed},
		{name: "random and grid", doc: `
metadata: {name: both}
spec:
  objectives: [{metric: loss}]
  searchAlgorithm: {random: {seed: 1}, grid: {}}
  parameters: [{name: batch, searchSpace: {categorical: {choices: ["16", "32"]}}}]
  ` + template, want: invalidOptimizationJob("both", `spec.searchAlgorithm: Invalid value: exactly one of the fields in [random grid] must be set`)},
		{name: "two search spaces", doc: `
metadata: {name: two-spaces}
spec:
  objectives: [{metric: loss}]
  parameters: [{name: lr, searchSpace: {uniform: {min: "0.1", max: "1"}, categorical: {choices: ["1"]}}}]
  ` + template, want: invalidOptimizationJob("two-spaces", `spec.parameters[0].searchSpace: Invalid value: exactly one of the fields in [uniform logUniform categorical] must be set`)},
		{name: "log-uniform from zero", doc: `
metadata: {name: log-zero}
spec:
  objectives: [{metric: loss}]
  parameters: [{name: lr, searchSpace: {logUniform: {min: "0", max: "1"}}}]
  ` + template, want: invalidOptimizationJob("log-zero", `spec.parameters[0].searchSpace.logUniform: Invalid value: min must be strictly greater than 0`)},
		{name: "uniform min not below max", doc: `
metadata: {name: min-max}
spec:
  objectives: [{metric: loss}]
  parameters: [{name: lr, searchSpace: {uniform: {min: "1", max: "1", type: Int}}}]
  ` + template, want: invalidOptimizationJob("min-max", `spec.parameters[0].searchSpace.uniform: Invalid value: min must be strictly less than max`)},
		{name: "not a number", doc: `
metadata: {name: nan}
spec:
  objectives: [{metric: loss}]
  parameters: [{name: lr, searchSpace: {uniform: {min: "1e", max: "2"}}}]
  ` + template, want: invalidOptimizationJob("nan", `[spec.parameters[0].searchSpace.uniform.min: Invalid value: "1e": spec.parameters[0].searchSpace.uniform.min in body should match '^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$', `+
			`spec.parameters[0].searchSpace.uniform: Invalid value: "object": type conversion error from 'string' to 'double' evaluating rule: min must be strictly less than max]`)},
		{name: "lower-case direction", doc: `
metadata: {name: lower-case}
spec:
  objectives: [{metric: loss, direction: minimize}]
  parameters: [{name: lr, searchSpace: {uniform: {min: "0.1", max: "1"}}}]
  ` + template, want: invalidOptimizationJob("lower-case", `[spec.objectives[0].direction: Unsupported value: "minimize": supported values: "Maximize", "Minimize", `+uncheckedRules+`]`)},
		{name: "named template", doc: `
metadata: {name: named-template}
spec:
  objectives: [{metric: loss}]
  parameters: [{name: lr, searchSpace: {uniform: {min: "0.1", max: "1"}}}]
  trainJobTemplate: {metadata: {name: trial}, spec: {runtimeRef: {name: torch}}}`,
			want: invalidOptimizationJob("named-template", `spec.trainJobTemplate.metadata: Invalid value: name and namespace cannot be set in a template.`)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkAdmission(t, env.Client.Create(t.Context(), optimizationJobYAML(t, ns, tc.doc)), tc.want)
		})
	}
}

// trialKey is the key of trial index of oj.
func trialKey(oj *trainer.OptimizationJob, index int) client.ObjectKey {
	return nsName(oj.Namespace, optimization.TrialName(oj.Name, index))
}

// trialsOf lists the TrainJobs labelled with oj's name, by name.
func trialsOf(ctx context.Context, oj *trainer.OptimizationJob) ([]string, error) {
	var list trainer.TrainJobList
	if err := env.Client.List(ctx, &list, client.InNamespace(oj.Namespace), client.MatchingLabels{optimization.JobNameLabel: oj.Name}); err != nil {
		return nil, err
	}
	var names []string
	for _, tj := range list.Items {
		names = append(names, tj.Name)
	}
	slices.Sort(names)
	return names, nil
}

// waitTrials waits until the trials of oj are exactly names.
func waitTrials(t testing.TB, oj *trainer.OptimizationJob, names ...string) {
	t.Helper()
	slices.Sort(names)
	optest.Eventually(t, fmt.Sprintf("the trials are %v", names), func(ctx context.Context) error {
		got, err := trialsOf(ctx, oj)
		if err != nil {
			return err
		}
		if !slices.Equal(got, names) {
			return fmt.Errorf("trials %v", got)
		}
		return nil
	})
}

// endTrial ends a trial as its trainer and the TrainJob controller would:
// it reports metrics (name, value pairs) in status.trainerStatus, and
// Complete or Failed (typ) becomes True.
func endTrial(t testing.TB, key client.ObjectKey, typ string, metrics ...string) {
	t.Helper()
	optest.Eventually(t, "end trial "+key.String(), func(ctx context.Context) error {
		tj := &trainer.TrainJob{}
		if err := optest.Get(ctx, env.Client, key, tj); err != nil {
			return err
		}
		ts := &trainer.TrainerStatus{LastUpdatedTime: metav1.Now()}
		for i := 0; i+1 < len(metrics); i += 2 {
			ts.Metrics = append(ts.Metrics, trainer.Metric{Name: metrics[i], Value: metrics[i+1]})
		}
		tj.Status.TrainerStatus = ts
		meta.SetStatusCondition(&tj.Status.Conditions, metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: "ByTest", Message: "ended by the test"})
		return env.Client.Status().Update(ctx, tj)
	})
}

// optimizationJobMatches waits until the stored OptimizationJob satisfies
// check.
func optimizationJobMatches(t testing.TB, oj *trainer.OptimizationJob, what string, check func(*trainer.OptimizationJob) error) *trainer.OptimizationJob {
	t.Helper()
	got := &trainer.OptimizationJob{}
	optest.Eventually(t, what, func(ctx context.Context) error {
		if err := optest.Get(ctx, env.Client, key(oj), got); err != nil {
			return err
		}
		return check(got)
	})
	return got
}

// hasOptimizationCondition is a check that the OptimizationJob has the
// condition (type, status, reason and message as given).
func hasOptimizationCondition(want condition) func(*trainer.OptimizationJob) error {
	return func(oj *trainer.OptimizationJob) error {
		var conds []metav1.Condition
		if oj.Status != nil {
			conds = oj.Status.Conditions
		}
		c := meta.FindStatusCondition(conds, want.Type)
		if c == nil || (condition{c.Type, string(c.Status), c.Reason, c.Message}) != want {
			return fmt.Errorf("conditions %+v, want %+v", conds, want)
		}
		return nil
	}
}

// expectedAssignments are the first n assignments of oj's search, as
// search.New makes them with seed.
func expectedAssignments(t testing.TB, oj *trainer.OptimizationJob, seed int64, n int) []search.Assignment {
	t.Helper()
	alg, err := search.New(&oj.Spec, seed)
	if err != nil {
		t.Fatal(err)
	}
	var made []search.Assignment
	for range n {
		a, ok := alg.Next(made)
		if !ok {
			t.Fatalf("the search ends after %d trials", len(made))
		}
		made = append(made, a)
	}
	return made
}

// wantComplete waits until oj is Complete, all its trials ended, with message, and checks that its result is
// result; it returns the condition, whose Event oj also records.
func wantComplete(t testing.TB, oj *trainer.OptimizationJob, message string, result trainer.Result) condition {
	t.Helper()
	complete := condition{optimization.Complete, "True", optimization.MaxTrialsReachedReason, message}
	got := optimizationJobMatches(t, oj, "Complete", hasOptimizationCondition(complete))
	if diff := cmp.Diff(result, got.Status.Result); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
	return complete
}

// parametersOf is the assignment a trial's annotation holds.
func parametersOf(t testing.TB, key client.ObjectKey) search.Assignment {
	t.Helper()
	tj := &trainer.TrainJob{}
	if err := env.Client.Get(t.Context(), key, tj); err != nil {
		t.Fatal(err)
	}
	a, err := optimization.TrialParameters(tj)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestOptimizationJobTrials: the controller creates the trials from the
// template, each with its assignment as environment variables and
// annotation, labelled and controlled by the OptimizationJob, at most
// parallelTrials running at once and numTrials in all; once all ended, the
// result is the Complete trial with the lowest loss (Minimize).
func TestOptimizationJobTrials(t *testing.T) {
	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	createTrainingRuntime(t, ns, "torch", torchSpec())
	oj := optimizationJobYAML(t, ns, `
metadata: {name: tune}
spec:
  objectives: [{metric: loss, direction: Minimize}]
  searchAlgorithm: {random: {seed: 7}}
  parameters:
    - {name: lr, searchSpace: {logUniform: {min: "0.0001", max: "0.1"}}}
    - {name: batch, searchSpace: {categorical: {choices: ["16", "32"]}}}
  numTrials: 3
  parallelTrials: 2
  trainJobTemplate:
    metadata: {labels: {team: vision}, annotations: {note: kept}}
    spec:
      runtimeRef: {name: torch, kind: TrainingRuntime}
      trainer:
        env:
          - {name: KUBEFLOW_TRAINER_OPT_LR, value: "from the template"}
          - {name: OTHER, value: "1"}`)
	create(t, oj)
	waitTrials(t, oj, "tune-0", "tune-1")
	want := expectedAssignments(t, oj, 7, 3)

	// Trial 0 as built: the template, the assignment injected.
	tj := &trainer.TrainJob{}
	if err := env.Client.Get(t.Context(), trialKey(oj, 0), tj); err != nil {
		t.Fatal(err)
	}
	params, _ := json.Marshal(want[0])
	wantMeta := metav1.ObjectMeta{
		Labels:      map[string]string{"team": "vision", optimization.JobNameLabel: "tune", optimization.TrialIndexLabel: "0"},
		Annotations: map[string]string{"note": "kept", optimization.ParametersAnnotation: string(params)},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: trainer.GroupVersion.String(), Kind: "OptimizationJob", Name: "tune", UID: oj.UID,
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
	}
	gotMeta := metav1.ObjectMeta{Labels: tj.Labels, Annotations: tj.Annotations, OwnerReferences: tj.OwnerReferences}
	if diff := cmp.Diff(wantMeta, gotMeta); diff != "" {
		t.Errorf("trial 0's metadata (-want +got):\n%s", diff)
	}
	wantEnv := []corev1.EnvVar{
		{Name: "KUBEFLOW_TRAINER_OPT_LR", Value: want[0][0].Value},
		{Name: "OTHER", Value: "1"},
		{Name: "KUBEFLOW_TRAINER_OPT_BATCH", Value: want[0][1].Value},
	}
	if diff := cmp.Diff(wantEnv, tj.Spec.Trainer.Env); diff != "" {
		t.Errorf("trial 0's trainer env (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want[1], parametersOf(t, trialKey(oj, 1))); diff != "" {
		t.Errorf("trial 1's parameters (-want +got):\n%s", diff)
	}
	optimizationJobMatches(t, oj, "Created: 2 of 3", hasOptimizationCondition(condition{optimization.Created, "True", optimization.TrialsCreatedReason, "2 of 3 trials are created"}))

	// Two run: the third waits for one of them to end.
	if err := optest.Absent(t.Context(), env.Client, trialKey(oj, 2), &trainer.TrainJob{}); err != nil {
		t.Fatalf("a third trial while two run: %v", err)
	}
	endTrial(t, trialKey(oj, 1), trainer.TrainJobComplete, "accuracy", "0.9", "loss", "0.25")
	waitTrials(t, oj, "tune-0", "tune-1", "tune-2")
	if diff := cmp.Diff(want[2], parametersOf(t, trialKey(oj, 2))); diff != "" {
		t.Errorf("trial 2's parameters (-want +got):\n%s", diff)
	}
	optimizationJobMatches(t, oj, "the best so far is trial 1", func(got *trainer.OptimizationJob) error {
		if got.Status == nil || got.Status.Result.TrainJobName != "tune-1" {
			return fmt.Errorf("status %+v", got.Status)
		}
		return nil
	})
	endTrial(t, trialKey(oj, 0), trainer.TrainJobComplete, "loss", "0.5")
	endTrial(t, trialKey(oj, 2), trainer.TrainJobFailed, "loss", "0.01")

	complete := wantComplete(t, oj, "3 trials: 2 Complete, 1 Failed, 0 deleted; the best is tune-1 with loss 0.25", trainer.Result{TrainJobName: "tune-1", Parameters: want[1]})
	if names, err := trialsOf(t.Context(), oj); err != nil || len(names) != 3 {
		t.Errorf("trials %v (%v), want 3", names, err)
	}
	wantOptimizationEvents(t, oj,
		event{"Normal", optimization.TrialsCreatedReason, optimization.Created, "2 of 3 trials are created"},
		event{"Normal", optimization.AllTrialsCreatedReason, optimization.Created, "All 3 trials are created"},
		event{"Normal", complete.Reason, complete.Type, complete.Message})
}

// wantOptimizationEvents waits until every wanted event has been recorded
// on oj.
func wantOptimizationEvents(t testing.TB, oj *trainer.OptimizationJob, want ...event) {
	t.Helper()
	optest.Eventually(t, "events recorded", func(ctx context.Context) error {
		var list eventsv1.EventList
		if err := env.Client.List(ctx, &list, client.InNamespace(oj.Namespace)); err != nil {
			return err
		}
		var got []event
		for _, e := range list.Items {
			if e.Regarding.Kind == "OptimizationJob" && e.Regarding.Name == oj.Name {
				got = append(got, event{e.Type, e.Reason, e.Action, e.Note})
			}
		}
		for _, w := range want {
			if !slices.Contains(got, w) {
				return fmt.Errorf("missing event %+v among %+v", w, got)
			}
		}
		return nil
	})
}

// tuneTwoOfFour creates OptimizationJob tune in a namespace of its own: 4
// trials of a learning rate, 2 at a time, maximizing accuracy; and waits for
// its first two trials.
func tuneTwoOfFour(t *testing.T) (string, *trainer.OptimizationJob) {
	t.Helper()
	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	createTrainingRuntime(t, ns, "torch", torchSpec())
	oj := optimizationJobYAML(t, ns, `
metadata: {name: tune}
spec:
  objectives: [{metric: accuracy, direction: Maximize}]
  parameters: [{name: lr, searchSpace: {uniform: {min: "0.1", max: "1"}}}]
  numTrials: 4
  parallelTrials: 2
  trainJobTemplate: {spec: {runtimeRef: {name: torch, kind: TrainingRuntime}}}`)
	create(t, oj)
	waitTrials(t, oj, "tune-0", "tune-1")
	return ns, oj
}

// TestOptimizationJobRestart: the search is read back from the API server,
// not from memory: a trial that ends and one deleted by hand while no
// operator runs are counted when it comes back (the deleted one, the last
// created, is not created again), and the next trials continue the same
// sequence (the seed is the OptimizationJob's UID's). Maximize picks the
// highest value.
func TestOptimizationJobRestart(t *testing.T) {
	ns, oj := tuneTwoOfFour(t)
	want := expectedAssignments(t, oj, optimization.Seed(oj.UID), 4)

	// The operator stops with its TrainJob controller idle: a request left in
	// its queue would count in optest.Settled's process-wide metrics for good.
	for i := range 2 {
		trainJobMatches(t, &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: optimization.TrialName("tune", i)}},
			"the trial is built", hasConditions(componentsCreated))
	}
	optest.Settled(t)
	restartOperator(t, func() {
		endTrial(t, trialKey(oj, 0), trainer.TrainJobComplete, "accuracy", "0.7")
		if err := env.Client.Delete(t.Context(), &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tune-1"}}); err != nil {
			t.Fatal(err)
		}
		optest.Eventually(t, "trial 1 is gone", func(ctx context.Context) error {
			return optest.Absent(ctx, env.Client, trialKey(oj, 1), &trainer.TrainJob{})
		})
	})
	waitTrials(t, oj, "tune-0", "tune-2", "tune-3")
	for i := 2; i < 4; i++ {
		if diff := cmp.Diff(want[i], parametersOf(t, trialKey(oj, i))); diff != "" {
			t.Errorf("trial %d's parameters (-want +got):\n%s", i, diff)
		}
	}
	endTrial(t, trialKey(oj, 2), trainer.TrainJobComplete, "accuracy", "0.9")
	endTrial(t, trialKey(oj, 3), trainer.TrainJobComplete, "accuracy", "0.8")
	wantComplete(t, oj, "4 trials: 3 Complete, 0 Failed, 1 deleted; the best is tune-2 with accuracy 0.9", trainer.Result{TrainJobName: "tune-2", Parameters: want[2]})
	waitTrials(t, oj, "tune-0", "tune-2", "tune-3")
}

// TestOptimizationJobCountCatchesUp: the count of trials created
// (TrialsCreatedAnnotation) behind the trials that exist, as a crash or a
// conflict between a trial's create and the count's patch leaves it, is
// raised to the trials' count by the next reconcile: otherwise the last trial,
// deleted by hand, would be made again.
func TestOptimizationJobCountCatchesUp(t *testing.T) {
	_, oj := tuneTwoOfFour(t)
	counted := func(n string) func(*trainer.OptimizationJob) error {
		return func(oj *trainer.OptimizationJob) error {
			if got := oj.Annotations[optimization.TrialsCreatedAnnotation]; got != n {
				return fmt.Errorf("annotation %s = %q, want %s", optimization.TrialsCreatedAnnotation, got, n)
			}
			return nil
		}
	}
	got := optimizationJobMatches(t, oj, "2 trials counted", counted("2"))
	behind := got.DeepCopy()
	behind.Annotations[optimization.TrialsCreatedAnnotation] = "1"
	if err := env.Client.Patch(t.Context(), behind, client.MergeFrom(got)); err != nil {
		t.Fatal(err)
	}
	optimizationJobMatches(t, oj, "the count raised again to the 2 trials", counted("2"))
}

// TestOptimizationJobForeignTrainJobs: TrainJobs that carry an
// OptimizationJob's labels but that it does not control are not trials:
// one with a trial's index is not counted, one holding the next trial's
// name is not adopted (Created=False until it is gone), and neither
// changes.
func TestOptimizationJobForeignTrainJobs(t *testing.T) {
	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	createTrainingRuntime(t, ns, "torch", torchSpec())
	labelled := func(name, index string) *trainer.TrainJob {
		tj := newTrainJob(ns, name, trainer.TrainingRuntimeKind, "torch")
		tj.Labels = map[string]string{optimization.JobNameLabel: "tune", optimization.TrialIndexLabel: index}
		tj.Spec.Suspend = ptr.To(true)
		create(t, tj)
		return tj
	}
	holder := labelled("tune-0", "0")
	stray := labelled("stray", "7")
	oj := optimizationJobYAML(t, ns, `
metadata: {name: tune}
spec:
  objectives: [{metric: loss}]
  parameters: [{name: lr, searchSpace: {uniform: {min: "0.1", max: "1"}}}]
  numTrials: 2
  trainJobTemplate: {spec: {runtimeRef: {name: torch, kind: TrainingRuntime}}}`)
	create(t, oj)
	optimizationJobMatches(t, oj, "Created=False: the name is held", hasOptimizationCondition(condition{optimization.Created, "False", optimization.TrialNotControlledReason,
		fmt.Sprintf("TrainJob %s/tune-0 holds the name of the next trial and is not controlled by this OptimizationJob: delete or rename it to let the search go on", ns)}))
	for _, tj := range []*trainer.TrainJob{holder, stray} {
		got := &trainer.TrainJob{}
		if err := env.Client.Get(t.Context(), key(tj), got); err != nil {
			t.Fatal(err)
		}
		if len(got.OwnerReferences) > 0 {
			t.Errorf("TrainJob %s adopted: %+v", tj.Name, got.OwnerReferences)
		}
	}

	deleteSeen(t, holder)
	optest.Eventually(t, "trial 0 is the OptimizationJob's", func(ctx context.Context) error {
		tj := &trainer.TrainJob{}
		if err := optest.Get(ctx, env.Client, trialKey(oj, 0), tj); err != nil {
			return err
		}
		if !metav1.IsControlledBy(tj, oj) {
			return fmt.Errorf("owners %+v", tj.OwnerReferences)
		}
		return nil
	})
	endTrial(t, trialKey(oj, 0), trainer.TrainJobComplete, "loss", "1")
	// The stray TrainJob's index 7 counts for nothing: trial 1 comes next.
	waitTrials(t, oj, "stray", "tune-0", "tune-1")
	endTrial(t, trialKey(oj, 1), trainer.TrainJobFailed)
	wantComplete(t, oj, "2 trials: 1 Complete, 1 Failed, 0 deleted; the best is tune-0 with loss 1", trainer.Result{TrainJobName: "tune-0", Parameters: parametersOf(t, trialKey(oj, 0))})
	got := &trainer.TrainJob{}
	if err := env.Client.Get(t.Context(), key(stray), got); err != nil {
		t.Fatal(err)
	}
	if len(got.OwnerReferences) > 0 || meta.IsStatusConditionTrue(got.Status.Conditions, trainer.TrainJobComplete) {
		t.Errorf("the stray TrainJob changed: owners %+v, conditions %+v", got.OwnerReferences, got.Status.Conditions)
	}
}

// TestOptimizationJobRunningTrialReports: the metric reports of a running
// trial (a status write every few seconds from the status server) change
// nothing the search reads, which counts only ended trials' objectives: they
// do not make the OptimizationJob list its trials again. Its end does.
func TestOptimizationJobRunningTrialReports(t *testing.T) {
	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	createTrainingRuntime(t, ns, "torch", torchSpec())
	oj := optimizationJobYAML(t, ns, `
metadata: {name: tune}
spec:
  objectives: [{metric: loss}]
  parameters: [{name: lr, searchSpace: {uniform: {min: "0.1", max: "1"}}}]
  numTrials: 1
  trainJobTemplate: {spec: {runtimeRef: {name: torch, kind: TrainingRuntime}}}`)
	create(t, oj)
	waitTrials(t, oj, "tune-0")
	optest.ControllerSettled(t, controller.OptimizationJobControllerName)
	lists := request{Verb: "list", Resource: "trainjobs"}
	before := requests.of(ns)[lists]
	const reports = 5
	for i := range reports {
		var written string
		optest.Eventually(t, fmt.Sprintf("report %d", i), func(ctx context.Context) error {
			tj := &trainer.TrainJob{}
			if err := optest.Get(ctx, env.Client, trialKey(oj, 0), tj); err != nil {
				return err
			}
			tj.Status.TrainerStatus = &trainer.TrainerStatus{LastUpdatedTime: metav1.Now(),
				Metrics: []trainer.Metric{{Name: "loss", Value: strconv.Itoa(reports - i)}}}
			if err := env.Client.Status().Update(ctx, tj); err != nil {
				return err
			}
			written = tj.ResourceVersion
			return nil
		})
		// The report has reached the operator's cache, and so its
		// controllers' queues; each is let settle apart, so that reports
		// are not merged in the queue.
		optest.Eventually(t, "the operator's cache has the report", func(ctx context.Context) error {
			tj := &trainer.TrainJob{}
			if err := optest.Get(ctx, op.Cache(), trialKey(oj, 0), tj); err != nil {
				return err
			}
			if tj.ResourceVersion != written {
				return fmt.Errorf("resourceVersion %s, want %s", tj.ResourceVersion, written)
			}
			return nil
		})
		optest.ControllerSettled(t, controller.OptimizationJobControllerName)
	}
	if got := requests.of(ns)[lists] - before; got != 0 {
		t.Errorf("the operator listed the trials %d times for %d metric reports of a running trial, want 0", got, reports)
	}
	endTrial(t, trialKey(oj, 0), trainer.TrainJobComplete, "loss", "0.5")
	wantComplete(t, oj, "1 trials: 1 Complete, 0 Failed, 0 deleted; the best is tune-0 with loss 0.5", trainer.Result{TrainJobName: "tune-0", Parameters: parametersOf(t, trialKey(oj, 0))})
}

// deniedOptimizationJob starts the OptimizationJob webhook's refusals.
const deniedOptimizationJob = `admission webhook "validator.optimizationjob.trainer.kubeflow.org" denied the request: `

// TestOptimizationJobWebhook: what CEL cannot say, the webhook refuses
// with the field at fault: a search that cannot be built from the
// parameters, and a last trial the TrainJob webhook would refuse (its name
// too long for the runtime's).
func TestOptimizationJobWebhook(t *testing.T) {
	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	createTrainingRuntime(t, ns, "torch", torchSpec())
	const template = `trainJobTemplate: {spec: {runtimeRef: {name: torch, kind: TrainingRuntime}}}`
	long := strings.Repeat("a", 50)
	cases := []struct {
		name string
		doc  string
		want admission
	}{
		{name: "an Int space without an integer", doc: `
metadata: {name: no-int}
spec:
  objectives: [{metric: loss}]
  parameters: [{name: layers, searchSpace: {uniform: {min: "0.2", max: "0.8", type: Int}}}]
  ` + template, want: admission{403, deniedOptimizationJob + `spec.parameters[0].searchSpace.uniform: Invalid value: "[0.2, 0.8]": an Int space must hold an integer`}},
		{name: "two parameters with one environment variable", doc: `
metadata: {name: same-env}
spec:
  objectives: [{metric: loss}]
  parameters:
    - {name: lr, searchSpace: {uniform: {min: "0.1", max: "1"}}}
    - {name: LR, searchSpace: {uniform: {min: "0.1", max: "1"}}}
  ` + template, want: admission{403, deniedOptimizationJob + `spec.parameters[1].name: Duplicate value: "LR: its environment variable KUBEFLOW_TRAINER_OPT_LR is parameter \"lr\"'s too"`}},
		{name: "trial names too long for the runtime", doc: `
metadata: {name: ` + long + `}
spec:
  objectives: [{metric: loss}]
  parameters: [{name: lr, searchSpace: {uniform: {min: "0.1", max: "1"}}}]
  numTrials: 20
  ` + template, want: admission{403, deniedOptimizationJob + `spec.trainJobTemplate: Invalid value: "` + long + `-19": its last trial, TrainJob "` + long + `-19", would be refused: ` +
			`metadata.name: Invalid value: "` + long + `-19": must be no more than 48 characters with runtime "torch", and is 53: the longest name JobSet derives from it, pod "` + long + `-19-node-0-0-abcde", must be no more than 63 characters; shorten the name by 5`}},
		{name: "no runtime yet: admitted", doc: `
metadata: {name: later}
spec:
  objectives: [{metric: loss}]
  parameters: [{name: lr, searchSpace: {uniform: {min: "0.1", max: "1"}}}]
  trainJobTemplate: {spec: {runtimeRef: {name: later, kind: TrainingRuntime}}}`, want: allowed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkAdmission(t, env.Client.Create(t.Context(), optimizationJobYAML(t, ns, tc.doc)), tc.want)
		})
	}
}
