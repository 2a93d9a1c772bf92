package search

import (
	"math"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
)

// grid tries every combination of the parameters' choices once, in the
// order of the cartesian product with the last parameter varying fastest.
// Upstream's API allows grid search only over categorical spaces (a CEL
// rule): it defines no grid points of a continuous one.
type grid struct {
	params []parameter
}

var _ Algorithm = (*grid)(nil)

func (*grid) Name() string { return Grid }

// Next is the point after the len(made) already tried, or false once every
// point was.
func (g *grid) Next(made []Assignment) (Assignment, bool) {
	i := len(made)
	if i >= g.size() {
		return nil, false
	}
	a := make(Assignment, len(g.params))
	for j := len(g.params) - 1; j >= 0; j-- {
		n := len(g.params[j].choices)
		a[j] = trainer.ParameterAssignment{Name: g.params[j].name, Value: g.params[j].choices[i%n]}
		i /= n
	}
	return a, true
}

// size is the number of points, at most math.MaxInt (100 parameters of 100
// choices each would overflow it; no OptimizationJob has that many trials).
func (g *grid) size() int {
	size := 1
	for _, p := range g.params {
		if size > math.MaxInt/len(p.choices) {
			return math.MaxInt
		}
		size *= len(p.choices)
	}
	return size
}
