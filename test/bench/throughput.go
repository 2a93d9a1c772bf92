package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"golang.org/x/sync/errgroup"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
)

// runtimeName is the runtime of every TrainJob of the benchmark: the shipped torch runtime, one node.
const runtimeName = "torch-distributed"

// createWorkers is how many creates are in flight at once; the client's rate limiter sets the pace.
const createWorkers = 32

var jobSetGVR = schema.GroupVersionResource{Group: "jobset.x-k8s.io", Version: "v1alpha2", Resource: "jobsets"}

// roundTimeout bounds one round of n objects: generous, for a machine shared with builds.
func roundTimeout(n int) time.Duration { return 2*time.Minute + time.Duration(n)*500*time.Millisecond }

// kind of a round: A creates TrainJobs and the operator makes the JobSets, B creates the JobSets, C creates
// TrainJobs and writes what the operator would (floor.go).
type kind string

const (
	kindA kind = "A"
	kindB kind = "B"
	kindC kind = "C"
)

// round is the result of one round.
type round struct {
	kind       kind
	seconds    float64
	created    float64            // seconds from the first create until the last create returned
	requests   operatorRequests   // the operator's, in the round's namespace (A only)
	failed     float64            // failed reconciles during the round (A only)
	reconciles float64            // reconciles of the TrainJob controller during the round (A only)
	cpu        map[string]float64 // CPU seconds of each program from the first create until the n-th JobSet
	leftover   float64            // CPU seconds the cluster used, after the clean-up of the round before, to go quiet
	steal      float64            // CPU seconds the host took from the machine during the round
	tail       float64            // CPU seconds the cluster used after the round until it was quiet
}

// throughput runs the warm-up, Repeat blocks of A B C C B A, and a profiled A round. Each kind's mean
// position in a block is the same, so that a machine slowing down or speeding up within a block favours none.
func (b *bench) throughput(ctx context.Context) error {
	t := &b.summary.Throughput
	warm := max(1, b.k.N/5)
	b.logf("throughput: warm-up, A, B and C with %d objects (A's first TrainJob gives what B and C write)", warm)
	for _, k := range []kind{kindA, kindB, kindC} {
		if _, err := b.round(ctx, k, warm, "bench-warmup-"+strings.ToLower(string(k))); err != nil {
			return err
		}
	}
	requests := newOperatorRequests()
	reconciles := 0.0
	for r := 1; r <= b.k.Repeat; r++ {
		var first [2]float64 // A and B of the block's first half
		for i, k := range []kind{kindA, kindB, kindC, kindC, kindB, kindA} {
			res, err := b.round(ctx, k, b.k.N, fmt.Sprintf("bench-r%d-%d-%s", r, i+1, strings.ToLower(string(k))))
			if err != nil {
				return err
			}
			b.logf("  repeat %d %s: %d JobSets in %.2fs (creates returned after %.2fs; %.2f CPU seconds to go quiet before, %.2f after; host took %.2f CPU seconds)",
				r, k, b.k.N, res.seconds, res.created, res.leftover, res.tail, res.steal)
			switch k {
			case kindA:
				t.A = append(t.A, res.seconds)
				t.ACreated = append(t.ACreated, res.created)
				t.ACPU = append(t.ACPU, res.cpu)
				t.ASteal = append(t.ASteal, res.steal)
				requests.add(res.requests)
				t.FailedReconciles += res.failed
				reconciles += res.reconciles
			case kindB:
				t.B = append(t.B, res.seconds)
				t.BCPU = append(t.BCPU, res.cpu)
				t.BSteal = append(t.BSteal, res.steal)
			case kindC:
				t.C = append(t.C, res.seconds)
				t.CCPU = append(t.CCPU, res.cpu)
				t.CSteal = append(t.CSteal, res.steal)
			}
			// Pairs: the first A with the first B and the first C, the last A with the last B and C.
			switch i {
			case 0:
				first[0] = res.seconds
			case 1:
				first[1] = res.seconds
			case 2:
				t.Ratio = append(t.Ratio, first[0]/first[1])
				t.RatioC = append(t.RatioC, first[0]/res.seconds)
			case 5:
				lastB, lastC := t.B[len(t.B)-1], t.C[len(t.C)-1]
				t.Ratio = append(t.Ratio, res.seconds/lastB)
				t.RatioC = append(t.RatioC, res.seconds/lastC)
			}
		}
	}
	trainJobs := len(t.A) * b.k.N
	t.WritesPerTrainJob = requests.writes.perObject(trainJobs)
	t.EventsPerTrainJob = requests.events.perObject(trainJobs)
	t.ReadsPerTrainJob = requests.reads.perObject(trainJobs)
	t.FailedWritesPerTrainJob = requests.failedWrites.perObject(trainJobs)
	t.ReconcilesPerTrainJob = reconciles / float64(trainJobs)
	t.Writes = float64(requests.writes.total()) / float64(trainJobs)
	t.Events = float64(requests.events.total()) / float64(trainJobs)
	t.Requests = float64(requests.writes.total()+requests.events.total()+requests.reads.total()) / float64(trainJobs)
	return b.profiledRound(ctx)
}

