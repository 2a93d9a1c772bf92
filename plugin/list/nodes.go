package list

import (
	"context"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/printers"
)

// defaults are what a runtime gives a TrainJob that does not say: nodes, and GPUs per node. Zero: unknown.
type defaults struct {
	nodes       int32
	gpusPerNode int64
}

// runtimeDefaults reads each runtime once per command, in the background from when a page of TrainJobs
// that need it arrives (prefetch), so that its request overlaps the next page's. A runtime that cannot be
// read (gone, or no right to read it — users often may read TrainJobs but not ClusterTrainingRuntimes)
// leaves the columns unknown.
type runtimeDefaults struct {
	c     client.Reader
	mu    sync.Mutex
	cache map[string]*runtimeLookup
}

// runtimeLookup is the read of one runtime: d is set when done is closed.
type runtimeLookup struct {
	done chan struct{}
	d    defaults
}

func newRuntimeDefaults(c client.Reader) *runtimeDefaults {
	return &runtimeDefaults{c: c, cache: map[string]*runtimeLookup{}}
}

// prefetch starts reading the runtimes that items need and that are not read yet.
func (r *runtimeDefaults) prefetch(ctx context.Context, items []trainer.TrainJob) {
	for i := range items {
		if needsRuntime(&items[i]) {
			r.start(ctx, &items[i])
		}
	}
}

// needsRuntime tells whether tj leaves its nodes or its resources per node to its runtime.
func needsRuntime(tj *trainer.TrainJob) bool {
	t := tj.Spec.Trainer
	return t == nil || ptr.Deref(t.NumNodes, 0) == 0 || t.ResourcesPerNode == nil
}

// of returns the NODES and GPUS cells of tj.
func (r *runtimeDefaults) of(ctx context.Context, tj *trainer.TrainJob) (string, string) {
	var nodes int32
	var perNode int64
	if t := tj.Spec.Trainer; t != nil {
		nodes = ptr.Deref(t.NumNodes, 0)
		if t.ResourcesPerNode != nil {
			perNode = GPUs(*t.ResourcesPerNode)
		}
	}
	if needsRuntime(tj) {
		d := r.lookup(ctx, tj)
		if nodes == 0 {
			nodes = d.nodes
		}
		if perNode == 0 && (tj.Spec.Trainer == nil || tj.Spec.Trainer.ResourcesPerNode == nil) {
			perNode = d.gpusPerNode
		}
	}
	n, g := printers.None, printers.None
	if nodes > 0 {
		n = strconv.Itoa(int(nodes))
		if perNode > 0 {
			g = strconv.FormatInt(int64(nodes)*perNode, 10)
		} else if tj.Spec.Trainer != nil && tj.Spec.Trainer.ResourcesPerNode != nil {
			g = "0"
		}
	}
	return n, g
}

func (r *runtimeDefaults) lookup(ctx context.Context, tj *trainer.TrainJob) defaults {
	l := r.start(ctx, tj)
	<-l.done
	return l.d
}

// start reads tj's runtime in the background, once.
func (r *runtimeDefaults) start(ctx context.Context, tj *trainer.TrainJob) *runtimeLookup {
	ref := tj.Spec.RuntimeRef
	kind := ptr.Deref(ref.Kind, trainer.ClusterTrainingRuntimeKind)
	key := kind + "/" + tj.Namespace + "/" + ref.Name
	if kind == trainer.ClusterTrainingRuntimeKind {
		key = kind + "/" + ref.Name
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if l, ok := r.cache[key]; ok {
		return l
	}
	l := &runtimeLookup{done: make(chan struct{})}
	r.cache[key] = l
	namespace := tj.Namespace
	go func() {
		defer close(l.done)
		l.d = r.read(ctx, kind, namespace, ref.Name)
	}()
	return l
}

// read reads the defaults of runtime kind/namespace/name.
func (r *runtimeDefaults) read(ctx context.Context, kind, namespace, name string) defaults {
	var spec *trainer.TrainingRuntimeSpec
	switch kind {
	case trainer.ClusterTrainingRuntimeKind:
		rt := &trainer.ClusterTrainingRuntime{}
		if r.c.Get(ctx, client.ObjectKey{Name: name}, rt) == nil {
			spec = &rt.Spec
		}
	case trainer.TrainingRuntimeKind:
		rt := &trainer.TrainingRuntime{}
		if r.c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, rt) == nil {
			spec = &rt.Spec
		}
	}
	d := defaults{}
	if spec != nil {
		if spec.MLPolicy != nil {
			d.nodes = ptr.Deref(spec.MLPolicy.NumNodes, 0)
		}
		d.gpusPerNode = trainerGPUs(spec)
	}
	return d
}

// trainerGPUs are the GPUs of one trainer node in a runtime: those of the trainer container ("node") of the
// replicated job that runs the trainer step.
func trainerGPUs(spec *trainer.TrainingRuntimeSpec) int64 {
	for _, rj := range spec.Template.Spec.ReplicatedJobs {
		if rj.Template.Labels[trainer.AncestorLabel] != trainer.AncestorTrainer && rj.Name != trainer.Node {
			continue
		}
		for _, c := range rj.Template.Spec.Template.Spec.Containers {
			if c.Name == trainer.Node {
				return GPUs(c.Resources)
			}
		}
	}
	return 0
}

// GPUs counts the GPUs in r: every resource whose name contains "gpu" (as upstream Trainer detects them),
// from limits, else requests.
func GPUs(r corev1.ResourceRequirements) int64 {
	var n int64
	list := r.Limits
	if len(list) == 0 {
		list = r.Requests
	}
	for name, q := range list {
		if containsGPU(string(name)) {
			n += q.Value()
		}
	}
	return n
}

func containsGPU(resource string) bool { return strings.Contains(resource, "gpu") }
