package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// clockTicks is the unit of the CPU times in /proc/<pid>/stat (USER_HZ, 100 on Linux).
const clockTicks = 100

// cpuSeconds is the CPU time (user and system) each program of the benchmark's process tree has used so far, by
// program name: the benchmark itself ("bench"), and its descendants by the base name of their program
// (kube-apiserver, etcd, jobset, kubectl-trainjob for the operator). The cluster's components are all children of the benchmark.
func cpuSeconds() (map[string]float64, error) {
	type proc struct {
		comm  string
		ppid  int
		ticks float64
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	procs := map[int]proc{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid … utime stime …: comm may hold spaces and parentheses, so split at the last ')'.
		s := string(data)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			return nil, fmt.Errorf("/proc/%d/stat: %q", pid, s)
		}
		f := strings.Fields(s[end+1:])
		if len(f) < 13 {
			return nil, fmt.Errorf("/proc/%d/stat: %q", pid, s)
		}
		ppid, err1 := strconv.Atoi(f[1])
		utime, err2 := strconv.ParseFloat(f[11], 64)
		stime, err3 := strconv.ParseFloat(f[12], 64)
		if err1 != nil || err2 != nil || err3 != nil {
			return nil, fmt.Errorf("/proc/%d/stat: %q", pid, s)
		}
		procs[pid] = proc{comm: s[open+1 : end], ppid: ppid, ticks: utime + stime}
	}
	self := os.Getpid()
	descends := func(pid int) bool {
		for seen := 0; pid > 1 && seen < len(procs); seen++ {
			p, ok := procs[pid]
			if !ok {
				return false
			}
			if p.ppid == self {
				return true
			}
			pid = p.ppid
		}
		return false
	}
	out := map[string]float64{}
	for pid, p := range procs {
		switch {
		case pid == self:
			out["bench"] += p.ticks / clockTicks
		case descends(pid):
			out[programName(pid, p.comm)] += p.ticks / clockTicks
		}
	}
	return out, nil
}

// programName is the base name of the program pid runs, or comm (its first 15 bytes) when that cannot be read.
func programName(pid int, comm string) string {
	cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if argv0, _, _ := strings.Cut(string(cmdline), "\x00"); err == nil && argv0 != "" {
		return filepath.Base(argv0)
	}
	return comm
}

// cpuSince is the CPU seconds each program used since before, a cpuSeconds of earlier; programs that exited
// meanwhile are left out.
func cpuSince(before map[string]float64) (map[string]float64, error) {
	now, err := cpuSeconds()
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for name, s := range now {
		if d := s - before[name]; d > 0 {
			out[name] = d
		}
	}
	return out, nil
}

const (
	// quietCores is how much CPU, in cores, the cluster's programs and the operator together may use and still
	// count as quiet. Idle, they use a few hundredths of a core (leases, the API server's and etcd's housekeeping).
	quietCores = 0.15
	// quietWindow is how long they must stay under quietCores.
	quietWindow = 500 * time.Millisecond
)

// waitQuiet waits until the benchmark's descendants (the cluster and the operator) have used less than
// quietCores over quietWindow, or timeout passes, and returns the CPU seconds they used meanwhile. A round
// starts from a quiet cluster, so that it does not pay for the work the round before left: after a B round,
// the JobSet controller is still making the Jobs and Services of the JobSets created faster than it keeps up.
func waitQuiet(ctx context.Context, timeout time.Duration) (float64, error) {
	first, err := descendantsCPU()
	if err != nil {
		return 0, err
	}
	last := first
	err = wait.PollUntilContextTimeout(ctx, quietWindow, timeout, false, func(context.Context) (bool, error) {
		now, err := descendantsCPU()
		if err != nil {
			return false, err
		}
		window := now - last
		last = now
		return window < quietCores*quietWindow.Seconds(), nil
	})
	used := max(0, last-first)
	if err != nil {
		return used, fmt.Errorf("waiting for the cluster to go quiet (under %.2f cores for %v): %w", quietCores, quietWindow, err)
	}
	return used, nil
}

// descendantsCPU is the CPU seconds the benchmark's descendants have used so far (cpuSeconds without the
// benchmark's own).
func descendantsCPU() (float64, error) {
	cpu, err := cpuSeconds()
	if err != nil {
		return 0, err
	}
	sum := 0.0
	for name, s := range cpu {
		if name != "bench" {
			sum += s
		}
	}
	return sum, nil
}

// stealSeconds is the CPU time the host has taken from this machine's CPUs so far (steal, in /proc/stat): time
// a virtual CPU was ready to run but the hypervisor ran something else. A round with much of it ran on a
// slower machine than its pair.
func stealSeconds() (float64, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	// cpu  user nice system idle iowait irq softirq steal …, in clock ticks, over all CPUs.
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: first line %q", line)
	}
	steal, err := strconv.ParseFloat(f[8], 64)
	if err != nil {
		return 0, fmt.Errorf("/proc/stat: steal %q: %w", f[8], err)
	}
	return steal / clockTicks, nil
}
