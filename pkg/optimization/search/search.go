// Package search holds the search algorithms of OptimizationJob (KEP-2605):
// given an OptimizationJob's parameters and the assignments of the trials
// already created, the assignment of the next trial. It is pure: no API
// server, no clock and no state between calls, so that a controller that
// reconstructs the trials from the API server (their annotations) after a
// restart gets the same assignments as before it. It does not count trials
// against numTrials or parallelTrials: that is the reconciler's.
package search

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
)

// Names of the algorithms, as spec.searchAlgorithm's fields.
const (
	Random = "random"
	Grid   = "grid"
)

// EnvPrefix starts the name of the environment variable that carries a
// parameter's value into a trial (KEP-2605: KUBEFLOW_TRAINER_OPT_<NAME>).
const EnvPrefix = "KUBEFLOW_TRAINER_OPT_"

// Assignment is a trial's value of every parameter, in the order of
// spec.parameters.
type Assignment []trainer.ParameterAssignment

// Algorithm chooses the assignment of the next trial.
type Algorithm interface {
	// Name is the algorithm's name, as its field of spec.searchAlgorithm.
	Name() string
	// Next returns the assignment of the trial that follows made, the
	// assignments of every trial created so far in the order they were
	// created, or false when the algorithm has no more to try.
	Next(made []Assignment) (Assignment, bool)
}

// New returns the algorithm of spec.searchAlgorithm over spec.parameters
// (random when none is set, as upstream's default). seed is random's seed
// when spec.searchAlgorithm.random.seed is unset; the caller derives it from
// something that outlives it (the OptimizationJob's UID), so that a restart
// does not change the sequence. The error names the field at fault.
func New(spec *trainer.OptimizationJobSpec, seed int64) (Algorithm, error) {
	params, errs := parseParameters(spec.Parameters, field.NewPath("spec", "parameters"))
	alg := spec.SearchAlgorithm
	switch {
	case alg != nil && alg.Random != nil && alg.Grid != nil:
		errs = append(errs, field.Invalid(field.NewPath("spec", "searchAlgorithm"), "random and grid", "exactly one of random and grid must be set"))
	case alg != nil && alg.Grid != nil:
		for i, p := range params {
			if p.kind != categorical {
				// Upstream's CEL rule: grid points of a continuous space are not defined.
				errs = append(errs, field.Invalid(field.NewPath("spec", "parameters").Index(i).Child("searchSpace"), p.kind,
					"grid search requires every parameter to be categorical"))
			}
		}
		if len(errs) > 0 {
			return nil, errs.ToAggregate()
		}
		return &grid{params: params}, nil
	case alg != nil && alg.Random != nil && alg.Random.Seed != nil:
		seed = *alg.Random.Seed
	}
	if len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	return &random{params: params, seed: seed}, nil
}

