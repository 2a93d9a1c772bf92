package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"golang.org/x/sync/errgroup"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
)

// LatencyResult is one steady offered load: Rate TrainJobs a second for Seconds, each create sent on
// schedule whatever the ones before it became (an open loop, as SIG Scalability's load tests offer it).
type LatencyResult struct {
	Rate    int `json:"ratePerSecond"`
	Seconds int `json:"seconds"`
	N       int `json:"trainJobs"`
	// JobSet is, per TrainJob, the time from sending its create until the benchmark's watch saw its JobSet;
	// Components until it saw ComponentsCreated=True in its status.
	JobSet     Percentiles `json:"createToJobSet"`
	Components Percentiles `json:"createToComponentsCreated"`
	// LateSeconds is how far behind its schedule the latest create was sent: the load was offered as planned
	// when it is small.
	LateSeconds float64 `json:"lateSeconds"`
}

// Percentiles of latencies, in seconds.
type Percentiles struct {
	P50 float64 `json:"p50Seconds"`
	P99 float64 `json:"p99Seconds"`
	Max float64 `json:"maxSeconds"`
}

// percentiles of v by nearest rank.
func percentiles(v []float64) Percentiles {
	if len(v) == 0 {
		return Percentiles{}
	}
	s := slices.Sorted(slices.Values(v))
	rank := func(p float64) float64 { return s[max(0, int(math.Ceil(p*float64(len(s))))-1)] }
	return Percentiles{P50: rank(0.50), P99: rank(0.99), Max: s[len(s)-1]}
}

// latency offers each of the knobs' rates in turn, each in a fresh namespace cleaned up after.
func (b *bench) latency(ctx context.Context) error {
	for _, rate := range b.k.LatencyRates {
		b.logf("latency: %d TrainJobs a second for %ds", rate, b.k.LatencySeconds)
		res, err := b.steadyLoad(ctx, rate, fmt.Sprintf("bench-latency-%d", rate))
		if err != nil {
			return err
		}
		b.logf("  create → JobSet p50 %.3fs p99 %.3fs max %.3fs; create → ComponentsCreated p50 %.3fs p99 %.3fs max %.3fs; latest create %.3fs late",
			res.JobSet.P50, res.JobSet.P99, res.JobSet.Max, res.Components.P50, res.Components.P99, res.Components.Max, res.LateSeconds)
		b.summary.Latency = append(b.summary.Latency, res)
	}
	return nil
}

// steadyLoad creates rate TrainJobs a second in ns for the knobs' seconds and times each until its JobSet and
// its ComponentsCreated=True are seen.
func (b *bench) steadyLoad(ctx context.Context, rate int, ns string) (res LatencyResult, err error) {
	n := rate * b.k.LatencySeconds
	res = LatencyResult{Rate: rate, Seconds: b.k.LatencySeconds, N: n}
	if err := b.createNamespace(ctx, ns); err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, b.cleanUp(ctx, ns)) }()
	if _, err := waitQuiet(ctx, time.Minute); err != nil {
		return res, err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(b.k.LatencySeconds)*time.Second+settleTimeout)
	defer cancel()

	sent := make([]time.Time, n)
	jobSet := make([]time.Time, n)
	components := make([]time.Time, n)
	// The watches start before the first create: the namespace is new, so they miss nothing.
	jobSets, err := b.meta.Resource(jobSetGVR).Namespace(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return res, err
	}
	defer jobSets.Stop()
	trainJobs, err := b.watchTrainJobs(ctx, ns)
	if err != nil {
		return res, err
	}

	g, gctx := errgroup.WithContext(ctx)
	sentAll := make(chan struct{})
	g.Go(func() error {
		defer close(sentAll)
		start := time.Now()
		creates, cctx := errgroup.WithContext(gctx)
		for i := range n {
			at := start.Add(time.Duration(i) * time.Second / time.Duration(rate))
			if wait := time.Until(at); wait > 0 {
				select {
				case <-time.After(wait):
				case <-cctx.Done():
					return creates.Wait()
				}
			}
			sent[i] = time.Now()
			res.LateSeconds = max(res.LateSeconds, sent[i].Sub(at).Seconds())
			creates.Go(func() error {
				tj := trainJob(ns, i, false)
				if err := b.driver.Create(cctx, tj); err != nil {
					return fmt.Errorf("create TrainJob %s/%s: %w", ns, tj.Name, err)
				}
				return nil
			})
		}
		return creates.Wait()
	})
	g.Go(func() error {
		// Only this goroutine writes jobSet and components; sent[i] is written before the create whose
		// objects this goroutine sees, and read after g.Wait.
		done := 0
		for done < n {
			select {
			case <-gctx.Done():
				return fmt.Errorf("%d of %d TrainJobs with ComponentsCreated=True: %w", done, n, gctx.Err())
			case ev, ok := <-jobSets.ResultChan():
				if !ok || ev.Type == watch.Error {
					return fmt.Errorf("the watch of JobSets in %s ended: %v", ns, ev.Object)
				}
				if i, ok := index(ev.Object, n); ok && jobSet[i].IsZero() {
					jobSet[i] = time.Now()
				}
			case tj, ok := <-trainJobs:
				if !ok {
					return fmt.Errorf("the watch of TrainJobs in %s ended", ns)
				}
				if i, ok := index(tj, n); ok && components[i].IsZero() &&
					meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobComponentsCreated) {
					components[i] = time.Now()
					done++
				}
			}
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		return res, fmt.Errorf("latency at %d/s: %w", rate, err)
	}
	toJobSet, toComponents := make([]float64, n), make([]float64, n)
	for i := range n {
		if jobSet[i].IsZero() { // its ComponentsCreated came first through the other watch
			jobSet[i] = components[i]
		}
		toJobSet[i], toComponents[i] = jobSet[i].Sub(sent[i]).Seconds(), components[i].Sub(sent[i]).Seconds()
	}
	res.JobSet, res.Components = percentiles(toJobSet), percentiles(toComponents)
	return res, nil
}

// index is the number in the name of a benchmark TrainJob (tj-0042) or of its JobSet, when below n.
func index(obj any, n int) (int, bool) {
	o, ok := obj.(metav1.Object)
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(strings.TrimPrefix(o.GetName(), "tj-"))
	return i, err == nil && i >= 0 && i < n
}