// profiledRound runs one more A round (not counted) while the CPU of the operator and of the API server are
// profiled.
func (b *bench) profiledRound(ctx context.Context) error {
	seconds := int(math.Ceil(median(b.summary.Throughput.A)))
	b.logf("throughput: one more A round (not counted) with a %ds CPU profile of the operator and of the API server", seconds)
	profile := filepath.Join(b.out, "operator-cpu.pprof")
	var g errgroup.Group
	g.Go(func() error {
		top, err := pprofTop(ctx, b.pprofAddr, fmt.Sprintf("profile?seconds=%d", seconds), profile, b.binary)
		b.summary.Profiles.CPU = top
		return err
	})
	g.Go(func() error {
		top, err := b.apiServerCPU(ctx, seconds, filepath.Join(b.out, "apiserver-cpu.pprof"))
		b.summary.Profiles.APIServerCPU = top
		return err
	})
	_, err := b.round(ctx, kindA, b.k.N, "bench-profiled-a")
	return errors.Join(err, g.Wait())
}

// round creates n objects of kind k in a fresh namespace and times the first create until the n-th JobSet
// exists; for A it then waits until the operator settles and counts its requests and failed reconciles.
// The namespace's objects are deleted after.
func (b *bench) round(ctx context.Context, k kind, n int, ns string) (res round, err error) {
	res.kind = k
	if err := b.createNamespace(ctx, ns); err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, b.cleanUp(ctx, ns)) }()
	ctx, cancel := context.WithTimeout(ctx, roundTimeout(n))
	defer cancel()
	jobSets, err := b.watchJobSets(ctx, ns)
	if err != nil {
		return res, err
	}
	if _, err := b.audit.next(); err != nil { // what came before is not this round's
		return res, err
	}
	var before operatorMetrics
	if k == kindA {
		if before, err = scrape(ctx, b.stack.Operator); err != nil {
			return res, err
		}
	} else if b.templates == nil {
		return res, fmt.Errorf("a %s round needs what the operator wrote in an A round first", k)
	}

	if res.leftover, err = waitQuiet(ctx, time.Minute); err != nil {
		return res, err
	}
	cpu, err := cpuSeconds()
	if err != nil {
		return res, err
	}
	steal, err := stealSeconds()
	if err != nil {
		return res, err
	}
	start := time.Now()
	// created reports the end of the round's creates of TrainJobs (A, C) or JobSets (B); floorDone the end of
	// C's writes after them, which, like the operator's status writes in A, the round does not wait for.
	created, floorDone := make(chan error, 1), make(chan error, 1)
	go func() {
		switch k {
		case kindA:
			created <- createAll(ctx, b.driver, n, func(i int) client.Object { return trainJob(ns, i, false) }, nil)
		case kindB:
			created <- createAll(ctx, b.driver, n, func(i int) client.Object { return b.jobSet(ns, i) }, nil)
		case kindC:
			floorDone <- b.floor(ctx, ns, n, created)
		}
	}()
	end, createdAt, err := jobSets.until(ctx, n, created)
	if k == kindC {
		err = errors.Join(err, <-floorDone)
	}
	if err != nil {
		return res, fmt.Errorf("round %s (%s, %d objects): %w", ns, k, n, err)
	}
	res.seconds, res.created = end.Sub(start).Seconds(), createdAt.Sub(start).Seconds()
	if res.cpu, err = cpuSince(cpu); err != nil {
		return res, err
	}
	if res.steal, err = stealSeconds(); err != nil {
		return res, err
	}
	res.steal -= steal
	// What the round's objects still cause once its clock stopped (the JobSet controller's Jobs, Services and
	// JobSet status; in A and C the status writes and Events not yet sent), which the next round must not pay.
	if res.tail, err = waitQuiet(ctx, roundTimeout(n)); err != nil {
		return res, err
	}
	if k != kindA {
		return res, nil
	}
	after, err := waitIdle(ctx, b.stack.Operator, roundTimeout(n), nil)
	if err != nil {
		return res, err
	}
	if b.templates == nil {
		if err := b.takeTemplates(ctx, ns); err != nil {
			return res, err
		}
	}
	res.failed = after.failedReconciles() - before.failedReconciles()
	res.reconciles = after.reconciles() - before.reconciles()
	events, err := b.audit.next()
	if err != nil {
		return res, err
	}
	res.requests = newOperatorRequests()
	res.requests.count(events, b.isOperator, ns)
	return res, nil
}

// createAll creates the n objects that object(i) makes with client c, createWorkers at a time, and hands each
// to created when it is not nil.
func createAll(ctx context.Context, c client.Client, n int, object func(int) client.Object, created func(client.Object)) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(createWorkers)
	for i := range n {
		g.Go(func() error {
			obj := object(i)
			if err := c.Create(ctx, obj); err != nil {
				return fmt.Errorf("create %T %s/%s: %w", obj, obj.GetNamespace(), obj.GetName(), err)
			}
			if created != nil {
				created(obj)
			}
			return nil
		})
	}
	return g.Wait()
}

