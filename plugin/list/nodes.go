package list

import (
	"context"
	"strconv"
	"sync"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/snapshot"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/printers"
)

// runtimeDefaults reads each runtime once per command, in the background from when a page of TrainJobs
// that need it arrives (prefetch), so that its request overlaps the next page's. A runtime that cannot be
// read (gone, or no right to read it — users often may read TrainJobs but not ClusterTrainingRuntimes)
// leaves to the TrainJob alone what it can say.
type runtimeDefaults struct {
	c  client.Reader
	fw *pipeline.Framework
	// claims reads the ResourceClaimTemplates that the TrainJobs' pods claim GPUs from, a namespace's in one
	// request, only for a TrainJob whose pods have claims.
	claims *cmdutil.ClaimTemplates
	mu     sync.Mutex
	cache  map[string]*runtimeLookup
}

// runtimeLookup is the read of one runtime: rt is set (nil when unreadable) when done is closed.
type runtimeLookup struct {
	done chan struct{}
	rt   *pipeline.Runtime
}

// newRuntimeDefaults reads runtimes with c and sizes TrainJobs with fw, the pipeline the operator runs.
func newRuntimeDefaults(c client.Reader, fw *pipeline.Framework) *runtimeDefaults {
	return &runtimeDefaults{c: c, fw: fw, claims: cmdutil.NewClaimTemplates(c), cache: map[string]*runtimeLookup{}}
}

// prefetch starts reading the runtimes that items need and that are not read yet: every TrainJob's, since
// the runtime's policy decides how many pods of each replicated job ask for GPUs (an MPI launcher run as a
// node asks for none), and resourcesPerNode is merged into the runtime's trainer container key by key.
func (r *runtimeDefaults) prefetch(ctx context.Context, items []trainer.TrainJob) {
	for i := range items {
		r.start(ctx, &items[i])
	}
}

// of returns the NODES and GPUS cells of tj.
func (r *runtimeDefaults) of(ctx context.Context, tj *trainer.TrainJob) (string, string) {
	return cells(ctx, r.fw, r.claims, tj, r.lookup(ctx, tj))
}

// cells are the NODES and GPUS cells of tj on runtime rt (nil: unknown). NODES is numNodes of the TrainJob,
// else of the runtime's ML policy. GPUS is what the pods the operator builds ask for: the pipeline's
// enforcement points (fw.RuntimeInfo) size every replicated job and merge resourcesPerNode, and each pod's
// containers and DRA claims are counted as the pipeline counts GPUs (pipeline.PodGPUs), so list and render
// agree. The claims' ResourceClaimTemplates, which the offline pipeline does not see, are read with claims (nil:
// none). Without the runtime, GPUS is NODES times the GPUs of resourcesPerNode, when it names some.
func cells(ctx context.Context, fw *pipeline.Framework, claims client.Reader, tj *trainer.TrainJob, rt *pipeline.Runtime) (string, string) {
	var nodes int32
	if t := tj.Spec.Trainer; t != nil {
		nodes = ptr.Deref(t.NumNodes, 0)
	}
	if rt != nil && nodes == 0 && rt.Spec.MLPolicy != nil {
		nodes = ptr.Deref(rt.Spec.MLPolicy.NumNodes, 0)
	}
	n, g := printers.None, printers.None
	if nodes > 0 {
		n = strconv.Itoa(int(nodes))
	}
	if rt != nil {
		info, err := fw.RuntimeInfo(ctx, tj, rt, pipeline.BuildOptions{})
		if err == nil && claims != nil {
			err = info.ReadClaims(ctx, claims, tj.Namespace)
		}
		if err == nil {
			return n, strconv.FormatInt(podGPUs(info), 10)
		}
	}
	if t := tj.Spec.Trainer; t != nil && t.ResourcesPerNode != nil && nodes > 0 {
		if perNode := pipeline.GPUsPerNode(*t.ResourcesPerNode, nil); perNode > 0 {
			g = strconv.FormatInt(int64(nodes)*perNode, 10)
		}
	}
	return n, g
}

// podGPUs are the GPUs all pods of info ask for.
func podGPUs(info *pipeline.RuntimeInfo) int64 {
	var n int64
	for k := range info.PodSets {
		ps := &info.PodSets[k]
		pods := int64(ps.Count)
		if rj := info.ReplicatedJob(ps); rj != nil {
			pods *= int64(max(rj.Replicas, 1))
		}
		n += pods * pipeline.PodGPUs(&ps.Template.Spec, ps.DeviceRequests)
	}
	return n
}

func (r *runtimeDefaults) lookup(ctx context.Context, tj *trainer.TrainJob) *pipeline.Runtime {
	l := r.start(ctx, tj)
	<-l.done
	return l.rt
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
	tj = tj.DeepCopy() // the caller's page may be reused before the read ends
	go func() {
		defer close(l.done)
		l.rt = r.read(ctx, tj)
	}()
	return l
}

// read reads tj's runtime, or nil when it cannot.
func (r *runtimeDefaults) read(ctx context.Context, tj *trainer.TrainJob) *pipeline.Runtime {
	rt, err := snapshot.LiveRuntime(ctx, r.c, nil, tj)
	if err != nil {
		return nil
	}
	return rt
}
