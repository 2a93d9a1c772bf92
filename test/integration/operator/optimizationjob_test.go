package operator_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
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

	// The spec is immutable.
	got.Spec.NumTrials = 2
	checkAdmission(t, env.Client.Update(t.Context(), got), invalidOptimizationJob("defaults", `spec: Invalid value: OptimizationJobSpec is immutable and cannot be updated after creation`))
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
