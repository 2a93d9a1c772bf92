package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSmoke runs the whole benchmark with tiny numbers, so that `make test` notices when it stops working:
// every measurement must be there and plausible (the targets themselves are `make bench`'s business).
func TestSmoke(t *testing.T) {
	t.Parallel()
	k := Knobs{N: 4, Repeat: 1, TrainJobs: 10, Suspended: 3, ConfigMaps: 7, ConfigMapNamespaces: 7, ConfigMapKiB: 16,
		CLIRuns: 1, LatencyRates: []int{5}, LatencySeconds: 2, MicroCount: 1, MicroTime: "1x", Out: t.TempDir()}
	s := measured(t, run, k)

	th := s.Throughput
	if len(th.A) != 2 || len(th.B) != 2 || len(th.C) != 2 || len(th.Ratio) != 2 || len(th.RatioC) != 2 {
		t.Errorf("one A B C C B A block gives 2 A, 2 B, 2 C, 2 A/B and 2 A/C; got %v, %v, %v, %v, %v", th.A, th.B, th.C, th.Ratio, th.RatioC)
	}
	for _, v := range slices.Concat(th.A, th.B, th.C, th.Ratio, th.RatioC) {
		if v <= 0 {
			t.Errorf("a round took %v", v)
		}
	}
	// A round of 4 objects takes a few clock ticks (10 ms) of CPU, all programs together.
	for kind, rounds := range map[string][]map[string]float64{"A": th.ACPU, "B": th.BCPU, "C": th.CCPU} {
		if len(rounds) != 2 {
			t.Errorf("CPU seconds of %d %s rounds, want 2: %v", len(rounds), kind, rounds)
		}
		if all := medianOf(rounds, "all"); all <= 0 {
			t.Errorf("%s rounds took %v CPU seconds: %v", kind, all, rounds)
		}
	}
	for kind, steal := range map[string][]float64{"A": th.ASteal, "B": th.BSteal, "C": th.CSteal} {
		if len(steal) != 2 || slices.ContainsFunc(steal, func(s float64) bool { return s < 0 }) {
			t.Errorf("the host's steal over the %s rounds: %v; want 2 values, none negative", kind, steal)
		}
	}
	// The operator runs as its ServiceAccount: a write its Role does not allow fails every reconcile.
	if th.FailedReconciles != 0 || len(th.FailedWritesPerTrainJob) != 0 {
		t.Errorf("%v failed reconciles, failed writes per TrainJob %v; want none", th.FailedReconciles, th.FailedWritesPerTrainJob)
	}
	if th.Events < 1 {
		t.Errorf("%v Events per TrainJob, want at least its ComponentsCreated one", th.Events)
	}
	if th.ReconcilesPerTrainJob < 1 {
		t.Errorf("the operator reconciles each TrainJob at least once; counted %v reconciles per TrainJob", th.ReconcilesPerTrainJob)
	}
	if th.Requests < th.Writes+th.Events {
		t.Errorf("%v API requests per TrainJob, fewer than its %v writes and %v Events", th.Requests, th.Writes, th.Events)
	}
	if th.Writes < 1 {
		t.Errorf("the operator writes at least each TrainJob's JobSet; the audit log shows %v writes per TrainJob: %v", th.Writes, th.WritesPerTrainJob)
	}
	if len(s.Latency) != 1 || s.Latency[0].N != 10 {
		t.Errorf("latency: %+v; want one load of 10 TrainJobs", s.Latency)
	}
	for _, l := range s.Latency {
		for what, p := range map[string]Percentiles{"JobSet": l.JobSet, "ComponentsCreated": l.Components} {
			if p.P50 <= 0 || p.P50 > p.P99 || p.P99 > p.Max {
				t.Errorf("create → %s at %d/s: %+v; want 0 < p50 ≤ p99 ≤ max", what, l.Rate, p)
			}
		}
	}
	if len(s.Memory) != 4 {
		t.Errorf("memory samples: got %d, want idle, with TrainJobs, with ConfigMaps and after restart: %+v", len(s.Memory), s.Memory)
	}
	for _, m := range s.Memory {
		if m.AnonMiB <= 0 || m.FileMiB <= 0 || m.HeapInuseMiB <= 0 {
			t.Errorf("memory %s: anonymous RSS %v MiB, file-backed RSS %v MiB, heap %v MiB", m.Name, m.AnonMiB, m.FileMiB, m.HeapInuseMiB)
		}
	}
	if len(s.CLI.Commands) != 3 {
		t.Fatalf("CLI commands: got %d, want 3", len(s.CLI.Commands))
	}
	for _, c := range s.CLI.Commands {
		if c.Median <= 0 || c.Requests < 1 {
			t.Errorf("%s: median %vs, %d API requests", c.Name, c.Median, c.Requests)
		}
	}
	for _, r := range []BuildResult{s.Build, s.BuildLarge} {
		if r.Runs != 1 || r.MicrosPerOp <= 0 || r.AllocsPerOp <= 0 {
			t.Errorf("Build micro-benchmark: %+v", r)
		}
	}
	if s.Build.Name != microSmall || s.BuildLarge.Name != microLarge {
		t.Errorf("Build micro-benchmarks %q and %q, want %q and %q", s.Build.Name, s.BuildLarge.Name, microSmall, microLarge)
	}
	for name, top := range map[string]string{"CPU": s.Profiles.CPU, "heap": s.Profiles.Heap, "heap after restart": s.Profiles.HeapRestarted,
		"API server CPU": s.Profiles.APIServerCPU} {
		if !strings.Contains(top, "flat%") {
			t.Errorf("%s profile: no pprof -top table:\n%s", name, top)
		}
	}
	if len(s.Targets) != 14 {
		t.Errorf("targets: got %d, want the issues' 14: %+v", len(s.Targets), s.Targets)
	}

	path := filepath.Join(k.Out, "summary.json")
	if err := s.WriteJSON(path); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var back Summary
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Targets) != len(s.Targets) || back.Throughput.N != k.N {
		t.Errorf("summary.json does not read back: %s", data)
	}
}

