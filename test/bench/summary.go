package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/printers"
)

// Summary is everything a run measured; summary.json holds it.
type Summary struct {
	Date    string  `json:"date"`
	Knobs   Knobs   `json:"knobs"`
	Seconds float64 `json:"seconds"`

	Throughput ThroughputResult `json:"throughput"`
	Latency    []LatencyResult  `json:"latency"`
	// Scale is make bench-scale's, nil in make bench's summary.
	Scale  *ScaleResult  `json:"scale,omitempty"`
	BigJob *BigJobResult `json:"bigJob,omitempty"`
	// Dashboard is make bench-scale's: the dashboard's list at ScaleTrainJobs TrainJobs, the big TrainJob's page.
	Dashboard  []DashboardResult `json:"dashboard,omitempty"`
	Failover   *FailoverResult   `json:"failover,omitempty"`
	Suspended  SuspendedResult   `json:"suspended"`
	Memory     []MemorySample    `json:"memory"`
	CLI        CLIResults        `json:"cli"`
	Build      BuildResult       `json:"build"`
	BuildLarge BuildResult       `json:"buildLarge"`
	Profiles   Profiles          `json:"profiles"`
	Targets    []Target          `json:"targets"`
}

// ThroughputResult: seconds from the first create until N JobSets exist, per round.
type ThroughputResult struct {
	N     int       `json:"n"`
	QPS   float32   `json:"qps"`
	Burst int       `json:"burst"`
	A     []float64 `json:"aSeconds"`
	// ACreated is, per A round, the seconds until the last TrainJob create returned.
	ACreated []float64 `json:"aCreatedSeconds"`
	B        []float64 `json:"bSeconds"`
	// C is the floor: the benchmark writes what the operator would (floor.go).
	C []float64 `json:"cSeconds"`
	// ACPU, BCPU and CCPU are, per round, the CPU seconds each program of the cluster used during it, by name.
	ACPU []map[string]float64 `json:"aCPUSeconds"`
	BCPU []map[string]float64 `json:"bCPUSeconds"`
	CCPU []map[string]float64 `json:"cCPUSeconds"`
	// ASteal, BSteal and CSteal are, per round, the CPU seconds the host took from the machine (steal).
	ASteal []float64 `json:"aStealSeconds"`
	BSteal []float64 `json:"bStealSeconds"`
	CSteal []float64 `json:"cStealSeconds"`
	// Ratio is A/B and RatioC A/C of each pair of rounds (two of each in every block A B C C B A).
	Ratio  []float64 `json:"ratio"`
	RatioC []float64 `json:"ratioC"`
	// The operator's requests per TrainJob over the A rounds, by verb and resource.
	Writes            float64            `json:"writesPerTrainJob"`
	WritesPerTrainJob map[string]float64 `json:"writesPerTrainJobBy"`
	Events            float64            `json:"eventsPerTrainJob"`
	EventsPerTrainJob map[string]float64 `json:"eventsPerTrainJobBy"`
	// Requests is every request of the operator's in the rounds' namespaces per TrainJob: writes, Events and
	// reads, so that any new one shows.
	Requests                float64            `json:"requestsPerTrainJob"`
	ReadsPerTrainJob        map[string]float64 `json:"readsPerTrainJobBy"`
	FailedWritesPerTrainJob map[string]float64 `json:"failedWritesPerTrainJobBy"`
	FailedReconciles        float64            `json:"failedReconciles"`
	ReconcilesPerTrainJob   float64            `json:"reconcilesPerTrainJob"`
}

// SuspendedResult: the operator's writes when it restarts and finds TrainJobs whose children are built.
type SuspendedResult struct {
	N                    int           `json:"n"`
	WritesOnRestart      int           `json:"writesOnRestart"`
	Writes               requestCounts `json:"writesBy"`
	TrainJobs            int           `json:"otherTrainJobs"`
	OtherWritesOnRestart int           `json:"otherWritesOnRestart"`
	OtherWrites          requestCounts `json:"otherWritesBy"`
}

