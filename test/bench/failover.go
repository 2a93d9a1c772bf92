package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/config"
)

// FailoverResult: the leader of two replicas is killed with SIGKILL (no lease released) a second into a burst
// of creates and run again at once, as the kubelet restarts a container; how long until a replica leads again,
// and until the last TrainJob of the burst is built.
type FailoverResult struct {
	N int `json:"n"`
	// LeaseDurationSeconds is the operator's leaderElection.leaseDuration: the target is that plus a few seconds.
	LeaseDurationSeconds float64 `json:"leaseDurationSeconds"`
	// CreatedBeforeKill is how many creates had returned when the leader was killed.
	CreatedBeforeKill int `json:"createdBeforeKill"`
	// LeaseSeconds is from the kill until a replica says it leads (the other one, or the killed one run again).
	LeaseSeconds float64 `json:"leaseSeconds"`
	// LastBuiltSeconds is from the kill until the last TrainJob of the burst has ComponentsCreated=True.
	LastBuiltSeconds float64 `json:"lastBuiltSeconds"`
	// CreatedSeconds is from the kill until the last create returned.
	CreatedSeconds float64 `json:"createdSeconds"`
}

// failoverReplicas are the Deployment's replicas (config/manager).
const failoverReplicas = 2

// killAfter is how long into the burst the leader is killed.
const killAfter = time.Second

// runFailover is make bench's failover measurement, on a fresh cluster with the operator's two replicas.
func runFailover(ctx context.Context, k Knobs, w io.Writer, s *Summary) error {
	return measure(ctx, k, w, s, "failover", apiProfile(), failoverReplicas, func(ctx context.Context, b *bench) error { return b.failover(ctx) })
}

// failover creates the knobs' FailoverN TrainJobs, createWorkers at a time, retrying those that meet the
// webhooks of the killed replica, kills the leader a second in and runs it again at once, and times the kill
// until a replica leads again and until the last TrainJob is built.
func (b *bench) failover(ctx context.Context) error {
	n := b.k.FailoverN
	res := FailoverResult{N: n, LeaseDurationSeconds: cmp.Or(b.stack.Operator.Config.LeaderElection.LeaseDuration.Duration, config.DefaultLeaseDuration).Seconds()}
	const ns = "bench-failover"
	if err := b.createNamespace(ctx, ns); err != nil {
		return err
	}
	var leader int
	if err := poll(ctx, "a replica leads", 200*time.Millisecond, 2*time.Minute, func(ctx context.Context) (bool, error) {
		var err error
		leader, err = b.stack.Leader(ctx)
		return err == nil, nil
	}); err != nil {
		return err
	}
	if _, err := waitQuiet(ctx, time.Minute); err != nil {
		return err
	}
	b.logf("failover: %d TrainJobs, SIGKILL of the leader (replica %d) %v in", n, leader, killAfter)
	ctx, cancel := context.WithTimeout(ctx, roundTimeout(n)+2*time.Minute)
	defer cancel()
	trainJobs, err := b.watchTrainJobs(ctx, ns)
	if err != nil {
		return err
	}

	var created atomic.Int32
	var killed, leads, lastCreated time.Time
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		g, gctx := errgroup.WithContext(gctx)
		g.SetLimit(createWorkers)
		for i := range n {
			g.Go(func() error {
				if err := b.createRetrying(gctx, trainJob(ns, i, false)); err != nil {
					return err
				}
				created.Add(1)
				mu.Lock()
				lastCreated = time.Now()
				mu.Unlock()
				return nil
			})
		}
		return g.Wait()
	})
	g.Go(func() error {
		select {
		case <-time.After(killAfter):
		case <-gctx.Done():
			return gctx.Err()
		}
		if err := b.stack.CrashReplica(leader); err != nil {
			return err
		}
		killed = time.Now()
		res.CreatedBeforeKill = int(created.Load())
		// The killed replica runs again at once, as the kubelet restarts its container (restartPolicy Always,
		// no back-off the first time); it waits for the Lease as the other one does.
		g.Go(func() error {
			_, err := b.stack.RestartExited(gctx)
			return err
		})
		// Leader skips the killed process: whichever replica it finds leading took the Lease after the kill.
		if err := poll(gctx, "a replica leads again", 100*time.Millisecond, 2*time.Minute, func(ctx context.Context) (bool, error) {
			_, err := b.stack.Leader(ctx)
			return err == nil, nil
		}); err != nil {
			return err
		}
		leads = time.Now()
		return nil
	})
	var lastBuilt time.Time
	g.Go(func() error {
		built := map[string]bool{}
		for len(built) < n {
			select {
			case <-gctx.Done():
				return fmt.Errorf("%d of %d TrainJobs with ComponentsCreated=True: %w", len(built), n, gctx.Err())
			case tj, ok := <-trainJobs:
				if !ok {
					return fmt.Errorf("the watch of TrainJobs in %s ended", ns)
				}
				if !built[tj.Name] && meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobComponentsCreated) {
					built[tj.Name] = true
					lastBuilt = time.Now()
				}
			}
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		return fmt.Errorf("failover: %w", err)
	}
	res.LeaseSeconds = leads.Sub(killed).Seconds()
	// A burst shorter than killAfter is built before the kill.
	res.LastBuiltSeconds = max(0, lastBuilt.Sub(killed).Seconds())
	res.CreatedSeconds = max(0, lastCreated.Sub(killed).Seconds())
	b.logf("  SIGKILL after %d creates; a replica leads again %.1fs after, the last create returned %.1fs after, the last TrainJob is built %.1fs after",
		res.CreatedBeforeKill, res.LeaseSeconds, res.CreatedSeconds, res.LastBuiltSeconds)
	b.summary.Failover = &res
	return nil
}

