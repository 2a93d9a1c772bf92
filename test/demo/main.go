// Command demo is `make demo`: the product on a local simulated-GPU cluster. It starts the full local cluster
// (test/cluster), installs config/default and runs the operator as its Deployment would (test/stack),
// creates a multi-node torch TrainJob with a dataset initializer on the GPU nodes with `kubectl trainjob
// create`, follows it with `kubectl trainjob status -w` until it is Complete, prints what to try next and
// keeps the cluster up until Ctrl-C. With -no-wait it stops everything once the TrainJob has ended, for
// scripts and CI; it exits 1 unless the TrainJob is Complete. It gives up, saying so, unless the TrainJob is
// Complete within -timeout of the start.
//
// Where the machine can run the local cluster's real node (Linux, root, containerd and runc), the operator runs
// as its Deployment's pods from its image instead, a CPU TrainJob trains for real next to the simulated one
// (realnode.go), and then a small hyperparameter search of its learning rate, an OptimizationJob (search.go),
// runs its trials there; the first line says which mode it runs in.
//
// It is a development program: the shipped binary does not contain it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/config"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/stack"
)

// The demo's TrainJob and its runtime, next to this file.
const (
	trainJobName = "demo"
	namespace    = "default"
	runtimeFile  = "test/demo/runtime.yaml"
	trainJobFile = "test/demo/trainjob.yaml"
)

// podRunDuration is how long a simulated pod runs unless it says otherwise (SIM_RUN_SECONDS): long enough to
// watch the jobs you create after the demo's.
const podRunDuration = 10 * time.Second

// defaultTimeout bounds how long the demo may take from its start until its TrainJob is Complete (about a
// minute on an idle machine, cluster start included).
const defaultTimeout = 10 * time.Minute

type options struct {
	// noWait stops everything once the TrainJob has ended instead of waiting for Ctrl-C.
	noWait bool
	// timeout bounds the time from the start until the TrainJob is Complete.
	timeout time.Duration
	// binary is the kubectl-trainjob binary: the operator and every command shown run from it.
	binary string
	// dir receives the kubeconfig and logs/ (the components' and the operator's logs).
	dir string
	// root is the repository.
	root string

	// process runs the operator as a process and every pod simulated even where the real node could run.
	process bool

	out io.Writer
	// then, when set, runs once the TrainJob is Complete, before the cluster stops, with the environment
	// that the commands printed under "try next" need (tests run them with it) and the dashboard's URL.
	then func(ctx context.Context, env []string, dashboardURL string) error
	// dashboardStarted, when set, is called with the dashboard's URL as soon as the dashboard serves, before the
	// TrainJobs are created.
	dashboardStarted func(dashboardURL string)
}

