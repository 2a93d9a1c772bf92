// Command dev-cluster runs the local cluster's full profile in the foreground for manual work and demos:
// kube-apiserver, etcd, kube-controller-manager, kube-scheduler, the JobSet controller and KWOK with fake GPU
// nodes, and where the machine can, the real node; with -operator, the product too (the manifests of
// config/default and the operator's Deployment run as a process, as `make demo` runs it). It writes a kubeconfig,
// prints the line that points kubectl at it, and stops everything on Ctrl-C. `make dev-cluster` builds and runs it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/stack"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "dev-cluster:", err)
		os.Exit(1)
	}
}

func run() error {
	var opts cluster.Options
	dir := flag.String("dir", "bin/dev-cluster", "folder for the kubeconfig and the components' logs (logs/)")
	flag.IntVar(&opts.GPUNodes, "gpu-nodes", 4, "number of GPU nodes (negative: none)")
	flag.IntVar(&opts.CPUNodes, "cpu-nodes", 2, "number of CPU-only nodes (negative: none)")
	flag.IntVar(&opts.GPUsPerNode, "gpus-per-node", 8, "nvidia.com/gpu capacity of each GPU node")
	flag.DurationVar(&opts.PodRunDuration, "pod-run-duration", 10*time.Second, "how long a simulated container runs (pods may ask otherwise with env SIM_RUN_SECONDS)")
	crds := flag.String("crds", "", "comma-separated CRD folders to install (default: test/crds and config/crd/bases)")
	realNode := flag.String("real-node", "auto", "run the real node "+cluster.RealNodeName+" (kubelet, containerd, runc): auto (where the machine can), true or false")
	images := flag.String("images", "", "comma-separated image archives the real node has from the start (e.g. bin/image/kubectl-trainjob.tar)")
	flag.BoolVar(&opts.Kueue, "kueue", false, "run Kueue (TrainJob and JobSet integrations) with a ResourceFlavor "+cluster.KueueResourceFlavor+
		" and a ClusterQueue "+cluster.KueueClusterQueue+" of 16 nvidia.com/gpu; `make dev-cluster KUEUE=1`")
	operator := flag.String("operator", "", "run the product from this kubectl-trainjob binary: `kustomize build config/default` (CRDs, webhooks, "+
		"the shipped runtimes) and the operator's Deployment as a process; `make dev-cluster OPERATOR=1`")
	flag.Parse()
	switch *realNode {
	case "auto":
		if err := cluster.RealNodeSupported(); err != nil {
			fmt.Printf("no real node: %v\n", err)
		} else {
			opts.RealNode = true
		}
	case "true", "false":
		opts.RealNode = *realNode == "true"
	default:
		return fmt.Errorf("-real-node=%q: want auto, true or false", *realNode)
	}
	if *images != "" {
		opts.RealNodeImages = strings.Split(*images, ",")
	}
	if *crds != "" {
		opts.CRDDirs = strings.Split(*crds, ",")
	}
	opts.Profile = cluster.ProfileFull

	abs, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	opts.LogDir = filepath.Join(abs, "logs")
	if err := os.MkdirAll(opts.LogDir, 0o755); err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	begin := time.Now()
	c, err := cluster.Start(ctx, opts)
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(abs, "kubeconfig")
	if err := c.WriteKubeconfig(kubeconfig); err != nil {
		return errors.Join(err, c.Stop())
	}
	real := "no real node"
	if opts.RealNode {
		real = "real node " + cluster.RealNodeName
	}
	fmt.Printf("local cluster up in %v (GPU nodes: %d × %d nvidia.com/gpu, CPU nodes: %d, %s; logs in %s)\n",
		time.Since(begin).Round(100*time.Millisecond), max(opts.GPUNodes, 0), opts.GPUsPerNode, max(opts.CPUNodes, 0), real, opts.LogDir)
	if opts.Kueue {
		if err := c.CreateLocalQueue(ctx, "default"); err != nil {
			return errors.Join(err, c.Stop())
		}
		fmt.Printf("Kueue: LocalQueue default/%s feeds ClusterQueue %s (%d nvidia.com/gpu); create TrainJobs with --queue %s\n",
			cluster.KueueLocalQueue, cluster.KueueClusterQueue, cluster.KueueGPUQuota, cluster.KueueLocalQueue)
		fmt.Printf("Kueue: LocalQueue default/%s feeds ClusterQueue %s (every GPU, placed by Topology %s: %d nodes a rack, %d racks a block); "+
			"create TrainJobs with --queue %s --topology rack\n",
			cluster.KueueTASLocalQueue, cluster.KueueTASClusterQueue, cluster.KueueTopology, cluster.GPUNodesPerRack, cluster.RacksPerBlock,
			cluster.KueueTASLocalQueue)
	}
	var product *stack.Stack
	if *operator != "" {
		logf := func(format string, args ...any) { fmt.Printf("operator: "+format+"\n", args...) }
		if product, err = stack.Up(ctx, c, stack.Options{Binary: *operator, Dir: filepath.Join(abs, "operator"), LogDir: opts.LogDir, Logf: logf}); err != nil {
			return errors.Join(err, c.Stop())
		}
		fmt.Printf("the operator is ready (log: %s); `kubectl trainjob runtimes` lists the runtimes\n", product.Operator.LogPath)
	}
	fmt.Printf("export KUBECONFIG=%s\n", kubeconfig)
	fmt.Println("Ctrl-C stops it.")

	<-ctx.Done()
	fmt.Println("stopping…")
	var errs []error
	if product != nil {
		errs = append(errs, product.Down())
	}
	errs = append(errs, c.Stop())
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return os.Remove(kubeconfig)
}
