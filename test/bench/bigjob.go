package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
)

// BigJobResult is one TrainJob of BigNodes nodes × 8 GPUs on as many simulated GPU nodes.
type BigJobResult struct {
	Nodes int `json:"nodes"`
	// RunningSeconds is the time from its create until every one of its pods is Running.
	RunningSeconds float64 `json:"runningSeconds"`
	// DRARunningSeconds is the same for a TrainJob of as many nodes on the shipped runtime torch-distributed-dra,
	// whose pods claim their 8 GPUs through DRA, created once the first one is gone (0 when not measured).
	DRARunningSeconds float64 `json:"draRunningSeconds,omitempty"`
	// Requests and DRARequests are the operator's requests in the big job's namespace for each of the two, from
	// its create until the operator is idle after every pod is Running: the same, as it writes one JobSet either
	// way and the pods' claims are the control plane's.
	Requests    requestCounts `json:"requests"`
	DRARequests requestCounts `json:"draRequests,omitempty"`
	// Commands are `kubectl get pods` of its JobSet, and `kubectl trainjob status`, `list` and `logs --rank all`
	// of it.
	Commands []CLIResult `json:"commands"`
}

// waitRunning returns once n pods of the big TrainJob name are Running. It lists them and watches from there,
// and lists again when the API server ends the watch (it ends watchers that fall behind a burst of pod updates).
func (b *bench) waitRunning(ctx context.Context, name string, n int) error {
	selector := client.MatchingLabels{"jobset.sigs.k8s.io/jobset-name": name}
	for {
		var list corev1.PodList
		if err := b.admin.List(ctx, &list, client.InNamespace(bigNamespace), selector); err != nil {
			return err
		}
		running := map[string]bool{}
		for _, pod := range list.Items {
			running[pod.Name] = pod.Status.Phase == corev1.PodRunning
		}
		count := func() int {
			c := 0
			for _, r := range running {
				if r {
					c++
				}
			}
			return c
		}
		if count() >= n {
			return nil
		}
		pods, err := b.watcher.Watch(ctx, &corev1.PodList{}, client.InNamespace(bigNamespace), selector,
			&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
		if err != nil {
			return err
		}
		for open := true; open; {
			select {
			case <-ctx.Done():
				pods.Stop()
				return fmt.Errorf("%d of %d pods of TrainJob %s Running: %w", count(), n, name, ctx.Err())
			case ev, ok := <-pods.ResultChan():
				pod, isPod := ev.Object.(*corev1.Pod)
				switch {
				case !ok || ev.Type == watch.Error:
					open = false
				case !isPod:
				case ev.Type == watch.Deleted:
					delete(running, pod.Name)
				default:
					running[pod.Name] = pod.Status.Phase == corev1.PodRunning
				}
				if count() >= n {
					pods.Stop()
					return nil
				}
			}
		}
		pods.Stop()
	}
}

// The TrainJob of the big job, its namespace, and the big TrainJob whose GPUs are claimed through DRA: on the
// shipped runtime draRuntimeName, from the namespace's ResourceClaimTemplate draTemplateName.
const (
	bigNamespace    = "bench-big"
	bigName         = "big"
	bigDRAName      = "big-dra"
	draRuntimeName  = "torch-distributed-dra"
	draTemplateName = "trainer-gpus"
)

// bigProfile is the cluster of the big job: the full profile with BigNodes GPU nodes, no CPU node, and pods
// that run until the cluster stops.
func bigProfile(k Knobs) cluster.Options {
	return cluster.Options{Profile: cluster.ProfileFull, GPUNodes: k.BigNodes, CPUNodes: -1, PodRunDuration: time.Hour}
}

// bigJob creates a TrainJob of BigNodes nodes × 8 GPUs, times it until every pod is Running, then times the
// CLI on it against kubectl, and the dashboard's page of it; then the same TrainJob claiming its GPUs through
// DRA.
func (b *bench) bigJob(ctx context.Context) error {
	if err := b.runBigJob(ctx); err != nil {
		return err
	}
	if err := b.bigJobCLI(ctx); err != nil {
		return err
	}
	if err := b.dashboardBigJob(ctx); err != nil {
		return err
	}
	return b.runBigDRAJob(ctx)
}

// bigTrainJob is a TrainJob of BigNodes nodes on the runtime named runtime, in the big job's namespace.
func (b *bench) bigTrainJob(name, runtime string) *trainer.TrainJob {
	tj := trainJob(bigNamespace, 0, false)
	tj.Name, tj.Spec.RuntimeRef.Name = name, runtime
	tj.Spec.Trainer.NumNodes = ptr.To(int32(b.k.BigNodes))
	return tj
}

// runBigJob creates a TrainJob of BigNodes nodes × 8 GPUs (nvidia.com/gpu) and times it until every pod is
// Running.
func (b *bench) runBigJob(ctx context.Context) error {
	n := b.k.BigNodes
	res := &BigJobResult{Nodes: n}
	b.summary.BigJob = res
	if err := b.createNamespace(ctx, bigNamespace); err != nil {
		return err
	}
	tj := b.bigTrainJob(bigName, runtimeName)
	tj.Spec.Trainer.ResourcesPerNode = &corev1.ResourceRequirements{Limits: corev1.ResourceList{cluster.GPUResource: resource.MustParse("8")}}
	b.logf("big job: a TrainJob of %d nodes × 8 GPUs on %d simulated GPU nodes", n, n)
	var err error
	res.RunningSeconds, res.Requests, err = b.timeRunning(ctx, tj)
	return err
}

// runBigDRAJob deletes the big TrainJob and waits until its pods are gone (they hold every GPU: the nodes'
// DRA devices are the same GPUs), then creates a TrainJob of BigNodes nodes on the shipped runtime
// torch-distributed-dra, whose pods claim 8 GPUs each from the namespace's ResourceClaimTemplate, and times it
// until every pod is Running: the kube-scheduler allocates each pod's claim from its node's ResourceSlice.
func (b *bench) runBigDRAJob(ctx context.Context) error {
	n := b.k.BigNodes
	b.logf("big job through DRA: deleting %s and waiting until its %d pods are gone", bigName, n)
	big := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: bigNamespace, Name: bigName}}
	if err := b.admin.Delete(ctx, big, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
		return err
	}
	pods := b.meta.Resource(corev1.SchemeGroupVersion.WithResource("pods")).Namespace(bigNamespace)
	err := poll(ctx, "the pods of TrainJob "+bigName+" gone", time.Second, settleTimeout, func(ctx context.Context) (bool, error) {
		left, err := pods.List(ctx, metav1.ListOptions{LabelSelector: "jobset.sigs.k8s.io/jobset-name=" + bigName, Limit: 1})
		return err == nil && len(left.Items) == 0, err
	})
	if err != nil {
		return err
	}
	if err := b.admin.Create(ctx, cluster.NewGPUClaimTemplate(bigNamespace, draTemplateName, 8)); err != nil {
		return err
	}
	b.logf("big job through DRA: a TrainJob of %d nodes on %s, 8 GPUs a pod claimed from ResourceClaimTemplate %s", n, draRuntimeName, draTemplateName)
	b.summary.BigJob.DRARunningSeconds, b.summary.BigJob.DRARequests, err = b.timeRunning(ctx, b.bigTrainJob(bigDRAName, draRuntimeName))
	return err
}