func main() {
	var o options
	flag.BoolVar(&o.noWait, "no-wait", false, "stop everything once the TrainJob has ended, instead of keeping the cluster up until Ctrl-C")
	flag.StringVar(&o.binary, "binary", "bin/kubectl-trainjob", "the kubectl-trainjob binary (`make build`)")
	flag.StringVar(&o.dir, "dir", "bin/demo", "folder for the kubeconfig and logs/")
	flag.DurationVar(&o.timeout, "timeout", defaultTimeout, "give up unless the TrainJob is Complete this long after the start")
	flag.BoolVar(&o.process, "process", false, "run the operator as a process and every pod simulated, even where the real node could run")
	flag.Parse()
	o.out = os.Stdout
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) (err error) {
	// envtest logs its progress through controller-runtime, which prints a warning and a stack trace on the
	// demo's output when no logger is set by then; the demo says its steps itself.
	ctrllog.SetLogger(logr.Discard())
	if o.root == "" {
		if o.root, err = cluster.RepoRoot(); err != nil {
			return err
		}
	}
	for _, p := range []*string{&o.binary, &o.dir} {
		if *p, err = filepath.Abs(*p); err != nil {
			return err
		}
	}
	if _, err := os.Stat(o.binary); err != nil {
		return fmt.Errorf("%w: run `make build` (or `make demo`)", err)
	}
	logDir := filepath.Join(o.dir, "logs")
	kubeconfig := filepath.Join(o.dir, "kubeconfig")
	begin := time.Now()
	step := newSteps(o.out)
	if o.timeout <= 0 {
		o.timeout = defaultTimeout
	}
	// The cluster lives on ctx (until Ctrl-C); what leads to the TrainJob's completion must end by the deadline.
	untilComplete, stopDeadline := context.WithDeadline(ctx, begin.Add(o.timeout))
	defer stopDeadline()
	late := func(what string) error {
		return fmt.Errorf("TrainJob %s/%s was not Complete within %v of the start (-timeout): %s did not end in time; logs in %s",
			namespace, trainJobName, o.timeout, what, logDir)
	}

	onRealNode := o.realNode() == nil
	clusterOpts := cluster.Options{Profile: cluster.ProfileFull, LogDir: logDir, PodRunDuration: podRunDuration}
	what := "Starting the local cluster: kube-apiserver, etcd, kube-controller-manager, kube-scheduler, JobSet, KWOK with 4 GPU nodes × 8 nvidia.com/gpu and 2 CPU nodes"
	if onRealNode {
		step.start("Building the images the real node runs, without Docker: the operator (" + o.binary + ") and the CPU trainer (" + cpuTrainerPackage + ")")
		archives, err := buildImages(untilComplete, o.root, o.binary, filepath.Join(o.dir, "images"))
		if err != nil {
			return err
		}
		step.done()
		clusterOpts.RealNode, clusterOpts.RealNodeImages = true, archives
		what += ", and the real node " + cluster.RealNodeName + " (kubelet, containerd, runc)"
	}
	step.start(what)
	c, err := cluster.Start(ctx, clusterOpts)
	if err != nil {
		return err
	}
	var s *stack.Stack
	defer func() {
		fmt.Fprintln(o.out, "Stopping the operator and the cluster…")
		begin := time.Now()
		if s != nil {
			err = errors.Join(err, s.Down())
		}
		err = errors.Join(err, c.Stop())
		if rmErr := os.Remove(kubeconfig); !errors.Is(rmErr, os.ErrNotExist) {
			err = errors.Join(err, rmErr)
		}
		fmt.Fprintf(o.out, "Stopped in %v.\n", time.Since(begin).Round(100*time.Millisecond))
	}()
	if err := c.WriteKubeconfig(kubeconfig); err != nil {
		return err
	}
	step.done()

	if onRealNode {
		step.start("Installing `kustomize build config/default` server-side with the image " + operatorImage + " (and the TrainJobStatus and OptimizationJob gates on): the operator runs as its Deployment's 2 pods on " + cluster.RealNodeName)
		s, err = stack.UpAsDeployment(untilComplete, c, operatorImage, step.detail, "--feature-gates=TrainJobStatus=true,"+config.FeatureOptimizationJob+"=true")
	} else {
		step.start("Installing `kustomize build config/default` server-side: CRDs, RBAC, webhooks, the shipped ClusterTrainingRuntimes; running the operator's Deployment as a process (the OptimizationJob gate on)")
		s, err = stack.Up(untilComplete, c, stack.Options{Binary: o.binary, Dir: o.dir, LogDir: logDir, Logf: step.detail,
			ExtraArgs: []string{"--feature-gates=" + config.FeatureOptimizationJob + "=true"}})
	}
	if err != nil {
		if ctx.Err() == nil && untilComplete.Err() != nil {
			return errors.Join(late("installing and starting the operator"), err)
		}
		return err
	}
	step.done()

	env := append(os.Environ(), "KUBECONFIG="+kubeconfig)
	step.start("kubectl trainjob dashboard -n " + namespace + ": the TrainJobs in a browser, live, for as long as the cluster runs")
	dashboard, err := stack.StartDashboard(untilComplete, o.binary, env, filepath.Join(logDir, "dashboard.log"), "-n", namespace)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, dashboard.Stop()) }()
	step.detail("open %s", dashboard.URL)
	step.done()
	if o.dashboardStarted != nil {
		o.dashboardStarted(dashboard.URL)
	}

	logsCtx, stopLogs := context.WithCancel(ctx)
	defer stopLogs()
	go writeTrainingLogs(logsCtx, c, namespace, trainJobName)

	step.start("Applying the TrainingRuntime " + runtimeFile + ": torch, a dataset-initializer step, trainer nodes on the GPU nodes")
	if err := stack.ApplyFile(untilComplete, s.Client, filepath.Join(o.root, runtimeFile), namespace); err != nil {
		return err
	}
	step.done()

	cli := func(args ...string) *exec.Cmd {
		cmd := exec.CommandContext(untilComplete, o.binary, args...)
		cmd.Env = env
		cmd.Stdout, cmd.Stderr = o.out, o.out
		cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
		cmd.WaitDelay = 5 * time.Second
		return cmd
	}
	step.start("kubectl trainjob create -f " + trainJobFile + "   (4 nodes × 8 GPUs, dataset initializer)")
	if err := cli("create", "-n", namespace, "-f", filepath.Join(o.root, trainJobFile)).Run(); err != nil {
		return fmt.Errorf("kubectl trainjob create: %w", err)
	}
	step.done()

	if onRealNode {
		step.start("kubectl trainjob create -f " + cpuTrainJobFile + fmt.Sprintf("   (%d real CPU ranks on %s, next to the simulated GPU job)", cpuRanks, cluster.RealNodeName))
		if err := cli("create", "-n", namespace, "-f", filepath.Join(o.root, cpuTrainJobFile)).Run(); err != nil {
			return fmt.Errorf("kubectl trainjob create: %w", err)
		}
		step.done()
	}

	step.start("kubectl trainjob status " + trainJobName + " -w")
	statusErr := cli("status", "-n", namespace, trainJobName, "-w").Run()
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case untilComplete.Err() != nil:
		return late("kubectl trainjob status -w")
	case statusErr != nil:
		return fmt.Errorf("TrainJob %s did not complete (kubectl trainjob status -w: %w); logs in %s", trainJobName, statusErr, logDir)
	}
	fmt.Fprintf(o.out, "\nTrainJob %s/%s is Complete, %v after `make demo` started.\n", namespace, trainJobName, time.Since(begin).Round(time.Second))
	if onRealNode {
		step.start("kubectl trainjob wait " + cpuTrainJobName + " --for=Complete, then kubectl trainjob logs " + cpuTrainJobName + " --rank all: every rank prints the same losses")
		if err := cli("wait", "-n", namespace, cpuTrainJobName, "--for=Complete").Run(); err != nil {
			if ctx.Err() == nil && untilComplete.Err() != nil {
				return fmt.Errorf("TrainJob %s/%s was not Complete within %v of the start (-timeout); logs in %s", namespace, cpuTrainJobName, o.timeout, logDir)
			}
			return fmt.Errorf("TrainJob %s did not complete (kubectl trainjob wait: %w); logs in %s", cpuTrainJobName, err, logDir)
		}
		if err := cli("logs", "-n", namespace, cpuTrainJobName, "--rank", "all").Run(); err != nil {
			return fmt.Errorf("kubectl trainjob logs: %w", err)
		}
		fmt.Fprintf(o.out, "\nTrainJob %s/%s is Complete: it trained for real on %s.\n", namespace, cpuTrainJobName, cluster.RealNodeName)

		step.start("kubectl trainjob optimize -f " + searchFile + fmt.Sprintf("   (a random search of the CPU trainer's learning rate: %d one-rank trials on %s)", searchTrials, cluster.RealNodeName))
		if err := cli("optimize", "-n", namespace, "-f", filepath.Join(o.root, searchFile)).Run(); err != nil {
			return fmt.Errorf("kubectl trainjob optimize: %w", err)
		}
		step.done()
		step.start("Following OptimizationJob " + searchName + ": each trial as it completes, with its learning rate and the last loss it reported")
		if err := followSearch(untilComplete, s.Client, o.out); err != nil {
			if ctx.Err() == nil && untilComplete.Err() != nil {
				return fmt.Errorf("OptimizationJob %s/%s was not Complete within %v of the start (-timeout); logs in %s", namespace, searchName, o.timeout, logDir)
			}
			return fmt.Errorf("%w; logs in %s", err, logDir)
		}
		step.done()
		step.start("kubectl trainjob status " + searchName + ": the search, its best trial and its trials best first")
		if err := cli("status", "-n", namespace, searchName).Run(); err != nil {
			return fmt.Errorf("kubectl trainjob status: %w", err)
		}
	}
	if o.then != nil {
		if err := o.then(ctx, env, dashboard.URL); err != nil {
			return err
		}
	}
	if o.noWait {
		return nil
	}
	printNext(o.out, o.binary, kubeconfig, logDir, dashboard.URL)
	<-ctx.Done()
	fmt.Fprintln(o.out)
	return nil
}