// MemorySample is the operator's memory at one step.
type MemorySample struct {
	Name string `json:"name"`
	// AnonMiB is the anonymous part of RSS (heap, stacks, runtime): the memory the operator owns.
	AnonMiB float64 `json:"rssAnonMiB"`
	// FileMiB is the file-backed part of RSS, the executable's pages: page cache that other processes share and
	// the kernel reclaims when memory is short, so it is reported and has no target.
	FileMiB      float64 `json:"rssFileMiB"`
	HeapInuseMiB float64 `json:"heapInuseMiB"`
}

// CLIResults are the CLI's timings.
type CLIResults struct {
	TrainJobs int         `json:"trainJobs"`
	Runs      int         `json:"runs"`
	Commands  []CLIResult `json:"commands"`
}

// CLIResult is one command's wall times and API requests.
type CLIResult struct {
	Name       string        `json:"name"`
	Seconds    []float64     `json:"seconds"`
	Median     float64       `json:"medianSeconds"`
	Requests   int           `json:"requests"`
	RequestsBy requestCounts `json:"requestsBy"`
}

// BuildResult is the Build micro-benchmark: medians of its runs.
type BuildResult struct {
	Command     string  `json:"command"`
	Name        string  `json:"name"`
	Runs        int     `json:"runs"`
	MicrosPerOp float64 `json:"microsPerOp"`
	BytesPerOp  float64 `json:"bytesPerOp"`
	AllocsPerOp float64 `json:"allocsPerOp"`
}

// Profiles are `go tool pprof -top` of the operator: CPU during an A round, heap with everything loaded and
// after the restart; and of the API server's CPU during that A round.
type Profiles struct {
	CPU           string `json:"cpu"`
	Heap          string `json:"heap"`
	HeapRestarted string `json:"heapRestarted"`
	APIServerCPU  string `json:"apiServerCPU"`
}

// Target is one goal of the issue: met when Value ≤ Limit.
type Target struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Limit float64 `json:"limit"`
	Unit  string  `json:"unit"`
	Met   bool    `json:"met"`
}

func newSummary(k Knobs) *Summary {
	return &Summary{Date: time.Now().UTC().Format(time.RFC3339), Knobs: k, Throughput: ThroughputResult{N: k.N}}
}

// The memory samples, in the order they are taken.
const (
	memIdle = iota
	memTrainJobs
	memConfigMaps
	memRestarted
)

// draRunningLimit is the most the big TrainJob claiming its GPUs through DRA may take from its create until
// every pod is Running, in times the one asking for nvidia.com/gpu takes, on an idle machine: the control
// plane's, set by kube-scheduler's DRA Filter, which runs the allocator on each node it tries for each pod (the
// DeviceClass's CEL selector on each of its 8 devices), about 430 of 1024 nodes a pod; 4.15× at 1024 nodes
// idle (docs/performance.md says where the time goes).
const draRunningLimit = 4.5

// failoverSlackSeconds is the "few seconds" after the lease duration within which every TrainJob of the
// failover's burst must be built (issue 36 item 11).
const failoverSlackSeconds = 5