// measured runs a benchmark with knobs k and logs its progress and its tables.
func measured(t *testing.T, bench func(context.Context, Knobs, io.Writer) (*Summary, error), k Knobs) *Summary {
	t.Helper()
	var progress bytes.Buffer
	s, err := bench(t.Context(), k, &progress)
	t.Log("\n" + progress.String())
	if err != nil {
		t.Fatal(err)
	}
	var table bytes.Buffer
	s.Print(&table)
	t.Log(table.String())
	return s
}

// TestScaleSmoke runs make bench-scale with tiny numbers.
func TestScaleSmoke(t *testing.T) {
	t.Parallel()
	k := Knobs{TrainJobs: 1, ScaleStep: 4, ScaleTrainJobs: 10, BigNodes: 3, ConfigMaps: 2, ConfigMapNamespaces: 2, ConfigMapKiB: 16,
		CLIRuns: 1, Out: t.TempDir()}
	s := measured(t, runScale, k)
	sc := s.Scale
	if sc == nil || len(sc.Memory) != 5 {
		t.Fatalf("scale memory samples: %+v; want idle, 4, 10 TrainJobs, ConfigMaps and restart", sc)
	}
	if len(s.Memory) != 0 || len(s.Throughput.A) != 0 {
		t.Errorf("make bench-scale measured make bench's memory %v or throughput %v", s.Memory, s.Throughput.A)
	}
	for _, m := range sc.Memory {
		if m.AnonMiB <= 0 || m.HeapInuseMiB <= 0 {
			t.Errorf("memory %s: %+v", m.Name, m)
		}
	}
	if len(sc.ListAll) != 4 || slices.ContainsFunc(sc.ListAll, func(m CLIMemory) bool { return m.MaxRSSMiB <= 0 || m.Seconds <= 0 }) {
		t.Errorf("list -A -o json and kubectl get -A -o json at 4 and 10 TrainJobs: %+v", sc.ListAll)
	}
	if !strings.Contains(s.Profiles.Heap, "flat%") {
		t.Errorf("heap profile with every TrainJob: no pprof -top table:\n%s", s.Profiles.Heap)
	}
	if sc.WritesOnRestart != 0 {
		t.Errorf("%d writes on restart: %v", sc.WritesOnRestart, sc.Writes)
	}
	if s.CLI.TrainJobs != 10 || len(s.CLI.Commands) != 3 {
		t.Errorf("CLI among 10 TrainJobs: %+v", s.CLI)
	}
	if bj := s.BigJob; bj == nil || bj.Nodes != 3 || bj.RunningSeconds <= 0 || bj.DRARunningSeconds <= 0 || len(bj.Commands) != 4 ||
		bj.Requests["create jobsets.jobset.x-k8s.io"] != 1 || bj.DRARequests["create jobsets.jobset.x-k8s.io"] != 1 {
		t.Errorf("big job: %+v; want 3 nodes Running with nvidia.com/gpu and through DRA, one JobSet create of the operator's for each, and 4 commands timed", bj)
	}
	if d := s.Dashboard; len(d) != 2 || d[0].TrainJobs != 10 || d[1].Ranks != 3 ||
		slices.ContainsFunc(d, func(r DashboardResult) bool { return r.Seconds <= 0 || r.MaxRSSMiB <= 0 }) {
		t.Errorf("dashboard: %+v; want the list of 10 TrainJobs and the page of the 3-rank one, timed, with the server's memory", d)
	}
	if len(s.Targets) != 14 {
		t.Errorf("targets: got %d, want 14 (memory 4, list -A memory 1, CLI 2, big job 4, dashboard 3): %+v", len(s.Targets), s.Targets)
	}
}

