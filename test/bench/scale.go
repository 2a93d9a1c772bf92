package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ScaleResult is make bench-scale's: what the operator owns as TrainJobs grow, and the CLI among them.
type ScaleResult struct {
	// Memory is sampled idle, at ScaleStep and at ScaleTrainJobs TrainJobs (half of them suspended, all
	// built), after the unrelated ConfigMaps, and after a restart with all of that present.
	Memory []MemorySample `json:"memory"`
	// HeapPerTrainJobKiB and AnonPerTrainJobKiB are the slopes of the Go heap in use and of the anonymous RSS
	// between ScaleStep and ScaleTrainJobs TrainJobs: what one more TrainJob and its cached children cost.
	HeapPerTrainJobKiB float64 `json:"heapPerTrainJobKiB"`
	AnonPerTrainJobKiB float64 `json:"rssAnonPerTrainJobKiB"`
	// WritesOnRestart are the operator's writes after its restart with every TrainJob built.
	WritesOnRestart int           `json:"writesOnRestart"`
	Writes          requestCounts `json:"writesBy"`
	// ListAll are `kubectl trainjob list -A -o json` and `kubectl get trainjobs -A -o json` at each step.
	ListAll []CLIMemory `json:"listAll"`
}

// CLIMemory is one run of a command: its wall time and its peak resident memory.
type CLIMemory struct {
	Name      string  `json:"name"`
	TrainJobs int     `json:"trainJobs"`
	Seconds   float64 `json:"seconds"`
	MaxRSSMiB float64 `json:"maxRSSMiB"`
}

// The memory samples of make bench-scale, in the order they are taken.
const (
	scaleIdle = iota
	scaleStep
	scaleAll
	scaleConfigMaps
	scaleRestarted
)

// runDashboard is make bench-scale's dashboard alone (bench -scale -dashboard): the list with ScaleTrainJobs
// TrainJobs, then the page of a TrainJob of BigNodes nodes.
func runDashboard(ctx context.Context, k Knobs, w io.Writer) (*Summary, error) {
	s, begin := newSummary(k), time.Now()
	err := measure(ctx, k, w, s, "", apiProfile(), 1, func(ctx context.Context, b *bench) error {
		if err := b.createTrainJobs(ctx, trainJobsNamespace, 0, k.ScaleTrainJobs, func(i int) bool { return i%2 == 1 }); err != nil {
			return err
		}
		return b.dashboardList(ctx, k.ScaleTrainJobs)
	})
	if err != nil {
		return nil, err
	}
	err = measure(ctx, k, w, s, "big", bigProfile(k), 1, func(ctx context.Context, b *bench) error {
		if err := b.runBigJob(ctx); err != nil {
			return err
		}
		return b.dashboardBigJob(ctx)
	})
	if err != nil {
		return nil, err
	}
	s.Seconds = time.Since(begin).Seconds()
	s.evaluate()
	return s, nil
}

// runBig is make bench-scale's big TrainJob alone (bench -scale -big): one of BigNodes nodes asking for
// nvidia.com/gpu, then one claiming its GPUs through DRA, each timed until every pod is Running.
func runBig(ctx context.Context, k Knobs, w io.Writer) (*Summary, error) {
	s, begin := newSummary(k), time.Now()
	err := measure(ctx, k, w, s, "big", bigProfile(k), 1, func(ctx context.Context, b *bench) error {
		if err := b.runBigJob(ctx); err != nil {
			return err
		}
		return b.runBigDRAJob(ctx)
	})
	if err != nil {
		return nil, err
	}
	s.Seconds = time.Since(begin).Seconds()
	s.evaluate()
	return s, nil
}

// runScale is make bench-scale: the operator's memory at 0, ScaleStep and ScaleTrainJobs TrainJobs, then with
// the unrelated ConfigMaps and after a restart; the CLI at ScaleTrainJobs TrainJobs.
// Then, on a full-profile cluster of BigNodes simulated GPU nodes, one TrainJob of BigNodes nodes asking for
// nvidia.com/gpu, and after it one claiming its GPUs through DRA.
func runScale(ctx context.Context, k Knobs, w io.Writer) (*Summary, error) {
	s, begin := newSummary(k), time.Now()
	if err := measure(ctx, k, w, s, "", apiProfile(), 1, func(ctx context.Context, b *bench) error { return b.scale(ctx) }); err != nil {
		return nil, err
	}
	if err := measure(ctx, k, w, s, "big", bigProfile(k), 1, func(ctx context.Context, b *bench) error { return b.bigJob(ctx) }); err != nil {
		return nil, err
	}
	s.Seconds = time.Since(begin).Seconds()
	s.evaluate()
	return s, nil
}

