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

// memory records the operator's resident memory and Go heap now, once it has settled (and ready holds, when given).
func (b *bench) memory(ctx context.Context, name string, ready func(operatorMetrics) error) error {
	m, err := waitIdle(ctx, b.stack.Operator, settleTimeout, ready)
	if err != nil {
		return fmt.Errorf("memory %s: %w", name, err)
	}
	anon, file, err := procMemory(b.stack.Operator.PID())
	if err != nil {
		return err
	}
	b.summary.Memory = append(b.summary.Memory, MemorySample{Name: name, AnonMiB: anon, FileMiB: file, HeapInuseMiB: m.heapInuseMiB()})
	b.logf("memory %s: anonymous RSS %.1f MiB, Go heap in use %.1f MiB, file-backed RSS %.1f MiB", name, anon, m.heapInuseMiB(), file)
	return nil
}

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
		if err := b.createTrainJobs(ctx, set.ns, set.n, set.suspend); err != nil {
			return err
		}
	}
	cached := func(m operatorMetrics) error {
		if got := m.cachedTrainJobs(); got != float64(total) {
			return fmt.Errorf("the operator's cache holds %.0f TrainJobs of %d", got, total)
		}
		return nil
	}
	if err := b.memory(ctx, fmt.Sprintf("%d TrainJobs", total), cached); err != nil {
		return err
	}

	if err := b.cli(ctx); err != nil {
		return err
	}

	b.logf("memory: %d ConfigMaps of %d KiB in %d unrelated namespaces", b.k.ConfigMaps, b.k.ConfigMapKiB, b.k.ConfigMapNamespaces)
	if err := b.createConfigMaps(ctx); err != nil {
		return err
	}
	if err := b.memory(ctx, fmt.Sprintf("+ %d ConfigMaps", b.k.ConfigMaps), cached); err != nil {
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
	if err := b.memory(ctx, "after restart", cached); err != nil {
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

// createTrainJobs creates n TrainJobs in a fresh namespace ns and waits until each has its JobSet.
func (b *bench) createTrainJobs(ctx context.Context, ns string, n int, suspend bool) error {
	if err := b.createNamespace(ctx, ns); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	jobSets, err := b.watchJobSets(ctx, ns)
	if err != nil {
		return err
	}
	created := make(chan error, 1)
	go func() {
		created <- createAll(ctx, b.admin, n, func(i int) client.Object { return trainJob(ns, i, suspend) })
	}()
	_, _, err = jobSets.until(ctx, n, created)
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
	})
}
