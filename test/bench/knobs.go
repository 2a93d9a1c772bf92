package main

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Knobs size the benchmark; each is read from the environment variable named in its comment.
type Knobs struct {
	// N is the number of objects of a throughput round (BENCH_N, default 500).
	N int
	// Repeat is the number of A B C C B A blocks after the warm-up (BENCH_REPEAT, default 5: ten pairs of each
	// ratio, so that their medians move less with the machine's speed, which drifts by up to a quarter within a
	// run).
	Repeat int
	// TrainJobs is the number of TrainJobs in the namespace of the memory and CLI measurements
	// (BENCH_TRAINJOBS, default 1000).
	TrainJobs int
	// Suspended is the number of suspended TrainJobs, in a namespace of their own, whose writes on the
	// operator's restart are counted (BENCH_SUSPENDED, default 100).
	Suspended int
	// ConfigMaps is the number of unrelated ConfigMaps, spread over ConfigMapNamespaces namespaces
	// (BENCH_CONFIGMAPS, default 700; BENCH_CONFIGMAP_NAMESPACES, default 7).
	ConfigMaps          int
	ConfigMapNamespaces int
	// ConfigMapKiB is the size of each unrelated ConfigMap's data (BENCH_CONFIGMAP_KIB, default 200).
	ConfigMapKiB int
	// LatencyRates are the steady loads offered, in TrainJobs a second (BENCH_LATENCY_RATES, default 20,50), each
	// for LatencySeconds (BENCH_LATENCY_SECONDS, default 60).
	LatencyRates   []int
	LatencySeconds int
	// ScaleTrainJobs and ScaleStep are make bench-scale's numbers of TrainJobs: the operator's memory is
	// sampled at both, and its heap per TrainJob is the slope between them (BENCH_SCALE_TRAINJOBS, default
	// 10000; BENCH_SCALE_STEP, default 1000).
	ScaleTrainJobs int
	ScaleStep      int
	// BigNodes is the number of nodes (of 8 GPUs) of make bench-scale's big TrainJob, and of the simulated GPU
	// nodes it runs on (BENCH_BIG_NODES, default 1024).
	BigNodes int
	// CLIRuns is how many times each CLI command is timed (BENCH_CLI_RUNS, default 7).
	CLIRuns int
	// MicroCount is the -count of the Build micro-benchmark (BENCH_MICRO_COUNT, default 5), and MicroTime its
	// -benchtime (BENCH_MICRO_TIME, default 1s).
	MicroCount int
	MicroTime  string
	// FailoverN is the number of TrainJobs of the failover burst, whose leader is killed a second in
	// (BENCH_FAILOVER_N, default 200; 0 leaves the failover out).
	FailoverN int
	// Out is the folder of summary.json, the logs and the profiles (BENCH_OUT, default bin/bench).
	Out string
}

// KnobsFromEnv reads the knobs, with their defaults.
func KnobsFromEnv() (Knobs, error) {
	k := Knobs{MicroTime: envString("BENCH_MICRO_TIME", "1s"), Out: envString("BENCH_OUT", "bin/bench")}
	for _, v := range []struct {
		dst  *int
		name string
		def  int
	}{
		{&k.N, "BENCH_N", 500},
		{&k.Repeat, "BENCH_REPEAT", 5},
		{&k.TrainJobs, "BENCH_TRAINJOBS", 1000},
		{&k.Suspended, "BENCH_SUSPENDED", 100},
		{&k.ConfigMaps, "BENCH_CONFIGMAPS", 700},
		{&k.ConfigMapNamespaces, "BENCH_CONFIGMAP_NAMESPACES", 7},
		{&k.ConfigMapKiB, "BENCH_CONFIGMAP_KIB", 200},
		{&k.CLIRuns, "BENCH_CLI_RUNS", 7},
		{&k.LatencySeconds, "BENCH_LATENCY_SECONDS", 60},
		{&k.ScaleTrainJobs, "BENCH_SCALE_TRAINJOBS", 10000},
		{&k.ScaleStep, "BENCH_SCALE_STEP", 1000},
		{&k.BigNodes, "BENCH_BIG_NODES", 1024},
		{&k.MicroCount, "BENCH_MICRO_COUNT", 5},
		{&k.FailoverN, "BENCH_FAILOVER_N", 200},
	} {
		*v.dst = v.def
		s := os.Getenv(v.name)
		if s == "" {
			continue
		}
		least := 1
		if v.dst == &k.FailoverN {
			least = 0 // leaves the failover out
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < least {
			return k, fmt.Errorf("%s=%q: want a whole number of at least %d (unset it for the default %d)", v.name, s, least, v.def)
		}
		*v.dst = n
	}
	k.LatencyRates = []int{20, 50}
	if s := os.Getenv("BENCH_LATENCY_RATES"); s != "" {
		k.LatencyRates = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				return k, fmt.Errorf("BENCH_LATENCY_RATES=%q: want whole numbers of at least 1, separated by commas (unset it for the default 20,50)", s)
			}
			k.LatencyRates = append(k.LatencyRates, n)
		}
	}
	if k.LatencySeconds*slices.Max(k.LatencyRates) > 9999 {
		return k, fmt.Errorf("BENCH_LATENCY_RATES × BENCH_LATENCY_SECONDS = %d TrainJobs: at most 9999 (their names have 4 digits)", k.LatencySeconds*slices.Max(k.LatencyRates))
	}
	if k.ScaleStep >= k.ScaleTrainJobs {
		return k, fmt.Errorf("BENCH_SCALE_STEP=%d: want fewer than BENCH_SCALE_TRAINJOBS=%d", k.ScaleStep, k.ScaleTrainJobs)
	}
	if k.ConfigMapKiB > 1000 {
		return k, fmt.Errorf("BENCH_CONFIGMAP_KIB=%d: the API server refuses objects over about 1 MiB; use at most 1000", k.ConfigMapKiB)
	}
	return k, nil
}

func envString(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
