package list

import (
	"context"
	"strconv"
	"strings"

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

// runtimeDefaults reads each runtime once per command. A runtime that cannot be read (gone, or no right to
// read it — users often may read TrainJobs but not ClusterTrainingRuntimes) leaves the columns unknown.
type runtimeDefaults struct {
	c     client.Reader
	cache map[string]defaults
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
	if nodes == 0 || perNode == 0 {
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
	ref := tj.Spec.RuntimeRef
	kind := ptr.Deref(ref.Kind, trainer.ClusterTrainingRuntimeKind)
	key := kind + "/" + tj.Namespace + "/" + ref.Name
	if kind == trainer.ClusterTrainingRuntimeKind {
		key = kind + "/" + ref.Name
	}
	if d, ok := r.cache[key]; ok {
		return d
	}
	var spec *trainer.TrainingRuntimeSpec
	switch kind {
	case trainer.ClusterTrainingRuntimeKind:
		rt := &trainer.ClusterTrainingRuntime{}
		if r.c.Get(ctx, client.ObjectKey{Name: ref.Name}, rt) == nil {
			spec = &rt.Spec
		}
	case trainer.TrainingRuntimeKind:
		rt := &trainer.TrainingRuntime{}
		if r.c.Get(ctx, client.ObjectKey{Namespace: tj.Namespace, Name: ref.Name}, rt) == nil {
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
	r.cache[key] = d
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
