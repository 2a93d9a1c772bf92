package optest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator/controller"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/stack"
)

// A test that a thing does NOT happen must first show that the operator
// has processed what could have made it happen; silence for a while only
// shows that a slow operator has not done it yet. Two barriers serve:
//
//   - Builds: the resourceVersions of a TrainJob that the Build phase of an
//     in-process operator has run on, recorded by a probe plugin. It proves,
//     per object, that a reconcile saw a given version.
//   - Settled: the TrainJob controllers of the test process have no reconcile
//     running and none ready in their queues. Every event handed to the
//     controller before has then been reconciled to the end.

// ProbeName is the name of the probe plugin that OutOfTree adds after the
// project's plugins.
const ProbeName = "test-build-probe"

// probe is an EnforcePodSpec plugin that changes nothing and records the
// TrainJob it runs on. The Build phase runs at every reconcile of a
// TrainJob that has not finished, and only there.
type probe struct{}

var _ pipeline.EnforcePodSpecPlugin = probe{}

func (probe) Name() string { return ProbeName }

func (probe) EnforcePodSpec(_ *pipeline.RuntimeInfo, tj *trainer.TrainJob) error {
	builds.record(tj)
	return nil
}

func newProbe(context.Context, pipeline.Handle) (pipeline.Plugin, error) { return probe{}, nil }

type buildLog struct {
	mu   sync.Mutex
	seen map[types.NamespacedName][]string
}

var builds = &buildLog{seen: map[types.NamespacedName][]string{}}

func (b *buildLog) record(tj *trainer.TrainJob) {
	b.mu.Lock()
	defer b.mu.Unlock()
	key := types.NamespacedName{Namespace: tj.Namespace, Name: tj.Name}
	b.seen[key] = append(b.seen[key], tj.ResourceVersion)
}

// Builds returns the resourceVersions of the TrainJob key that the Build
// phase of an in-process operator has run on, in the order it ran.
func Builds(key client.ObjectKey) []string {
	builds.mu.Lock()
	defer builds.mu.Unlock()
	return slices.Clone(builds.seen[key])
}

// BuiltVersion is nil once the Build phase has run on the TrainJob key at
// resourceVersion rv: a reconcile has seen that version.
func BuiltVersion(key client.ObjectKey, rv string) error {
	if got := Builds(key); !slices.Contains(got, rv) {
		return fmt.Errorf("TrainJob %s: no Build at resourceVersion %s (Builds at %v)", key, rv, got)
	}
	return nil
}

// controllerIdle is stack.ControllerIdle of controller-runtime's process-wide registry: the controllers name
// of every operator the test process runs.
func controllerIdle(name string) func(context.Context) error {
	return func(context.Context) error {
		families, err := crmetrics.Registry.Gather()
		if err != nil {
			return err
		}
		return stack.ControllerIdle(families, name)
	}
}

// Settled waits until the TrainJob controllers of the test process are idle
// at two polls in a row, Interval apart. A worker takes a request off the
// queue a few instructions before it counts itself active; a request in
// that gap at the first poll is counted at the second, or done. So every
// request queued before Settled was called has been reconciled to the end
// when it returns.
//
// It proves nothing about events not yet queued: call it once something
// positive shows that the events that matter have reached the controller
// (the cache holds the version that caused them, a TrainJob created after
// them was built: the controller queues the events of one informer in the
// order it delivers them, first in first out).
func Settled(t testing.TB) {
	t.Helper()
	ControllerSettled(t, controller.TrainJobControllerName)
}

// ControllerSettled is Settled for the controller name (the OptimizationJob
// controller's, say).
func ControllerSettled(t testing.TB, name string) {
	t.Helper()
	if err := Poll(t.Context(), Timeout, stack.Settled(controllerIdle(name))); err != nil {
		t.Fatalf("the %s settles: %v", name, err)
	}
}
