package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/kubectl-trainjob/kubectl-trainjob/test/stack"
)

// trainJobController is the name of the operator's TrainJob controller in its metrics.
const trainJobController = "trainjob_controller"

// operatorMetrics are the operator's Prometheus metrics at one moment.
type operatorMetrics map[string]*dto.MetricFamily

// scrape reads the operator's /metrics.
func scrape(ctx context.Context, op *stack.Operator) (operatorMetrics, error) {
	m, err := op.Metrics(ctx)
	return operatorMetrics(m), err
}

func get(ctx context.Context, url string) ([]byte, error) {
	return stack.Get(ctx, stack.InsecureClient, url)
}

// sum adds the values of the family's samples whose labels include labels; a missing family is 0.
func (m operatorMetrics) sum(name string, labels map[string]string) float64 {
	total := 0.0
	for _, s := range m[name].GetMetric() {
		if !hasLabels(s, labels) {
			continue
		}
		switch {
		case s.Counter != nil:
			total += s.Counter.GetValue()
		case s.Gauge != nil:
			total += s.Gauge.GetValue()
		case s.Untyped != nil:
			total += s.Untyped.GetValue()
		}
	}
	return total
}

func hasLabels(s *dto.Metric, want map[string]string) bool {
	found := 0
	for _, l := range s.GetLabel() {
		if v, ok := want[l.GetName()]; ok {
			if v != l.GetValue() {
				return false
			}
			found++
		}
	}
	return found == len(want)
}

// failedReconciles is the TrainJob controller's count of reconciles that returned an error.
func (m operatorMetrics) failedReconciles() float64 {
	return m.sum("controller_runtime_reconcile_errors_total", map[string]string{"controller": trainJobController})
}

func (m operatorMetrics) reconciles() float64 {
	return m.sum("controller_runtime_reconcile_total", map[string]string{"controller": trainJobController})
}

// busy reports whether the TrainJob controller has queued or running work.
func (m operatorMetrics) busy() bool {
	return m.sum("workqueue_depth", map[string]string{"name": trainJobController}) > 0 ||
		m.sum("controller_runtime_active_workers", map[string]string{"controller": trainJobController}) > 0
}

// cachedTrainJobs is the number of TrainJobs in the operator's cache (its trainjobs gauge, summed over stages).
func (m operatorMetrics) cachedTrainJobs() float64 { return m.sum("trainjobs", nil) }

func (m operatorMetrics) heapInuseMiB() float64 {
	return m.sum("go_memstats_heap_inuse_bytes", nil) / (1 << 20)
}

// quietFor is how long the operator must stay idle to count as settled: its queue empty, no worker
// running and no reconcile started across two scrapes this far apart.
const quietFor = time.Second

// waitIdle waits until the operator has settled, or timeout passes; ready (when not nil) must hold too.
func waitIdle(ctx context.Context, op *stack.Operator, timeout time.Duration, ready func(operatorMetrics) error) (operatorMetrics, error) {
	var last operatorMetrics
	var lastAt time.Time
	var why error
	err := wait.PollUntilContextTimeout(ctx, quietFor/4, timeout, true, func(ctx context.Context) (bool, error) {
		if err := op.Exited(); err != nil {
			return false, err
		}
		m, err := scrape(ctx, op)
		if err != nil {
			why = err
			return false, nil
		}
		if ready != nil {
			if why = ready(m); why != nil {
				last = nil
				return false, nil
			}
		}
		if m.busy() {
			why, last = fmt.Errorf("the TrainJob controller is busy"), nil
			return false, nil
		}
		if last == nil || m.reconciles() != last.reconciles() {
			why, last, lastAt = fmt.Errorf("the TrainJob controller reconciled within %v", quietFor), m, time.Now()
			return false, nil
		}
		return time.Since(lastAt) >= quietFor, nil
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for the operator to settle: %w (last: %v)", err, why)
	}
	return last, nil
}

// procMemory reads the anonymous and the file-backed parts of the resident set of process pid (RssAnon and
// RssFile of /proc/<pid>/status), in MiB.
func procMemory(pid int) (anon, file float64, err error) {
	mib, err := procStatusMiB(pid, "RssAnon", "RssFile")
	if err != nil {
		return 0, 0, err
	}
	return mib[0], mib[1], nil
}

// procStatusMiB reads the fields names of /proc/<pid>/status, in kB there, in MiB.
func procStatusMiB(pid int, names ...string) ([]float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	out := make([]float64, len(names))
	found := 0
	for line := range strings.Lines(string(data)) {
		name, value, _ := strings.Cut(line, ":")
		i := slices.Index(names, name)
		if i < 0 {
			continue
		}
		kib, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 64)
		if err != nil {
			return nil, fmt.Errorf("%s of process %d: %q: %w", name, pid, value, err)
		}
		out[i] = kib / 1024
		found++
	}
	if found != len(names) {
		return nil, fmt.Errorf("/proc/%d/status lacks one of %s", pid, strings.Join(names, ", "))
	}
	return out, nil
}

// pprofTop saves a profile of the operator's (heap or CPU) to path and returns `go tool pprof -top` of it.
func pprofTop(ctx context.Context, pprofAddr, profile, path string, binary string) (string, error) {
	url := "http://" + pprofAddr + "/debug/pprof/" + profile
	args := []string{binary}
	if profile == "heap" {
		// The objects live now: without a collection first, the profile is
		// of the last one, and counts what has become garbage since.
		url += "?gc=1"
		args = []string{"-sample_index=inuse_space", binary}
	}
	data, err := get(ctx, url)
	if err != nil {
		return "", err
	}
	return saveTop(ctx, data, path, args...)
}

// saveTop writes profile data to path and returns its `go tool pprof -top`, given pprof's args before the
// profile (a binary for symbols, the sample index).
func saveTop(ctx context.Context, data []byte, path string, args ...string) (string, error) {
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return "", err
	}
	args = append(append([]string{"tool", "pprof", "-top", "-nodecount=25"}, args...), path)
	out, err := exec.CommandContext(ctx, "go", args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go tool pprof %s: %w\n%s", path, err, out)
	}
	return string(out), nil
}

// apiServerCPU saves a CPU profile of the API server's, seconds long, to path and returns `go tool pprof -top`
// of it (the API server serves /debug/pprof to its admin).
func (b *bench) apiServerCPU(ctx context.Context, seconds int, path string) (string, error) {
	hc, err := rest.HTTPClientFor(b.cluster.Config)
	if err != nil {
		return "", err
	}
	data, err := stack.Get(ctx, hc, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", strings.TrimSuffix(b.cluster.Config.Host, "/"), seconds))
	if err != nil {
		return "", err
	}
	return saveTop(ctx, data, path)
}
