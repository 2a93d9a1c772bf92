package search

import (
	"maps"
	"math"
	"slices"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
)

// spec is an OptimizationJobSpec from YAML, as a user writes it.
func spec(t *testing.T, doc string) *trainer.OptimizationJobSpec {
	t.Helper()
	s := &trainer.OptimizationJobSpec{}
	if err := yaml.UnmarshalStrict([]byte(doc), s); err != nil {
		t.Fatalf("fixture: %v\n%s", err, doc)
	}
	return s
}

func newAlgorithm(t *testing.T, doc string, seed int64) Algorithm {
	t.Helper()
	a, err := New(spec(t, doc), seed)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// run asks alg for n assignments, each given those before it.
func run(t *testing.T, alg Algorithm, n int) []Assignment {
	t.Helper()
	var made []Assignment
	for range n {
		a, ok := alg.Next(made)
		if !ok {
			break
		}
		made = append(made, a)
	}
	return made
}

// values are parameter j's values in made, as numbers.
func values(t *testing.T, made []Assignment, j int) []float64 {
	t.Helper()
	var vs []float64
	for _, a := range made {
		v, err := strconv.ParseFloat(a[j].Value, 64)
		if err != nil {
			t.Fatalf("%s = %q: %v", a[j].Name, a[j].Value, err)
		}
		vs = append(vs, v)
	}
	return vs
}

const mixed = `
parameters:
  - {name: lr, searchSpace: {logUniform: {min: "1e-5", max: "1e-1"}}}
  - {name: dropout, searchSpace: {uniform: {min: "0.1", max: "0.5"}}}
  - {name: layers, searchSpace: {uniform: {min: "1.5", max: "4.5", type: Int}}}
  - {name: batch, searchSpace: {categorical: {choices: ["16", "32", "64"]}}}
  - {name: width, searchSpace: {logUniform: {min: "8", max: "1024", type: Int}}}
`

// TestRandomReproducible: the same seed gives the same trials; trial i's
// assignment depends on (seed, i) only, not on the trials before it, so a
// controller that lost them to a restart, or reads them in another order,
// makes the same; another seed makes others.
func TestRandomReproducible(t *testing.T) {
	first := run(t, newAlgorithm(t, mixed+`searchAlgorithm: {random: {seed: 7}}`, 0), 20)
	again := run(t, newAlgorithm(t, mixed+`searchAlgorithm: {random: {seed: 7}}`, 99), 20)
	if diff := cmp.Diff(first, again); diff != "" {
		t.Errorf("seed 7 twice (-first +again):\n%s", diff)
	}
	// Trial 12 after 12 trials of any content.
	other := make([]Assignment, 12)
	if got, _ := newAlgorithm(t, mixed+`searchAlgorithm: {random: {seed: 7}}`, 0).Next(other); !cmp.Equal(got, first[12]) {
		t.Errorf("trial 12 after 12 other assignments = %v, want %v", got, first[12])
	}
	// The caller's seed when the spec has none, and the default algorithm is random.
	if diff := cmp.Diff(first, run(t, newAlgorithm(t, mixed, 7), 20)); diff != "" {
		t.Errorf("no searchAlgorithm, seed 7 from the caller (-spec's seed +caller's):\n%s", diff)
	}
	if cmp.Equal(first, run(t, newAlgorithm(t, mixed+`searchAlgorithm: {random: {seed: 8}}`, 0), 20)) {
		t.Error("seeds 7 and 8 made the same trials")
	}
	// Pinned: a Go release that changed the numbers would change the trials
	// of a search under way.
	want := Assignment{{Name: "lr", Value: "0.0001197057717540551"}}
	if diff := cmp.Diff(want, first[0][:1]); diff != "" {
		t.Errorf("seed 7's first lr (-want +got):\n%s", diff)
	}
}

// TestRandomSpaces: every value lies in its space; an Int is an integer in
// the bounds rounded inwards, every one of them drawn; a log-uniform space
// is uniform in log: as many values below the geometric mean as above.
func TestRandomSpaces(t *testing.T) {
	const n = 2000
	made := run(t, newAlgorithm(t, mixed+`searchAlgorithm: {random: {seed: 1}}`, 0), n)
	if len(made) != n {
		t.Fatalf("%d assignments, want %d", len(made), n)
	}
	within := func(name string, vs []float64, lo, hi float64) {
		t.Helper()
		for _, v := range vs {
			if v < lo || v > hi {
				t.Fatalf("%s = %v, outside [%v, %v]", name, v, lo, hi)
			}
		}
	}
	share := func(vs []float64, below float64) float64 {
		k := 0
		for _, v := range vs {
			if v < below {
				k++
			}
		}
		return float64(k) / float64(len(vs))
	}
	lr := values(t, made, 0)
	within("lr", lr, 1e-5, 1e-1)
	if s := share(lr, 1e-3); s < 0.45 || s > 0.55 {
		t.Errorf("lr below 1e-3, the geometric mean of its bounds, in %.2f of the trials, want about half", s)
	}
	if s := share(lr, 1e-4); s < 0.2 || s > 0.3 {
		t.Errorf("lr below 1e-4, a quarter of the way on its log scale, in %.2f of the trials, want about a quarter", s)
	}
	dropout := values(t, made, 1)
	within("dropout", dropout, 0.1, 0.5)
	if s := share(dropout, 0.3); s < 0.45 || s > 0.55 {
		t.Errorf("dropout below 0.3, the middle of its bounds, in %.2f of the trials, want about half", s)
	}
	counts := map[float64]int{}
	for _, v := range values(t, made, 2) {
		counts[v]++
	}
	if diff := cmp.Diff([]float64{2, 3, 4}, slices.Sorted(maps.Keys(counts))); diff != "" {
		t.Errorf("layers in [1.5, 4.5], Int (-want +got):\n%s", diff)
	}
	batches := map[string]int{}
	for _, a := range made {
		batches[a[3].Value]++
	}
	if len(batches) != 3 {
		t.Errorf("batch took %v, want each of 16, 32 and 64", batches)
	}
	width := values(t, made, 4)
	within("width", width, 8, 1024)
	for _, v := range width {
		if v != math.Trunc(v) {
			t.Fatalf("width = %v, not an integer", v)
		}
	}
	if s := share(width, 91); s < 0.45 || s > 0.55 {
		t.Errorf("width below 91, about the geometric mean of 8 and 1024, in %.2f of the trials, want about half", s)
	}
}

// TestGrid: every combination once, the last parameter varying fastest,
// then no more; a trial's point depends only on how many came before it.
func TestGrid(t *testing.T) {
	alg := newAlgorithm(t, `
searchAlgorithm: {grid: {}}
parameters:
  - {name: batch, searchSpace: {categorical: {choices: ["16", "32"]}}}
  - {name: optimizer, searchSpace: {categorical: {choices: [sgd, adam, adamw]}}}
`, 0)
	var got [][2]string
	for _, a := range run(t, alg, 100) {
		got = append(got, [2]string{a[0].Value, a[1].Value})
	}
	want := [][2]string{{"16", "sgd"}, {"16", "adam"}, {"16", "adamw"}, {"32", "sgd"}, {"32", "adam"}, {"32", "adamw"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("grid (-want +got):\n%s", diff)
	}
	if a, ok := alg.Next(make([]Assignment, 4)); !ok || a[0].Value != "32" || a[1].Value != "adam" {
		t.Errorf("point after 4 = %v, %v; want 32, adam", a, ok)
	}
	// A grid larger than any number of trials does not overflow.
	big := "searchAlgorithm: {grid: {}}\nparameters:\n"
	for i := range 100 {
		big += "  - {name: p" + strconv.Itoa(i) + ", searchSpace: {categorical: {choices: [a, b, c]}}}\n"
	}
	if got := run(t, newAlgorithm(t, big, 0), 100); len(got) != 100 || got[99][97].Value != "c" || got[99][95].Value != "b" {
		t.Errorf("3^100 points: %d of 100 asked for, the 100th %v; want the 100th ending in a, b, a, c, a, a (99 in base 3)", len(got), got[len(got)-1][94:])
	}
}

// TestNewErrors: what New refuses, naming the field; most of it the API's
// CEL rules refuse too, but New is also given specs no API server saw.
func TestNewErrors(t *testing.T) {
	cases := []struct {
		name, doc, want string
	}{
		{name: "not a number", doc: `parameters: [{name: lr, searchSpace: {uniform: {min: "1e", max: "2"}}}]`,
			want: `spec.parameters[0].searchSpace.uniform.min: Invalid value: "1e": must be a finite decimal number`},
		{name: "out of range", doc: `parameters: [{name: lr, searchSpace: {logUniform: {min: "1", max: "1e999"}}}]`,
			want: `spec.parameters[0].searchSpace.logUniform.max: Invalid value: "1e999": must be a finite decimal number`},
		{name: "min not below max", doc: `parameters: [{name: a, searchSpace: {categorical: {choices: [x]}}}, {name: lr, searchSpace: {uniform: {min: "2", max: "2"}}}]`,
			want: `spec.parameters[1].searchSpace.uniform.min: Invalid value: "2": min must be strictly less than max`},
		{name: "log from zero", doc: `parameters: [{name: lr, searchSpace: {logUniform: {min: "0", max: "1"}}}]`,
			want: `spec.parameters[0].searchSpace.logUniform.min: Invalid value: "0": min must be strictly greater than 0`},
		{name: "Int without an integer", doc: `parameters: [{name: n, searchSpace: {uniform: {min: "0.2", max: "0.8", type: Int}}}]`,
			want: `spec.parameters[0].searchSpace.uniform: Invalid value: "[0.2, 0.8]": an Int space must hold an integer`},
		{name: "no search space", doc: `parameters: [{name: lr}]`,
			want: `spec.parameters[0].searchSpace: Required value: a search space is required`},
		{name: "two search spaces", doc: `parameters: [{name: lr, searchSpace: {uniform: {min: "0", max: "1"}, categorical: {choices: [x]}}}]`,
			want: `spec.parameters[0].searchSpace: Invalid value: "uniform and categorical": exactly one of uniform, logUniform and categorical must be set`},
		{name: "grid over a continuous space", doc: `{searchAlgorithm: {grid: {}}, parameters: [{name: lr, searchSpace: {logUniform: {min: "1e-3", max: "1"}}}]}`,
			want: `spec.parameters[0].searchSpace: Invalid value: "logUniform": grid search requires every parameter to be categorical`},
		{name: "random and grid", doc: `{searchAlgorithm: {grid: {}, random: {}}, parameters: [{name: a, searchSpace: {categorical: {choices: [x]}}}]}`,
			want: `spec.searchAlgorithm: Invalid value: "random and grid": exactly one of random and grid must be set`},
		{name: "one environment variable for two parameters", doc: `parameters: [{name: learning-rate, searchSpace: {categorical: {choices: [x]}}}, {name: learning_rate, searchSpace: {categorical: {choices: [x]}}}]`,
			want: `spec.parameters[1].name: Duplicate value: "learning_rate: its environment variable KUBEFLOW_TRAINER_OPT_LEARNING_RATE is parameter \"learning-rate\"'s too"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(spec(t, tc.doc), 0)
			if err == nil || err.Error() != tc.want {
				t.Errorf("New: %v\nwant: %s", err, tc.want)
			}
		})
	}
}

func TestEnvName(t *testing.T) {
	for name, want := range map[string]string{
		"learning_rate": "KUBEFLOW_TRAINER_OPT_LEARNING_RATE", // KEP-2605's example
		"batch_size":    "KUBEFLOW_TRAINER_OPT_BATCH_SIZE",
		"lr":            "KUBEFLOW_TRAINER_OPT_LR",
		"model.lr-max2": "KUBEFLOW_TRAINER_OPT_MODEL_LR_MAX2",
		"β1":            "KUBEFLOW_TRAINER_OPT__1",
	} {
		if got := EnvName(name); got != want {
			t.Errorf("EnvName(%q) = %s, want %s", name, got, want)
		}
	}
}