// EnvName is the environment variable that carries parameter name into a
// trial: KEP-2605's examples (learning_rate → KUBEFLOW_TRAINER_OPT_LEARNING_RATE)
// upper-case the name; every character that may not appear in a portable
// variable name (anything but A-Z, 0-9 and _) becomes _.
func EnvName(name string) string {
	var b strings.Builder
	b.WriteString(EnvPrefix)
	for _, r := range strings.ToUpper(name) {
		if (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// The kinds of search space, as SearchSpace's fields.
const (
	uniform     = "uniform"
	logUniform  = "logUniform"
	categorical = "categorical"
)

// parameter is a parameter of the spec with its bounds parsed.
type parameter struct {
	name     string
	kind     string
	integer  bool
	min, max float64
	choices  []string
}

func parseParameters(specs []trainer.Parameter, path *field.Path) ([]parameter, field.ErrorList) {
	var errs field.ErrorList
	params := make([]parameter, 0, len(specs))
	envs := map[string]string{}
	for i, s := range specs {
		p, pathOf := parameter{name: s.Name}, path.Index(i)
		if other, ok := envs[EnvName(s.Name)]; ok {
			errs = append(errs, field.Duplicate(pathOf.Child("name"), fmt.Sprintf("%s: its environment variable %s is parameter %q's too", s.Name, EnvName(s.Name), other)))
		}
		envs[EnvName(s.Name)] = s.Name
		space, spacePath := s.SearchSpace, pathOf.Child("searchSpace")
		if space == nil {
			errs = append(errs, field.Required(spacePath, "a search space is required"))
			continue
		}
		var set []string
		if space.Uniform != (trainer.UniformSpace{}) {
			set = append(set, uniform)
		}
		if space.LogUniform != (trainer.LogUniformSpace{}) {
			set = append(set, logUniform)
		}
		if len(space.Categorical.Choices) > 0 {
			set = append(set, categorical)
		}
		if len(set) != 1 {
			errs = append(errs, field.Invalid(spacePath, strings.Join(set, " and "), "exactly one of uniform, logUniform and categorical must be set"))
			continue
		}
		p.kind = set[0]
		var bad field.ErrorList
		switch p.kind {
		case uniform:
			p.integer = space.Uniform.Type == trainer.ParameterTypeInt
			p.min, p.max, bad = parseBounds(space.Uniform.Min, space.Uniform.Max, p.integer, spacePath.Child(uniform))
		case logUniform:
			p.integer = space.LogUniform.Type == trainer.ParameterTypeInt
			p.min, p.max, bad = parseBounds(space.LogUniform.Min, space.LogUniform.Max, p.integer, spacePath.Child(logUniform))
			if len(bad) == 0 && p.min <= 0 {
				bad = append(bad, field.Invalid(spacePath.Child(logUniform, "min"), string(space.LogUniform.Min), "min must be strictly greater than 0"))
			}
		case categorical:
			p.choices = space.Categorical.Choices
		}
		errs = append(errs, bad...)
		params = append(params, p)
	}
	return params, errs
}

// parseBounds parses min and max of a continuous space. An Int space must
// hold an integer: its bounds are rounded inwards.
func parseBounds(minS, maxS trainer.Double, integer bool, path *field.Path) (lo, hi float64, errs field.ErrorList) {
	parse := func(s trainer.Double, name string) float64 {
		v, err := strconv.ParseFloat(string(s), 64)
		if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
			errs = append(errs, field.Invalid(path.Child(name), string(s), "must be a finite decimal number"))
		}
		return v
	}
	lo, hi = parse(minS, "min"), parse(maxS, "max")
	switch {
	case len(errs) > 0:
	case lo >= hi:
		errs = append(errs, field.Invalid(path.Child("min"), string(minS), "min must be strictly less than max"))
	case integer && math.Ceil(lo) > math.Floor(hi):
		errs = append(errs, field.Invalid(path, fmt.Sprintf("[%s, %s]", minS, maxS), "an Int space must hold an integer"))
	case integer:
		lo, hi = math.Ceil(lo), math.Floor(hi)
	}
	return lo, hi, errs
}

// value is p's value at u, a number in [0, 1): u's share of the way from min
// to max on p's scale, an Int rounded to the nearest integer in the bounds.
func (p parameter) value(u float64) string {
	var v float64
	switch p.kind {
	case categorical:
		return p.choices[min(int(u*float64(len(p.choices))), len(p.choices)-1)]
	case logUniform:
		if p.integer {
			// Every integer in [min, max] gets the share of the log scale
			// that rounds to it: [n-½, n+½] within the bounds.
			lo, hi := math.Log(p.min-0.5), math.Log(p.max+0.5)
			if p.min-0.5 <= 0 {
				lo = math.Log(p.min)
			}
			v = math.Exp(lo + u*(hi-lo))
		} else {
			v = math.Exp(math.Log(p.min) + u*(math.Log(p.max)-math.Log(p.min)))
		}
	case uniform:
		if p.integer {
			v = p.min + math.Floor(u*(p.max-p.min+1))
		} else {
			v = p.min + u*(p.max-p.min)
		}
	}
	if p.integer {
		return strconv.FormatInt(int64(math.Min(math.Max(math.Round(v), p.min), p.max)), 10)
	}
	// Rounding at the edges of the log scale may step just outside them.
	return strconv.FormatFloat(math.Min(math.Max(v, p.min), p.max), 'g', -1, 64)
}
