package search

import (
	"math/rand/v2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
)

// random draws every parameter's value independently. The assignment of
// trial i is a function of (seed, i) alone, so it does not depend on how
// many trials a controller saw before a restart, nor on the order it
// created them in.
type random struct {
	params []parameter
	seed   int64
}

var _ Algorithm = (*random)(nil)

func (*random) Name() string { return Random }

// Next never runs out: numTrials bounds it.
func (r *random) Next(made []Assignment) (Assignment, bool) {
	return r.assignment(len(made)), true
}

// assignment is trial i's. The stream is PCG's own output, whose algorithm
// math/rand/v2 specifies, turned into numbers here rather than by
// rand.Rand's methods, which a Go release may change: a controller built
// with a later Go must continue the sequence a former one started.
func (r *random) assignment(i int) Assignment {
	src := rand.NewPCG(uint64(r.seed), uint64(i))
	a := make(Assignment, len(r.params))
	for j, p := range r.params {
		u := float64(src.Uint64()>>11) / (1 << 53) // [0, 1), every float64 there with 53 bits
		a[j] = trainer.ParameterAssignment{Name: p.name, Value: p.value(u)}
	}
	return a
}