// trainJob is the i-th TrainJob of a namespace: the torch runtime, one node.
func trainJob(ns string, i int, suspend bool) *trainer.TrainJob {
	tj := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("tj-%04d", i)},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{Name: runtimeName},
			Trainer:    &trainer.Trainer{NumNodes: ptr.To[int32](1)},
		},
	}
	if suspend {
		tj.Spec.Suspend = ptr.To(true)
	}
	return tj
}

// jobSet is the i-th JobSet of a B round: the operator's, without an owner.
func (b *bench) jobSet(ns string, i int) *jobsetv1alpha2.JobSet {
	js := b.templates.jobSet.DeepCopy()
	js.Namespace, js.Name = ns, fmt.Sprintf("tj-%04d", i)
	return js
}

// cleanUp deletes what a measurement left in ns (the namespace itself stays: the api profile has no
// namespace controller to empty it) and waits until the operator has settled.
func (b *bench) cleanUp(ctx context.Context, ns string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
	defer cancel()
	// The JobSet controller first makes the Jobs and Services of every JobSet, which would otherwise outlive
	// the clean-up: the api profile has no garbage collector.
	if _, err := waitQuiet(ctx, 2*time.Minute); err != nil {
		return err
	}
	background := client.PropagationPolicy(metav1.DeletePropagationBackground)
	// Everything a round made goes, the JobSet controller's Services and everyone's Events too, so that every
	// round starts from the same cluster: an API server holding more objects spends more of its CPU on its
	// garbage collector.
	for _, obj := range []client.Object{&trainer.TrainJob{}, &jobsetv1alpha2.JobSet{}, &batchv1.Job{}, &corev1.ConfigMap{}, &corev1.Secret{},
		&corev1.Service{}, &eventsv1.Event{}} {
		if err := b.admin.DeleteAllOf(ctx, obj, client.InNamespace(ns), background); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete %T in %s: %w", obj, ns, err)
		}
	}
	if err := poll(ctx, "the TrainJobs of "+ns+" to go", 200*time.Millisecond, time.Minute, func(ctx context.Context) (bool, error) {
		var list trainer.TrainJobList
		if err := b.admin.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return false, err
		}
		return len(list.Items) == 0, fmt.Errorf("%d left", len(list.Items))
	}); err != nil {
		return err
	}
	_, err := waitIdle(ctx, b.stack.Operator, 2*time.Minute, nil)
	return err
}

// jobSetWatch follows the JobSets of a namespace.
type jobSetWatch struct {
	b    *bench
	ns   string
	rv   string
	w    watch.Interface
	seen map[string]bool
}

// watchJobSets starts following the JobSets of ns (its objects' metadata only).
func (b *bench) watchJobSets(ctx context.Context, ns string) (*jobSetWatch, error) {
	jw := &jobSetWatch{b: b, ns: ns, seen: map[string]bool{}}
	return jw, jw.restart(ctx)
}

// restart lists the JobSets and watches from there.
func (jw *jobSetWatch) restart(ctx context.Context) error {
	list, err := jw.b.meta.Resource(jobSetGVR).Namespace(jw.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, js := range list.Items {
		jw.seen[js.Name] = true
	}
	jw.rv = list.ResourceVersion
	jw.w, err = jw.b.meta.Resource(jobSetGVR).Namespace(jw.ns).Watch(ctx, metav1.ListOptions{ResourceVersion: jw.rv})
	return err
}

// until returns when n JobSets exist and the creates returned: the time the n-th JobSet was seen, and the
// time the creates returned. created reports the end of the creates; an error there ends the wait.
func (jw *jobSetWatch) until(ctx context.Context, n int, created <-chan error) (end, createdAt time.Time, err error) {
	defer func() { jw.w.Stop() }()
	for len(jw.seen) < n || created != nil {
		if len(jw.seen) >= n && end.IsZero() {
			end = time.Now()
		}
		select {
		case <-ctx.Done():
			return end, createdAt, fmt.Errorf("%d of %d JobSets after the deadline: %w", len(jw.seen), n, ctx.Err())
		case err := <-created:
			if err != nil {
				return end, createdAt, err
			}
			created, createdAt = nil, time.Now()
		case ev, ok := <-jw.w.ResultChan():
			if !ok || ev.Type == watch.Error {
				jw.w.Stop()
				if err := jw.restart(ctx); err != nil {
					return end, createdAt, err
				}
				continue
			}
			if ev.Type == watch.Added {
				if obj, ok := ev.Object.(metav1.Object); ok {
					jw.seen[obj.GetName()] = true
				}
			}
		}
	}
	if end.IsZero() {
		end = time.Now()
	}
	return end, createdAt, nil
}