func TestParseBench(t *testing.T) {
	out := `goos: linux
BenchmarkBuildTorch-2   	   30000	     41000 ns/op	   20000 B/op	     250 allocs/op
BenchmarkBuildTorch-2   	   30000	     39000 ns/op	   21000 B/op	     252 allocs/op
BenchmarkBuildTorch-2   	   30000	     45000 ns/op	   19000 B/op	     251 allocs/op
BenchmarkBuildTorchOther-2   	   1	     1 ns/op	   1 B/op	     1 allocs/op
BenchmarkBuildTorch/nodes=64,gpus=8-2   	   1	     43000 ns/op	   20500 B/op	     251 allocs/op
PASS
`
	got, err := parseBench(out, "BuildTorch")
	if err != nil {
		t.Fatal(err)
	}
	want := BuildResult{Name: "BuildTorch/nodes=64,gpus=8", Runs: 4, MicrosPerOp: 42, BytesPerOp: 20250, AllocsPerOp: 251}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	// Sub-benchmarks are read apart.
	two := "BenchmarkBuildTorch/nodes=64,gpus=8-2 1 40000 ns/op 20000 B/op 250 allocs/op\n" +
		"BenchmarkBuildTorch/nodes=1024,gpus=8-2 1 300000 ns/op 90000 B/op 260 allocs/op\n"
	got, err = parseBench(two, "BuildTorch/nodes=1024,gpus=8")
	if want := (BuildResult{Name: "BuildTorch/nodes=1024,gpus=8", Runs: 1, MicrosPerOp: 300, BytesPerOp: 90000, AllocsPerOp: 260}); err != nil || got != want {
		t.Errorf("got %+v, %v; want %+v", got, err, want)
	}
	if _, err := parseBench("PASS\n", "BuildTorch"); err == nil {
		t.Error("no benchmark line: want an error")
	}
}

// TestProcMemory: the two parts of a process's resident set are read apart. This test's own binary is mapped
// from a file and its heap is anonymous, so both are there.
func TestProcMemory(t *testing.T) {
	anon, file, err := procMemory(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if anon <= 0 || file <= 0 {
		t.Errorf("anonymous RSS %v MiB, file-backed RSS %v MiB; want both above 0", anon, file)
	}
	if _, _, err := procMemory(-1); err == nil {
		t.Error("process -1: want an error")
	}
}

// TestMemoryTargets: the memory targets judge what the operator owns, its anonymous RSS; the file-backed part
// (the executable's pages, shared page cache) may be any size.
func TestMemoryTargets(t *testing.T) {
	samples := func(anonTrainJobs, anonConfigMaps, anonRestarted, file float64) []MemorySample {
		return []MemorySample{
			{Name: "idle", AnonMiB: 10, FileMiB: file, HeapInuseMiB: 5},
			{Name: "TrainJobs", AnonMiB: anonTrainJobs, FileMiB: file, HeapInuseMiB: 20},
			{Name: "ConfigMaps", AnonMiB: anonConfigMaps, FileMiB: file, HeapInuseMiB: 20},
			{Name: "restarted", AnonMiB: anonRestarted, FileMiB: file, HeapInuseMiB: 20},
		}
	}
	for _, tc := range []struct {
		name   string
		memory []MemorySample
		want   map[string]bool // target name → met
	}{
		{"small anonymous part, large file-backed part", samples(30, 31, 29, 500), map[string]bool{
			"anonymous RSS with TrainJobs + ConfigMaps (max of before/after restart)": true,
			"anonymous RSS growth from unrelated ConfigMaps":                          true,
		}},
		{"anonymous part over the limit after the restart", samples(30, 31, 51, 1), map[string]bool{
			"anonymous RSS with TrainJobs + ConfigMaps (max of before/after restart)": false,
			"anonymous RSS growth from unrelated ConfigMaps":                          true,
		}},
		{"unrelated ConfigMaps grow the anonymous part", samples(30, 36, 30, 1), map[string]bool{
			"anonymous RSS with TrainJobs + ConfigMaps (max of before/after restart)": true,
			"anonymous RSS growth from unrelated ConfigMaps":                          false,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Summary{Memory: tc.memory}
			s.evaluate()
			got := map[string]bool{}
			for _, target := range s.Targets {
				if _, ok := tc.want[target.Name]; ok {
					got[target.Name] = target.Met
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("memory targets met (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPercentiles(t *testing.T) {
	v := make([]float64, 0, 200)
	for i := 200; i >= 1; i-- {
		v = append(v, float64(i))
	}
	if got, want := percentiles(v), (Percentiles{P50: 100, P99: 198, Max: 200}); got != want {
		t.Errorf("percentiles of 1..200 = %+v, want %+v", got, want)
	}
	if got, want := percentiles([]float64{3}), (Percentiles{P50: 3, P99: 3, Max: 3}); got != want {
		t.Errorf("percentiles of one = %+v, want %+v", got, want)
	}
	if got := percentiles(nil); got != (Percentiles{}) {
		t.Errorf("percentiles of none = %+v", got)
	}
}