// evaluate fills Targets from the measurements.
func (s *Summary) evaluate() {
	t := s.Throughput
	target := func(name string, value, limit float64, unit string) {
		s.Targets = append(s.Targets, Target{Name: name, Value: value, Limit: limit, Unit: unit, Met: value <= limit})
	}
	if len(t.A) > 0 {
		target("throughput A/B (median of pairs)", median(t.Ratio), 2.5, "×")
		target("operator overhead A/C (median of pairs)", median(t.RatioC), 1.10, "×")
		target("operator writes per TrainJob (objects)", t.Writes, 3, "")
		target("API requests per TrainJob (writes, Events and reads the operator sends)", t.Requests, 5, "")
		target("failed reconciles", t.FailedReconciles, 0, "")
	}
	if len(s.Latency) > 0 {
		l := s.Latency[0]
		target(fmt.Sprintf("p99 create → ComponentsCreated=True at %d TrainJobs/s", l.Rate), l.Components.P99, 1, "s")
	}
	if len(s.Memory) > memRestarted {
		loaded := max(s.Memory[memConfigMaps].AnonMiB, s.Memory[memRestarted].AnonMiB)
		target("anonymous RSS with TrainJobs + ConfigMaps (max of before/after restart)", loaded, 50, "MiB")
		target("anonymous RSS growth from unrelated ConfigMaps", s.Memory[memConfigMaps].AnonMiB-s.Memory[memTrainJobs].AnonMiB, 5, "MiB")
		target("writes for built suspended TrainJobs on restart", float64(s.Suspended.WritesOnRestart), 0, "")
	}
	if fo := s.Failover; fo != nil {
		// The operator's lease duration plus a few seconds, to take the Lease and build what came meanwhile.
		target(fmt.Sprintf("SIGKILL of the leader in a burst of %d → last TrainJob built", fo.N), fo.LastBuiltSeconds, fo.LeaseDurationSeconds+failoverSlackSeconds, "s")
	}
	if sc := s.Scale; sc != nil && len(sc.Memory) > scaleRestarted {
		n := s.Knobs.ScaleTrainJobs
		target(fmt.Sprintf("Go heap per TrainJob (slope %d → %d)", s.Knobs.ScaleStep, n), sc.HeapPerTrainJobKiB, 6, "KiB")
		target(fmt.Sprintf("anonymous RSS at %d TrainJobs", n), sc.Memory[scaleAll].AnonMiB, 100, "MiB")
		target("anonymous RSS growth from unrelated ConfigMaps", sc.Memory[scaleConfigMaps].AnonMiB-sc.Memory[scaleAll].AnonMiB, 5, "MiB")
		target(fmt.Sprintf("writes on restart with %d built TrainJobs", n), float64(sc.WritesOnRestart), 0, "")
	}
	if sc := s.Scale; sc != nil && len(sc.ListAll) == 4 {
		// list -A -o json and kubectl get -A -o json at the step, then at the end: the peak memory one more
		// TrainJob costs each.
		perTrainJob := func(i int) float64 {
			return (sc.ListAll[i+2].MaxRSSMiB - sc.ListAll[i].MaxRSSMiB) * 1024 / float64(s.Knobs.ScaleTrainJobs-s.Knobs.ScaleStep)
		}
		target("list -A -o json: peak memory per TrainJob (limit: kubectl get -A -o json's)", perTrainJob(0), math.Round(perTrainJob(1)*100)/100, "KiB")
	}
	if len(s.CLI.Commands) == 3 {
		get, list, status := s.CLI.Commands[0], s.CLI.Commands[1], s.CLI.Commands[2]
		target("list time / kubectl get time", list.Median/get.Median, 1.2, "×")
		// The TrainJob, its JobSet (whose UID tells its pods from look-alikes), Jobs, pods and Events.
		target("status API requests", float64(status.Requests), 5, "")
	}
	if bj := s.BigJob; bj != nil && len(bj.Commands) == 4 {
		pods, status, list := bj.Commands[0], bj.Commands[1], bj.Commands[2]
		target(fmt.Sprintf("%d-node TrainJob: status time / kubectl get pods time", bj.Nodes), status.Median/pods.Median, 1.5, "×")
		target(fmt.Sprintf("%d-node TrainJob: list time", bj.Nodes), list.Median, 0.5, "s")
	}
	if bj := s.BigJob; bj != nil && bj.DRARunningSeconds > 0 {
		// DRA adds to each pod kube-scheduler's allocation in its scheduling cycle (draRunningLimit), and four
		// writes: its claim's create and the pod's status (kube-controller-manager's resourceclaim-controller),
		// the claim's finalizer and its allocation (kube-scheduler).
		target(fmt.Sprintf("%d-node TrainJob: create → every pod Running, DRA / nvidia.com/gpu", bj.Nodes), bj.DRARunningSeconds/bj.RunningSeconds, draRunningLimit, "×")
		// What the operator sends for it is its own: one JobSet either way.
		target(fmt.Sprintf("%d-node TrainJob: the operator's requests, DRA / nvidia.com/gpu", bj.Nodes),
			float64(bj.DRARequests.total())/float64(max(bj.Requests.total(), 1)), 1, "×")
	}
	for _, d := range s.Dashboard {
		if d.TrainJobs > 0 {
			target(fmt.Sprintf("dashboard: first paint of the list of %d TrainJobs", d.TrainJobs), d.Seconds, 1, "s")
			target(fmt.Sprintf("dashboard: server's peak RSS with %d TrainJobs", d.TrainJobs), d.MaxRSSMiB, 100, "MiB")
		} else {
			target(fmt.Sprintf("dashboard: a %d-rank TrainJob's page to interactive", d.Ranks), d.Seconds, 1, "s")
		}
	}
	if s.Build.Runs > 0 {
		target("Build time per op", s.Build.MicrosPerOp, 50, "µs")
		target("Build allocs per op", s.Build.AllocsPerOp, 300, "")
		target("Build time per op at 1024 nodes", s.BuildLarge.MicrosPerOp, 1000, "µs")
	}
}