// timeRunning creates the big TrainJob tj and returns the seconds until every one of its pods is Running, and
// the operator's requests in its namespace from the create until the operator is idle.
func (b *bench) timeRunning(ctx context.Context, tj *trainer.TrainJob) (float64, requestCounts, error) {
	wctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	if _, err := b.audit.next(); err != nil { // what came before is not this TrainJob's
		return 0, nil, err
	}
	start := time.Now()
	if err := b.driver.Create(ctx, tj); err != nil {
		return 0, nil, err
	}
	if err := b.waitRunning(wctx, tj.Name, b.k.BigNodes); err != nil {
		return 0, nil, err
	}
	s := time.Since(start).Seconds()
	if _, err := waitIdle(wctx, b.stack.Operator, settleTimeout, nil); err != nil {
		return 0, nil, err
	}
	events, err := b.audit.next()
	if err != nil {
		return 0, nil, err
	}
	r := newOperatorRequests()
	r.count(events, b.isOperator, bigNamespace)
	all := requestCounts{}
	for _, c := range []requestCounts{r.writes, r.events, r.reads} {
		all.add(c)
	}
	b.logf("  every pod Running %.1fs after the create; the operator's requests: %d (%s)", s, all.total(), byCount(all))
	return s, all, nil
}

// bigJobCLI times the CLI on the big TrainJob against kubectl.
func (b *bench) bigJobCLI(ctx context.Context) error {
	n, res := b.k.BigNodes, b.summary.BigJob

	common, err := b.cliFlags(ctx)
	if err != nil {
		return err
	}
	common = append(common, "-n", bigNamespace)
	kubectl, err := kubectlPath()
	if err != nil {
		return err
	}
	names := func(what string, want int) func(string) error {
		return func(stdout string) error {
			if got := strings.Count(stdout, bigName+"-node-"); got != want {
				return fmt.Errorf("%d %s, want %d", got, what, want)
			}
			return nil
		}
	}
	commands := []cliCommand{
		{"kubectl get pods -l jobset.sigs.k8s.io/jobset-name=" + bigName, append([]string{kubectl, "get", "pods", "-l", "jobset.sigs.k8s.io/jobset-name=" + bigName}, common...), names("pods", n)},
		{"kubectl trainjob status " + bigName, append([]string{b.binary, "status", bigName}, common...), func(stdout string) error {
			if !strings.Contains(stdout, bigName) {
				return fmt.Errorf("does not name %s", bigName)
			}
			return nil
		}},
		{"kubectl trainjob list", append([]string{b.binary, "list"}, common...), func(stdout string) error {
			if strings.Count(stdout, "\n"+bigName+" ") != 1 {
				return fmt.Errorf("does not list %s once", bigName)
			}
			return nil
		}},
		// Every rank's log once: each simulated container has one line.
		{"kubectl trainjob logs " + bigName + " --rank all", append([]string{b.binary, "logs", bigName, "--rank", "all"}, common...), func(stdout string) error {
			seen := map[string]bool{}
			for line := range strings.Lines(stdout) {
				pod, _, _ := strings.Cut(strings.TrimPrefix(line, "["), "/")
				if seen[pod] {
					return fmt.Errorf("pod %s's log twice", pod)
				}
				seen[pod] = true
			}
			return names("logs", n)(stdout)
		}},
	}
	res.Commands, err = b.timeCommands(ctx, commands)
	return err
}