func (b *bench) scale(ctx context.Context) error {
	res := &ScaleResult{}
	b.summary.Scale = res
	suspended := func(i int) bool { return i%2 == 1 }
	total := 0
	cached := func(m operatorMetrics) error {
		if got := m.cachedTrainJobs(); got != float64(total) {
			return fmt.Errorf("the operator's cache holds %.0f TrainJobs of %d", got, total)
		}
		return nil
	}
	sample := func(name string) error {
		m, err := b.memory(ctx, name, cached)
		res.Memory = append(res.Memory, m)
		return err
	}
	if err := sample("idle"); err != nil {
		return err
	}
	for _, to := range []int{b.k.ScaleStep, b.k.ScaleTrainJobs} {
		b.logf("scale: TrainJobs %d to %d in %s, every other one suspended", total, to, trainJobsNamespace)
		if err := b.createTrainJobs(ctx, trainJobsNamespace, total, to, suspended); err != nil {
			return err
		}
		total = to
		if err := sample(fmt.Sprintf("%d TrainJobs", total)); err != nil {
			return err
		}
		if err := b.listAll(ctx, total); err != nil {
			return err
		}
	}
	if err := b.dashboardList(ctx, total); err != nil {
		return err
	}
	step, all := res.Memory[scaleStep], res.Memory[scaleAll]
	added := float64(b.k.ScaleTrainJobs - b.k.ScaleStep)
	res.HeapPerTrainJobKiB = (all.HeapInuseMiB - step.HeapInuseMiB) * 1024 / added
	res.AnonPerTrainJobKiB = (all.AnonMiB - step.AnonMiB) * 1024 / added

	b.k.TrainJobs = total // what the CLI's list must show
	if err := b.cli(ctx); err != nil {
		return err
	}

	b.logf("scale: %d ConfigMaps of %d KiB in %d unrelated namespaces", b.k.ConfigMaps, b.k.ConfigMapKiB, b.k.ConfigMapNamespaces)
	if err := b.createConfigMaps(ctx); err != nil {
		return err
	}
	if err := sample(fmt.Sprintf("+ %d ConfigMaps", b.k.ConfigMaps)); err != nil {
		return err
	}
	// After the last sample: the profile collects garbage first.
	top, err := pprofTop(ctx, b.pprofAddr, "heap", filepath.Join(b.out, "operator-heap.pprof"), b.binary)
	if err != nil {
		return err
	}
	b.summary.Profiles.Heap = top // with every TrainJob: where the memory per TrainJob goes

	b.logf("scale: restarting the operator with all of that present")
	if _, err := b.audit.next(); err != nil {
		return err
	}
	if err := b.stack.RestartOperator(ctx); err != nil {
		return err
	}
	if err := sample("after restart"); err != nil {
		return err
	}
	events, err := b.audit.next()
	if err != nil {
		return err
	}
	r := newOperatorRequests()
	r.count(events, b.isOperator, trainJobsNamespace)
	res.WritesOnRestart, res.Writes = r.writes.total(), r.writes
	return nil
}

// listAll runs `kubectl trainjob list -A -o json` and `kubectl get trainjobs -A -o json` with n TrainJobs in
// the cluster, once each to warm the discovery cache and once measured.
func (b *bench) listAll(ctx context.Context, n int) error {
	common, err := b.cliFlags(ctx)
	if err != nil {
		return err
	}
	kubectl, err := kubectlPath()
	if err != nil {
		return err
	}
	for _, c := range []struct {
		name string
		argv []string
	}{
		{"kubectl trainjob list -A -o json", append([]string{b.binary, "list", "-A", "-o", "json"}, common...)},
		{"kubectl get trainjobs -A -o json", append([]string{kubectl, "get", "trainjobs", "-A", "-o", "json"}, common...)},
	} {
		var m CLIMemory
		for range 2 {
			if m, err = runMeasured(ctx, c.argv, n); err != nil {
				return err
			}
		}
		m.Name = c.name
		b.logf("  %s: %.3fs, max RSS %.1f MiB", c.name, m.Seconds, m.MaxRSSMiB)
		b.summary.Scale.ListAll = append(b.summary.Scale.ListAll, m)
	}
	return nil
}

// gnuTime is GNU time (Debian's package time), which reports the peak resident memory of the command it
// runs. The benchmark cannot read it from its own wait: Go starts a command sharing its memory until the exec
// (CLONE_VM), and Linux counts the benchmark's resident memory at that moment into the command's peak.
const gnuTime = "/usr/bin/time"

// runMeasured runs argv, which must print at least n TrainJobs as JSON, and returns its wall time and peak
// resident memory.
func runMeasured(ctx context.Context, argv []string, n int) (CLIMemory, error) {
	if _, err := os.Stat(gnuTime); err != nil {
		return CLIMemory{}, fmt.Errorf("the peak memory of a command is measured by GNU time: %w (apt-get install time)", err)
	}
	peak, err := os.CreateTemp("", "bench-peak-rss-")
	if err != nil {
		return CLIMemory{}, err
	}
	peak.Close()
	defer os.Remove(peak.Name())
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, gnuTime, append([]string{"-f", "%M", "-o", peak.Name()}, argv...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return CLIMemory{}, fmt.Errorf("%s: %w\n%s", strings.Join(argv, " "), err, stderr.String())
	}
	m := CLIMemory{TrainJobs: n, Seconds: time.Since(start).Seconds()}
	if got := strings.Count(stdout.String(), `"kind": "TrainJob"`); got < n {
		return m, fmt.Errorf("%s printed %d TrainJobs, want at least %d", strings.Join(argv, " "), got, n)
	}
	data, err := os.ReadFile(peak.Name())
	if err != nil {
		return m, err
	}
	kib, err := strconv.ParseFloat(strings.TrimSpace(string(data)), 64)
	if err != nil {
		return m, fmt.Errorf("the peak memory of %s: GNU time printed %q", strings.Join(argv, " "), data)
	}
	m.MaxRSSMiB = kib / 1024
	return m, nil
}
