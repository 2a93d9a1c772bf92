package main

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"

	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
)

// microPackage and microBenchmark are the Build phase micro-benchmark of issue "Core", whose sub-benchmarks
// microSmall and microLarge build a TrainJob of 64 and of 1024 nodes.
const (
	microPackage   = "./pkg/pipeline/plugins/"
	microBenchmark = "BuildTorch"
	microSmall     = microBenchmark + "/nodes=64,gpus=8"
	microLarge     = microBenchmark + "/nodes=1024,gpus=8"
)

// benchLine is a line of `go test -bench -benchmem` output: the name (sub-benchmarks after a slash), ns/op,
// B/op and allocs/op.
var benchLine = regexp.MustCompile(`^Benchmark(\S+?)(?:-\d+)?\s+\d+\s+([\d.]+) ns/op\s+([\d.]+) B/op\s+([\d.]+) allocs/op`)

// micro runs the Build micro-benchmark and keeps the median of its runs.
func (b *bench) micro(ctx context.Context) error {
	root, err := cluster.RepoRoot()
	if err != nil {
		return err
	}
	args := []string{"test", microPackage, "-run", "^$", "-bench", "^Benchmark" + microBenchmark + "$", "-benchmem",
		"-count", strconv.Itoa(b.k.MicroCount), "-benchtime", b.k.MicroTime}
	b.logf("Build micro-benchmark: go %s", strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	for name, dst := range map[string]*BuildResult{microSmall: &b.summary.Build, microLarge: &b.summary.BuildLarge} {
		res, err := parseBench(string(out), name)
		if err != nil {
			return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
		}
		res.Command = "go " + strings.Join(args, " ")
		*dst = res
	}
	return nil
}

// parseBench reads the runs of benchmark name from `go test -bench -benchmem` output: the medians.
func parseBench(out, name string) (BuildResult, error) {
	var ns, bytes, allocs []float64
	var full string // with the sub-benchmark's name
	for line := range strings.Lines(out) {
		m := benchLine.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil || (m[1] != name && !strings.HasPrefix(m[1], name+"/")) {
			continue
		}
		full = m[1]
		for i, dst := range []*[]float64{&ns, &bytes, &allocs} {
			v, err := strconv.ParseFloat(m[i+2], 64)
			if err != nil {
				return BuildResult{}, err
			}
			*dst = append(*dst, v)
		}
	}
	if len(ns) == 0 {
		return BuildResult{}, fmt.Errorf("no result of Benchmark%s", name)
	}
	return BuildResult{Name: full, Runs: len(ns), MicrosPerOp: median(ns) / 1000, BytesPerOp: median(bytes), AllocsPerOp: median(allocs)}, nil
}
