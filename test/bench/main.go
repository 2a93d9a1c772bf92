package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
)

func main() {
	scale := flag.Bool("scale", false, "make bench-scale: the operator's memory at 0, 1 000 and 10 000 TrainJobs, the CLI among them, and a 1024-node TrainJob, then one claiming its GPUs through DRA, instead of make bench")
	dashboard := flag.Bool("dashboard", false, "with -scale, only its dashboard rows: the list of BENCH_SCALE_TRAINJOBS TrainJobs and a BENCH_BIG_NODES-rank TrainJob's page in Chromium")
	big := flag.Bool("big", false, "with -scale, only its BENCH_BIG_NODES-node TrainJob's two rows: create → every pod Running with nvidia.com/gpu, then with its GPUs claimed through DRA")
	failover := flag.Bool("failover", false, "only make bench's failover: the leader of two replicas killed a second into a burst of creates")
	flag.Parse()
	k, err := KnobsFromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	measure := run
	switch {
	case *scale && *dashboard:
		measure = runDashboard
	case *scale && *big:
		measure = runBig
	case *scale:
		measure = runScale
	case *failover:
		measure = func(ctx context.Context, k Knobs, w io.Writer) (*Summary, error) {
			s := newSummary(k)
			if err := runFailover(ctx, k, w, s); err != nil {
				return nil, err
			}
			s.evaluate()
			return s, nil
		}
	}
	s, err := measure(ctx, k, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	s.Print(os.Stdout)
	path := filepath.Join(k.Out, "summary.json")
	if err := s.WriteJSON(path); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	fmt.Printf("\nsummary: %s; profiles (go tool pprof -top): %s, %s\n", path,
		filepath.Join(k.Out, "operator-*.pprof"), filepath.Join(k.Out, "apiserver-cpu.pprof"))
}
