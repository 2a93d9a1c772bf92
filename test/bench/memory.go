package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Namespaces of the loaded measurements.
const (
	trainJobsNamespace = "bench-trainjobs"
	suspendedNamespace = "bench-suspended"
)

// settleTimeout bounds how long the operator may take to settle after a change of the cluster.
const settleTimeout = 10 * time.Minute

// memory is the operator's resident memory and Go heap now, once it has settled (and ready holds, when given).
func (b *bench) memory(ctx context.Context, name string, ready func(operatorMetrics) error) (MemorySample, error) {
	m, err := waitIdle(ctx, b.stack.Operator, settleTimeout, ready)
	if err != nil {
		return MemorySample{}, fmt.Errorf("memory %s: %w", name, err)
	}
	anon, file, err := procMemory(b.stack.Operator.PID())
	if err != nil {
		return MemorySample{}, err
	}
	b.logf("memory %s: anonymous RSS %.1f MiB, Go heap in use %.1f MiB, file-backed RSS %.1f MiB", name, anon, m.heapInuseMiB(), file)
	return MemorySample{Name: name, AnonMiB: anon, FileMiB: file, HeapInuseMiB: m.heapInuseMiB()}, nil
}

// sample adds the operator's memory now to make bench's samples.
func (b *bench) sample(ctx context.Context, name string, ready func(operatorMetrics) error) error {
	m, err := b.memory(ctx, name, ready)
	b.summary.Memory = append(b.summary.Memory, m)
	return err
}

// idle is the operator's memory before anything else.
func (b *bench) idle(ctx context.Context) error { return b.sample(ctx, "idle", nil) }

// loaded fills the cluster step by step: TrainJobs (and suspended ones), then the CLI measurements, then
// unrelated ConfigMaps, then a restart of the operator; the operator's memory after each step.
func (b *bench) loaded(ctx context.Context) error {
	total := b.k.TrainJobs + b.k.Suspended
	b.logf("memory: %d TrainJobs in %s and %d suspended ones in %s", b.k.TrainJobs, trainJobsNamespace, b.k.Suspended, suspendedNamespace)
	for _, set := range []struct {
		ns      string
		n       int
		suspend bool
	}{{trainJobsNamespace, b.k.TrainJobs, false}, {suspendedNamespace, b.k.Suspended, true}} {
		if err := b.createTrainJobs(ctx, set.ns, 0, set.n, func(int) bool { return set.suspend }); err != nil {
			return err
		}
	}
	cached := func(m operatorMetrics) error {
		if got := m.cachedTrainJobs(); got != float64(total) {
			return fmt.Errorf("the operator's cache holds %.0f TrainJobs of %d", got, total)
		}
		return nil
	}
	if err := b.sample(ctx, fmt.Sprintf("%d TrainJobs", total), cached); err != nil {
		return err
	}

	if err := b.cli(ctx); err != nil {
		return err
	}

	b.logf("memory: %d ConfigMaps of %d KiB in %d unrelated namespaces", b.k.ConfigMaps, b.k.ConfigMapKiB, b.k.ConfigMapNamespaces)
	if err := b.createConfigMaps(ctx); err != nil {
		return err
	}
	if err := b.sample(ctx, fmt.Sprintf("+ %d ConfigMaps", b.k.ConfigMaps), cached); err != nil {
		return err
	}
	top, err := pprofTop(ctx, b.pprofAddr, "heap", filepath.Join(b.out, "operator-heap.pprof"), b.binary)
	if err != nil {
		return err
	}
	b.summary.Profiles.Heap = top

	b.logf("memory: restarting the operator with all of that present")
	if _, err := b.audit.next(); err != nil {
		return err
	}
	if err := b.stack.RestartOperator(ctx); err != nil {
		return err
	}
	if err := b.sample(ctx, "after restart", cached); err != nil {
		return err
	}
	top, err = pprofTop(ctx, b.pprofAddr, "heap", filepath.Join(b.out, "operator-heap-restarted.pprof"), b.binary)
	if err != nil {
		return err
	}
	b.summary.Profiles.HeapRestarted = top
	events, err := b.audit.next()
	if err != nil {
		return err
	}
	s := &b.summary.Suspended
	s.N, s.TrainJobs = b.k.Suspended, b.k.TrainJobs
	for _, ns := range []string{suspendedNamespace, trainJobsNamespace} {
		r := newOperatorRequests()
		r.count(events, b.isOperator, ns)
		if ns == suspendedNamespace {
			s.WritesOnRestart, s.Writes = r.writes.total(), r.writes
		} else {
			s.OtherWritesOnRestart, s.OtherWrites = r.writes.total(), r.writes
		}
	}
	return nil
}

// createTrainJobs creates the TrainJobs numbered from to to-1 in ns, suspended where suspend says, and waits
// until ns holds to JobSets. The namespace is created when from is 0.
func (b *bench) createTrainJobs(ctx context.Context, ns string, from, to int, suspend func(int) bool) error {
	if from == 0 {
		if err := b.createNamespace(ctx, ns); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	jobSets, err := b.watchJobSets(ctx, ns)
	if err != nil {
		return err
	}
	created := make(chan error, 1)
	go func() {
		created <- createAll(ctx, b.admin, to-from, func(i int) client.Object { return trainJob(ns, from+i, suspend(from+i)) }, nil)
	}()
	_, _, err = jobSets.until(ctx, to, created)
	return err
}

// createConfigMaps creates the unrelated ConfigMaps, spread over their own namespaces.
func (b *bench) createConfigMaps(ctx context.Context) error {
	data := strings.Repeat("x", b.k.ConfigMapKiB<<10)
	var names []string
	for i := range b.k.ConfigMapNamespaces {
		ns := fmt.Sprintf("bench-unrelated-%d", i)
		if err := b.createNamespace(ctx, ns); err != nil {
			return err
		}
		names = append(names, ns)
	}
	return createAll(ctx, b.admin, b.k.ConfigMaps, func(i int) client.Object {
		return &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: names[i%len(names)], Name: fmt.Sprintf("unrelated-%04d", i)},
			Data:       map[string]string{"data": data},
		}
	}, nil)
}