// createRetrying creates tj, again while the webhooks it reaches are down (a replica killed), for at most two
// minutes. A create that went through before an error reached the client counts as done.
func (b *bench) createRetrying(ctx context.Context, tj *trainer.TrainJob) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		last = b.driver.Create(ctx, tj.DeepCopy())
		if apierrors.IsAlreadyExists(last) {
			last = nil
		}
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("create TrainJob %s/%s: %w (last: %v)", tj.Namespace, tj.Name, err, last)
	}
	return nil
}

// watchTrainJobs sends the TrainJobs of ns as the API server reports them, until ctx ends, and then closes the
// channel. A watch that the API server ends (it does under load) is followed by a list, whose items are sent,
// and a watch from there, as the throughput rounds' JobSet watch does.
func (b *bench) watchTrainJobs(ctx context.Context, ns string) (<-chan *trainer.TrainJob, error) {
	w, err := b.watcher.Watch(ctx, &trainer.TrainJobList{}, client.InNamespace(ns))
	if err != nil {
		return nil, err
	}
	ch := make(chan *trainer.TrainJob)
	send := func(tj *trainer.TrainJob) bool {
		select {
		case ch <- tj:
			return true
		case <-ctx.Done():
			return false
		}
	}
	go func() {
		defer close(ch)
		defer func() { w.Stop() }()
		for {
			var ev watch.Event
			var ok bool
			select {
			case <-ctx.Done():
				return
			case ev, ok = <-w.ResultChan():
			}
			if ok && ev.Type != watch.Error {
				if tj, isTrainJob := ev.Object.(*trainer.TrainJob); isTrainJob && !send(tj) {
					return
				}
				continue
			}
			w.Stop()
			var list trainer.TrainJobList
			if err := b.admin.List(ctx, &list, client.InNamespace(ns)); err != nil {
				return
			}
			for i := range list.Items {
				if !send(&list.Items[i]) {
					return
				}
			}
			if w, err = b.watcher.Watch(ctx, &trainer.TrainJobList{}, client.InNamespace(ns),
				&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}}); err != nil {
				return
			}
		}
	}()
	return ch, nil
}