// Met counts the targets met.
func (s *Summary) Met() (met, all int) {
	for _, t := range s.Targets {
		if t.Met {
			met++
		}
	}
	return met, len(s.Targets)
}

// WriteJSON writes the summary to path.
func (s *Summary) WriteJSON(path string) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// Print writes the tables of what was measured, as the CLI writes the tables of its screens (plugin/printers:
// tablewriter, borderless).
func (s *Summary) Print(w io.Writer) {
	if len(s.Throughput.A) > 0 {
		s.printThroughput(w)
	}
	f := func(format string, a ...any) string { return fmt.Sprintf(format, a...) }
	if len(s.Latency) > 0 {
		tab := printers.NewTable(w, "", "Latency under steady load, per TrainJob", "p50", "p99", "max")
		for _, l := range s.Latency {
			row := func(what string, p Percentiles) {
				tab.Row(f("%d/s for %ds: %s", l.Rate, l.Seconds, what), f("%.3fs", p.P50), f("%.3fs", p.P99), f("%.3fs", p.Max))
			}
			row("create → JobSet", l.JobSet)
			row("create → ComponentsCreated", l.Components)
			tab.Row(f("%d/s for %ds: latest create sent late by", l.Rate, l.Seconds), f("%.3fs", l.LateSeconds))
		}
		flush(w, tab)
	}
	printMemory(w, "Operator memory", s.Memory)
	if sc := s.Scale; sc != nil {
		printMemory(w, "Operator memory as TrainJobs grow (every other one suspended, all built)", sc.Memory)
		tab := printers.NewTable(w, "", f("Per TrainJob, slope %d → %d TrainJobs", s.Knobs.ScaleStep, s.Knobs.ScaleTrainJobs), "")
		tab.Row("Go heap in use", f("%.2f KiB", sc.HeapPerTrainJobKiB))
		tab.Row("anonymous RSS", f("%.2f KiB", sc.AnonPerTrainJobKiB))
		tab.Row("operator writes on restart", f("%d", sc.WritesOnRestart), byCount(sc.Writes))
		flush(w, tab)
		tab = printers.NewTable(w, "", "Every TrainJob as JSON, one run after a warm-up", "TrainJobs", "time", "peak RSS")
		for _, m := range sc.ListAll {
			tab.Row(m.Name, f("%d", m.TrainJobs), f("%.3fs", m.Seconds), f("%.1f MiB", m.MaxRSSMiB))
		}
		flush(w, tab)
	}
	if bj := s.BigJob; bj != nil {
		tab := printers.NewTable(w, "", f("One TrainJob of %d nodes × 8 GPUs on %d simulated GPU nodes", bj.Nodes, bj.Nodes), "median", "min", "max", "API requests")
		tab.Row("create → every pod Running (the operator's requests)", f("%.1fs", bj.RunningSeconds), "", "", f("%d", bj.Requests.total()), byCount(bj.Requests))
		if bj.DRARunningSeconds > 0 {
			tab.Row(f("create → every pod Running, GPUs claimed through DRA (%s)", draRuntimeName), f("%.1fs", bj.DRARunningSeconds),
				"", "", f("%d", bj.DRARequests.total()), byCount(bj.DRARequests))
		}
		for _, c := range bj.Commands {
			tab.Row(c.Name, f("%.3fs", c.Median), f("%.3fs", minOf(c.Seconds)), f("%.3fs", maxOf(c.Seconds)), f("%d", c.Requests), byCount(c.RequestsBy))
		}
		flush(w, tab)
	}
	if len(s.Dashboard) > 0 {
		tab := printers.NewTable(w, "", "kubectl trainjob dashboard in Chromium: from opening its URL to the view shown", "time", "server's peak RSS")
		for _, d := range s.Dashboard {
			tab.Row(d.What, f("%.3fs", d.Seconds), f("%.1f MiB", d.MaxRSSMiB))
		}
		flush(w, tab)
	}
	if fo := s.Failover; fo != nil {
		tab := printers.NewTable(w, "", f("Failover: SIGKILL of the leader of two replicas %v into a burst of %d creates", killAfter, fo.N), "")
		tab.Row("creates before the kill", f("%d", fo.CreatedBeforeKill))
		tab.Row("lease duration", f("%.0fs", fo.LeaseDurationSeconds))
		tab.Row("kill → a replica leads again", f("%.1fs", fo.LeaseSeconds))
		tab.Row("kill → last create returned", f("%.1fs", fo.CreatedSeconds))
		tab.Row("kill → last TrainJob built (ComponentsCreated=True)", f("%.1fs", fo.LastBuiltSeconds))
		flush(w, tab)
	}
	if len(s.CLI.Commands) > 0 {
		tab := printers.NewTable(w, "", f("CLI, %d TrainJobs in the namespace, %d runs each", s.CLI.TrainJobs, s.CLI.Runs), "median", "min", "max", "API requests")
		for _, c := range s.CLI.Commands {
			tab.Row(c.Name, f("%.3fs", c.Median), f("%.3fs", minOf(c.Seconds)), f("%.3fs", maxOf(c.Seconds)), f("%d", c.Requests), byCount(c.RequestsBy))
		}
		flush(w, tab)
	}
	if s.Build.Runs > 0 {
		tab := printers.NewTable(w, "", f("Build micro-benchmark (median of %d)", s.Build.Runs), "time", "memory", "allocations")
		for _, r := range []BuildResult{s.Build, s.BuildLarge} {
			tab.Row(r.Name, f("%.2f µs/op", r.MicrosPerOp), f("%.0f B/op", r.BytesPerOp), f("%.0f allocs/op", r.AllocsPerOp))
		}
		flush(w, tab)
	}

	met, all := s.Met()
	tab := printers.NewTable(w, "", f("Target (%d of %d met)", met, all), "value", "target", "met")
	for _, t := range s.Targets {
		tab.Row(t.Name, f("%.2f%s", t.Value, t.Unit), f("≤ %g%s", t.Limit, t.Unit), yesNo(t.Met))
	}
	flush(w, tab)
}

