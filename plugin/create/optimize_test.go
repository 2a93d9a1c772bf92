package create

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
)

// TestSearchFlags: --param, --objective, --algorithm, --seed, --trials and --parallel make the spec's search, and
// bad values are refused naming the flag and how to write it, by the same parser as the controller's
// (pkg/optimization/search).
func TestSearchFlags(t *testing.T) {
	const paramHelp = "; write it as NAME=KIND:VALUES with KIND uniform, loguniform, uniform-int, loguniform-int (MIN,MAX) or categorical (A,B,...), e.g. --param lr=loguniform:1e-5,1e-2"
	base := searchFlags{params: []string{"lr=loguniform:1e-5,1e-2"}, objective: "val_loss:min", trials: 20, parallel: 4, algorithm: "random"}
	with := func(mutate func(*searchFlags)) searchFlags {
		s := base
		mutate(&s)
		return s
	}
	space := func(s trainer.SearchSpace) *trainer.SearchSpace { return &s }
	for _, tc := range []struct {
		name  string
		flags searchFlags
		want  *trainer.OptimizationJobSpec
		err   string
	}{
		{name: "every kind", flags: with(func(s *searchFlags) {
			s.params = []string{"lr=loguniform:1e-5,1e-2", "batch=categorical:16,32,64", "dropout=uniform:0,0.5", "layers=uniform-int:2,8", "width=LogUniform-Int:64,1024"}
			s.objective = "accuracy:max"
			s.seed = ptr.To[int64](7)
		}), want: &trainer.OptimizationJobSpec{
			Objectives:      []trainer.Objective{{Metric: "accuracy", Direction: trainer.ObjectiveDirectionMaximize}},
			SearchAlgorithm: &trainer.SearchAlgorithm{Random: &trainer.RandomAlgorithm{Seed: ptr.To[int64](7)}},
			Parameters: []trainer.Parameter{
				{Name: "lr", SearchSpace: space(trainer.SearchSpace{LogUniform: trainer.LogUniformSpace{Min: "1e-5", Max: "1e-2", Type: trainer.ParameterTypeFloat}})},
				{Name: "batch", SearchSpace: space(trainer.SearchSpace{Categorical: trainer.CategoricalSpace{Choices: []string{"16", "32", "64"}}})},
				{Name: "dropout", SearchSpace: space(trainer.SearchSpace{Uniform: trainer.UniformSpace{Min: "0", Max: "0.5", Type: trainer.ParameterTypeFloat}})},
				{Name: "layers", SearchSpace: space(trainer.SearchSpace{Uniform: trainer.UniformSpace{Min: "2", Max: "8", Type: trainer.ParameterTypeInt}})},
				{Name: "width", SearchSpace: space(trainer.SearchSpace{LogUniform: trainer.LogUniformSpace{Min: "64", Max: "1024", Type: trainer.ParameterTypeInt}})},
			},
			NumTrials: 20, ParallelTrials: 4,
		}},
		{name: "grid, minimize by default", flags: with(func(s *searchFlags) {
			s.params, s.objective, s.algorithm = []string{"batch=categorical:16,32"}, "loss", "grid"
		}), want: &trainer.OptimizationJobSpec{
			Objectives:      []trainer.Objective{{Metric: "loss", Direction: trainer.ObjectiveDirectionMinimize}},
			SearchAlgorithm: &trainer.SearchAlgorithm{Grid: &trainer.GridAlgorithm{}},
			Parameters:      []trainer.Parameter{{Name: "batch", SearchSpace: space(trainer.SearchSpace{Categorical: trainer.CategoricalSpace{Choices: []string{"16", "32"}}})}},
			NumTrials:       20, ParallelTrials: 4,
		}},
		{name: "no param", flags: with(func(s *searchFlags) { s.params = nil }),
			err: "--param is required: give each hyperparameter to search, e.g. --param lr=loguniform:1e-5,1e-2 --param batch=categorical:16,32,64"},
		{name: "no =", flags: with(func(s *searchFlags) { s.params = []string{"lr"} }),
			err: `invalid --param "lr"` + paramHelp},
		{name: "no kind", flags: with(func(s *searchFlags) { s.params = []string{"lr=1e-5,1e-2"} }),
			err: `invalid --param "lr=1e-5,1e-2": no KIND before the values` + paramHelp},
		{name: "unknown kind", flags: with(func(s *searchFlags) { s.params = []string{"lr=normal:0,1"} }),
			err: `invalid --param "lr=normal:0,1": unknown KIND "normal"` + paramHelp},
		{name: "one bound", flags: with(func(s *searchFlags) { s.params = []string{"lr=uniform:0.1"} }),
			err: `invalid --param "lr=uniform:0.1": uniform takes two values, MIN,MAX` + paramHelp},
		{name: "not a number", flags: with(func(s *searchFlags) { s.params = []string{"lr=uniform:.1,1"} }),
			err: `invalid --param "lr=uniform:.1,1": ".1" is not a number as the API writes them: write it like 0.1, 5 or 1e-3`},
		{name: "min not below max", flags: with(func(s *searchFlags) { s.params = []string{"lr=uniform:1,0.1"} }),
			err: `invalid --param "lr=uniform:1,0.1": min must be strictly less than max`},
		{name: "log of zero", flags: with(func(s *searchFlags) { s.params = []string{"lr=loguniform:0,1"} }),
			err: `invalid --param "lr=loguniform:0,1": min must be strictly greater than 0`},
		{name: "no integer", flags: with(func(s *searchFlags) { s.params = []string{"n=uniform-int:0.2,0.8"} }),
			err: `invalid --param "n=uniform-int:0.2,0.8": an Int space must hold an integer`},
		{name: "empty choice", flags: with(func(s *searchFlags) { s.params = []string{"opt=categorical:adam,,sgd"} }),
			err: `invalid --param "opt=categorical:adam,,sgd": a choice is empty` + paramHelp},
		{name: "same name twice", flags: with(func(s *searchFlags) { s.params = []string{"lr=uniform:0,1", "lr=uniform:1,2"} }),
			err: `invalid --param "lr=uniform:1,2": lr is given twice`},
		{name: "same variable", flags: with(func(s *searchFlags) { s.params = []string{"lr=uniform:0,1", "LR=uniform:1,2"} }),
			err: `invalid --param "LR=uniform:1,2": LR: its environment variable KUBEFLOW_TRAINER_OPT_LR is parameter "lr"'s too`},
		{name: "grid of a continuous space", flags: with(func(s *searchFlags) { s.algorithm = "grid" }),
			err: `--algorithm grid needs every --param categorical, and lr is loguniform: use --algorithm random, or list its values: --param lr=categorical:A,B,...`},
		{name: "seed of grid", flags: with(func(s *searchFlags) {
			s.params, s.algorithm, s.seed = []string{"b=categorical:1,2"}, "grid", ptr.To[int64](1)
		}),
			err: "--seed applies to --algorithm random only: drop it"},
		{name: "unknown algorithm", flags: with(func(s *searchFlags) { s.algorithm = "bayesian" }),
			err: `invalid --algorithm "bayesian": use random or grid`},
		{name: "no objective", flags: with(func(s *searchFlags) { s.objective = "" }),
			err: "--objective is required: name the metric the trials report and whether to minimize or maximize it, e.g. --objective val_loss:min"},
		{name: "bad direction", flags: with(func(s *searchFlags) { s.objective = "loss:down" }),
			err: `invalid --objective "loss:down": the direction is min or max, e.g. --objective val_loss:min`},
		{name: "too many trials", flags: with(func(s *searchFlags) { s.trials = 101 }),
			err: "invalid --trials 101: use 1 to 100"},
		{name: "parallel above trials", flags: with(func(s *searchFlags) { s.trials, s.parallel = 2, 4 }),
			err: "--parallel 4 is more than --trials 2: at most --trials run at once"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.flags.spec()
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("error = %v\nwant    %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
