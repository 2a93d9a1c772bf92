// Command torchtrainer is a tiny data-parallel trainer for the real node's tests: it reads the environment the
// Torch plugin gives every node (PET_NNODES, PET_NODE_RANK, PET_MASTER_ADDR, PET_MASTER_PORT,
// PET_NPROC_PER_NODE), meets the other ranks over TCP at rank 0, and runs SGD on a synthetic linear regression
// whose rows are split between the ranks: each step every rank computes the gradient of its rows, the
// gradients are averaged by an all-reduce through rank 0, and every rank applies the same update — so every
// rank prints the same `step N loss X` lines, and the loss goes down. It exits 0 when done and 1 when a rank
// cannot be reached or drops out.
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/kubectl-trainjob/kubectl-trainjob/test/images/torchtrainer/sgd"
)

func main() {
	cfg, err := fromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "torchtrainer:", err)
		os.Exit(2)
	}
	if err := sgd.Train(cfg, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "torchtrainer: rank %d: %v\n", cfg.Rank, err)
		os.Exit(1)
	}
}

// fromEnv reads the Torch plugin's environment and the trainer's own knobs (TRAINER_STEPS, TRAINER_TIMEOUT).
func fromEnv(getenv func(string) string) (sgd.Config, error) {
	cfg := sgd.Config{Steps: 20, Timeout: 2 * time.Minute}
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
	if s := getenv("TRAINER_STEPS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return cfg, fmt.Errorf("TRAINER_STEPS=%q: want a positive integer", s)
		}
		cfg.Steps = n
	}
	if s := getenv("TRAINER_TIMEOUT"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			return cfg, fmt.Errorf("TRAINER_TIMEOUT=%q: %v", s, err)
		}
		cfg.Timeout = d
	}
	return cfg, nil
}
