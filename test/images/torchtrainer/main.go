// Command torchtrainer is a tiny data-parallel trainer for the real node's tests: it reads the environment the
// Torch plugin gives every node (PET_NNODES, PET_NODE_RANK, PET_MASTER_ADDR, PET_MASTER_PORT,
// PET_NPROC_PER_NODE), meets the other ranks over TCP at rank 0 and trains with them (package sgd), so every
// rank prints the same `step N loss X` lines. Rank 0 reports the progress to the status server when the
// TrainJobStatus plugin says where it is. With TRAINER_HTTP_PORT it also serves, as TensorBoard would, a page
// that says which rank it is and when it started (what port-forward's test reaches). It exits 0 when done and
// 1 when a rank cannot be reached or drops out.
package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/kubectl-trainjob/kubectl-trainjob/test/images/progress"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/images/sgd"
)

func main() {
	cfg, err := fromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "torchtrainer:", err)
		os.Exit(2)
	}
	if port := os.Getenv("TRAINER_HTTP_PORT"); port != "" {
		if err := serve(port, cfg.Rank, cfg.World); err != nil {
			fmt.Fprintln(os.Stderr, "torchtrainer:", err)
			os.Exit(2)
		}
	}
	if cfg.Rank == 0 {
		if cfg.Progress, err = progress.Steps(os.Getenv, cfg.Steps, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, "torchtrainer:", err)
			os.Exit(2)
		}
	}
	if err := sgd.RunTorch(cfg, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "torchtrainer: rank %d: %v\n", cfg.Rank, err)
		os.Exit(1)
	}
}

// fromEnv reads the Torch plugin's environment and the training's knobs (sgd.OptionsFromEnv).
func fromEnv(getenv func(string) string) (sgd.Config, error) {
	var cfg sgd.Config
	var err error
	if cfg.Options, err = sgd.OptionsFromEnv(getenv); err != nil {
		return cfg, err
	}
	ints := []struct {
		name string
		dst  *int
		min  int
	}{
		{"PET_NNODES", &cfg.World, 1},
		{"PET_NODE_RANK", &cfg.Rank, 0},
		{"PET_NPROC_PER_NODE", new(int), 1},
	}
	for _, v := range ints {
		n, err := strconv.Atoi(getenv(v.name))
		if err != nil || n < v.min {
			return cfg, fmt.Errorf("%s=%q: want an integer ≥ %d", v.name, getenv(v.name), v.min)
		}
		*v.dst = n
	}
	if cfg.Rank >= cfg.World {
		return cfg, fmt.Errorf("PET_NODE_RANK=%d is not below PET_NNODES=%d", cfg.Rank, cfg.World)
	}
	cfg.MasterAddr, cfg.MasterPort = getenv("PET_MASTER_ADDR"), getenv("PET_MASTER_PORT")
	if cfg.MasterAddr == "" || cfg.MasterPort == "" {
		return cfg, fmt.Errorf("PET_MASTER_ADDR and PET_MASTER_PORT must be set")
	}
	return cfg, nil
}

// serve answers every HTTP request at port with "rank R of W, started T": T, to the nanosecond, tells a
// replacement pod of the rank from the pod it replaced.
func serve(port string, rank, world int) error {
	l, err := net.Listen("tcp", ":"+port)
	if err != nil {
		return fmt.Errorf("TRAINER_HTTP_PORT=%q: %w", port, err)
	}
	started := time.Now().UTC().Format(time.RFC3339Nano)
	go func() {
		_ = http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprintf(w, "rank %d of %d, started %s\n", rank, world, started)
		}))
	}()
	return nil
}