// printThroughput writes the throughput table, with the writes on the operator's restart.
func (s *Summary) printThroughput(w io.Writer) {
	f := func(format string, a ...any) string { return fmt.Sprintf(format, a...) }
	t := s.Throughput
	fmt.Fprintf(w, "\nThroughput: %d JobSets, first create → last JobSet; %d× A B C C B A after a warm-up; every client QPS %g burst %d\n",
		t.N, s.Knobs.Repeat, t.QPS, t.Burst)
	tab := printers.NewTable(w, "", "round", "min", "median", "max")
	row := func(name, unit string, v []float64) {
		tab.Row(name, f("%.2f%s", minOf(v), unit), f("%.2f%s", median(v), unit), f("%.2f%s", maxOf(v), unit))
	}
	row("A: TrainJobs, operator makes JobSets", "s", t.A)
	row("  of which creating the TrainJobs", "s", t.ACreated)
	row("B: the same JobSets created directly", "s", t.B)
	row("C: the bench writes what the operator would", "s", t.C)
	row("A/B, paired", "×", t.Ratio)
	row("A/C, paired: the operator's own overhead", "×", t.RatioC)
	tab.Row("CPU seconds of a round (median)", "A", "B", "C")
	for _, name := range cpuPrograms(t.ACPU, t.BCPU, t.CCPU) {
		tab.Row("  "+name, f("%.2f", medianOf(t.ACPU, name)), f("%.2f", medianOf(t.BCPU, name)), f("%.2f", medianOf(t.CCPU, name)))
	}
	steal := func(v []float64) string { return f("%.2f (%.2f)", median(v), maxOf(v)) }
	tab.Row("  taken by the host (steal; max)", steal(t.ASteal), steal(t.BSteal), steal(t.CSteal))
	flush(w, tab)

	tab = printers.NewTable(w, "", "The operator in A rounds", "", "by request")
	tab.Row("operator writes per TrainJob", f("%.2f", t.Writes), by(t.WritesPerTrainJob))
	tab.Row("operator Events per TrainJob", f("%.2f", t.Events), by(t.EventsPerTrainJob))
	tab.Row("operator reads per TrainJob", "", by(t.ReadsPerTrainJob))
	tab.Row("operator API requests per TrainJob", f("%.2f", t.Requests))
	tab.Row("failed writes per TrainJob", "", by(t.FailedWritesPerTrainJob))
	tab.Row("operator reconciles per TrainJob", f("%.2f", t.ReconcilesPerTrainJob))
	tab.Row("failed reconciles (A rounds)", f("%.0f", t.FailedReconciles))
	tab.Row(f("operator writes on restart: %d built suspended TrainJobs", s.Suspended.N), f("%d", s.Suspended.WritesOnRestart), byCount(s.Suspended.Writes))
	tab.Row(f("operator writes on restart: %d other TrainJobs", s.Suspended.TrainJobs), f("%d", s.Suspended.OtherWritesOnRestart), byCount(s.Suspended.OtherWrites))
	flush(w, tab)
}

