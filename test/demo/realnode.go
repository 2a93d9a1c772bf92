package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/images"
)

// Where the machine can run it (Linux, root, containerd and runc from `make tools`), the demo adds the local
// cluster's real node: the operator runs as its Deployment's pods from its image, and a CPU TrainJob trains
// for real next to the simulated GPU one.
const (
	operatorImage     = "trainjob.local/kubectl-trainjob:demo"
	cpuTrainerImage   = "trainjob.local/torchtrainer:demo"
	cpuTrainerPackage = "./test/images/torchtrainer"
	// cpuTrainJobFile is the CPU TrainJob: the shipped torch-distributed runtime, patched onto the real node.
	cpuTrainJobFile = "test/demo/sgd.yaml"
	cpuTrainJobName = "sgd"
	// cpuRanks and cpuSteps are cpuTrainJobFile's numNodes and TRAINER_STEPS.
	cpuRanks = 3
	cpuSteps = 20
)

// realNode says in one line which mode the demo runs in, and returns nil when it is the real node's, or why
// not.
func (o options) realNode() error {
	err := cluster.RealNodeSupported()
	if o.process {
		err = errors.New("-process was given")
	}
	if err == nil {
		fmt.Fprintf(o.out, "Mode: real node — the operator runs as its Deployment's pods on %s and a %d-rank CPU TrainJob trains for real next to the simulated GPU one.\n",
			cluster.RealNodeName, cpuRanks)
		return nil
	}
	fmt.Fprintf(o.out, "Mode: process — no real node here (%v): the operator runs as a process and every pod is simulated.\n", err)
	return err
}

// buildImages writes the image archives of the operator, from binary, and of the CPU trainer into dir.
func buildImages(ctx context.Context, root, binary, dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	operator := filepath.Join(dir, "kubectl-trainjob.tar")
	if err := images.WriteArchive(images.Operator(binary, operatorImage, "demo", "demo"), operator); err != nil {
		return nil, err
	}
	trainer, err := images.Program(ctx, root, cpuTrainerPackage, cpuTrainerImage, dir)
	if err != nil {
		return nil, err
	}
	return []string{operator, trainer}, nil
}