// printNext tells what to try while the cluster stays up, and where the dashboard is.
func printNext(w io.Writer, binary, kubeconfig, logDir, dashboardURL string) {
	fmt.Fprintf(w, `
The cluster stays up until Ctrl-C. In another terminal:

  export KUBECONFIG=%s
  export PATH=%s:$PATH
  # In a browser, the dashboard (kubectl-trainjob dashboard -n default, until Ctrl-C): %[5]s

  kubectl-trainjob list
  kubectl-trainjob status %[3]s                        # the stages, jobs, pods and timeline
  kubectl-trainjob logs %[3]s --rank all               # every trainer node
  kubectl-trainjob logs %[3]s --stage dataset-initializer
  kubectl-trainjob describe-pipeline %[3]s             # what each plugin of the operator did

  # A GPU job from flags on the shipped runtime: 2 nodes × 8 GPUs, on two GPU nodes.
  kubectl-trainjob create llama --runtime torch-distributed --nodes 2 --gpus-per-node 8 -- torchrun train.py
  kubectl-trainjob wait llama --for=Complete          # its pods run for 10 s
  kubectl-trainjob status llama

  # A job that does not fit: 16 GPUs per node, the nodes have 8.
  kubectl-trainjob create too-big --runtime torch-distributed --nodes 2 --gpus-per-node 16
  kubectl-trainjob status too-big                     # its pods cannot be scheduled, and the scheduler says why
  kubectl-trainjob delete too-big

(kubectl trainjob … is the same command when kubectl is on your PATH.)
Logs of every component and of the operator: %s
`, kubeconfig, filepath.Dir(binary), trainJobName, logDir, dashboardURL)
}

// steps prints numbered progress lines with their durations.
type steps struct {
	w     io.Writer
	n     int
	begin time.Time
}

func newSteps(w io.Writer) *steps { return &steps{w: w} }

func (s *steps) start(what string) {
	s.n++
	s.begin = time.Now()
	fmt.Fprintf(s.w, "==> [%d] %s\n", s.n, what)
}

func (s *steps) detail(format string, args ...any) {
	fmt.Fprintf(s.w, "    "+format+"\n", args...)
}

func (s *steps) done() {
	fmt.Fprintf(s.w, "    done in %v\n", time.Since(s.begin).Round(100*time.Millisecond))
}