// printMemory writes a table of memory samples, when there are any.
func printMemory(w io.Writer, title string, samples []MemorySample) {
	if len(samples) == 0 {
		return
	}
	tab := printers.NewTable(w, "", title, "anonymous RSS", "Go heap in use", "file-backed RSS (shared)")
	for _, m := range samples {
		tab.Row(m.Name, fmt.Sprintf("%.1f MiB", m.AnonMiB), fmt.Sprintf("%.1f MiB", m.HeapInuseMiB), fmt.Sprintf("%.1f MiB", m.FileMiB))
	}
	flush(w, tab)
}

// flush writes a table of the summary, a blank line after it.
func flush(w io.Writer, tab *printers.Table) {
	_ = tab.Flush() // w is a buffer or the terminal: nothing to do about a failed write
	fmt.Fprintln(w)
}

// cpuPrograms are the programs of the rounds' CPU seconds, by name, and "all" last: the sum of them all.
func cpuPrograms(rounds ...[]map[string]float64) []string {
	names := map[string]bool{}
	for _, rs := range rounds {
		for _, r := range rs {
			for name := range r {
				names[name] = true
			}
		}
	}
	return append(slices.Sorted(maps.Keys(names)), "all")
}

// medianOf is the median over rounds of the CPU seconds of program name, or of them all for "all".
func medianOf(rounds []map[string]float64, name string) float64 {
	v := make([]float64, 0, len(rounds))
	for _, r := range rounds {
		if name != "all" {
			v = append(v, r[name])
			continue
		}
		sum := 0.0
		for _, s := range r {
			sum += s
		}
		v = append(v, sum)
	}
	return median(v)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "NO"
}

// by lists per-object counts, largest first: "create jobsets.jobset.x-k8s.io 1.00, …".
func by(m map[string]float64) string {
	keys := slices.SortedFunc(maps.Keys(m), func(a, b string) int {
		if m[a] != m[b] {
			if m[a] > m[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.2f", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func byCount(c requestCounts) string {
	m := map[string]float64{}
	for k, v := range c {
		m[k] = float64(v)
	}
	return strings.ReplaceAll(by(m), ".00", "")
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(v))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func minOf(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	return slices.Min(v)
}

func maxOf(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	return slices.Max(v)
}
