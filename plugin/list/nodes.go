package list

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"strconv"
	"sync"

	"k8s.io/apimachinery/pkg/types"
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
	// sized are the cells of each TrainJob spec sized on each runtime: the pipeline's sizing copies the
	// runtime's JobSet template, which 10 000 TrainJobs of a few specs would copy 10 000 times.
	sized map[sizeKey]sizedCells
}

// sizeKey is what the NODES and GPUS cells of a TrainJob depend on: its runtime as read (a runtime changed has
// another resourceVersion), its namespace (the ResourceClaimTemplates its pods claim GPUs from) and its spec.
// The pipeline sizes the pods from the spec and the runtime alone: the TrainJob's name only names what it
// builds, so TrainJobs that differ in name, labels or status are sized once.
type sizeKey struct {
	runtime   string
	uid       types.UID
	version   string
	namespace string
	spec      [sha256.Size]byte
}

type sizedCells struct{ nodes, gpus string }

// runtimeLookup is the read of one runtime: rt is set (nil when unreadable) when done is closed.
type runtimeLookup struct {
	done chan struct{}
	rt   *pipeline.Runtime
}

// newRuntimeDefaults reads runtimes with c and sizes TrainJobs with fw, the pipeline the operator runs.
func newRuntimeDefaults(c client.Reader, fw *pipeline.Framework) *runtimeDefaults {
	return &runtimeDefaults{c: c, fw: fw, claims: cmdutil.NewClaimTemplates(c), cache: map[string]*runtimeLookup{}, sized: map[sizeKey]sizedCells{}}
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
	return r.size(ctx, tj, r.lookup(ctx, tj))
}

// size returns the NODES and GPUS cells of tj on runtime rt (nil: unknown), sized once per spec, namespace and
// runtime as read.
func (r *runtimeDefaults) size(ctx context.Context, tj *trainer.TrainJob, rt *pipeline.Runtime) (string, string) {
	spec, err := json.Marshal(&tj.Spec)
	if rt == nil || err != nil {
		n, g, _ := cells(ctx, r.fw, r.claims, tj, rt)
		return n, g
	}
	o := rt.Object
	key := sizeKey{runtime: rt.GroupKind().Kind + "/" + o.GetNamespace() + "/" + o.GetName(), uid: o.GetUID(), version: o.GetResourceVersion(),
		namespace: tj.Namespace, spec: sha256.Sum256(spec)}
	r.mu.Lock()
	c, ok := r.sized[key]
	r.mu.Unlock()
	if ok {
		return c.nodes, c.gpus
	}
	n, g, exact := cells(ctx, r.fw, r.claims, tj, rt)
	if exact {
		r.mu.Lock()
		r.sized[key] = sizedCells{nodes: n, gpus: g}
		r.mu.Unlock()
	}
	return n, g
}

// cells are the NODES and GPUS cells of tj on runtime rt (nil: unknown). NODES is numNodes of the TrainJob,
// else of the runtime's ML policy. GPUS is what the pods the operator builds ask for: the pipeline's
// enforcement points (fw.RuntimeInfo) size every replicated job and merge resourcesPerNode, and each pod's
// containers and DRA claims are counted as the pipeline counts GPUs (pipeline.PodGPUs), so list and render
// agree. The claims' ResourceClaimTemplates, which the offline pipeline does not see, are read with claims (nil:
// none). Without the runtime, GPUS is NODES times the GPUs of resourcesPerNode, when it names some. exact tells
// that the pipeline sized the pods and that the same spec on the same runtime and namespace always has these
// cells: not when the pipeline or a read failed (the next may not), nor when a pod claims a ResourceClaim by
// name (one that does not exist yet counts no GPU, and may be created).
func cells(ctx context.Context, fw *pipeline.Framework, claims client.Reader, tj *trainer.TrainJob, rt *pipeline.Runtime) (nodeCell, gpuCell string, exact bool) {
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
			return n, strconv.FormatInt(podGPUs(info), 10), !claimsByName(info)
		}
	}
	if t := tj.Spec.Trainer; t != nil && t.ResourcesPerNode != nil && nodes > 0 {
		if perNode := pipeline.GPUsPerNode(*t.ResourcesPerNode, nil); perNode > 0 {
			g = strconv.FormatInt(int64(nodes)*perNode, 10)
		}
	}
	return n, g, false
}

// claimsByName tells whether a pod of info claims a ResourceClaim by its name.
func claimsByName(info *pipeline.RuntimeInfo) bool {
	for k := range info.PodSets {
		for _, c := range info.PodSets[k].Template.Spec.ResourceClaims {
			if ptr.Deref(c.ResourceClaimName, "") != "" {
				return true
			}
		}
	}
	return false
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
