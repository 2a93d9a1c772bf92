// Package chaos_test runs the operator as its Deployment's two replicas (test/stack: processes of the
// Deployment's container, leader election between them, the webhooks reached through a stand-in for their
// Service) on a local API server and breaks things under them: the leader is killed in the middle of a burst
// of creates, or left dead while a TrainJob is created; kube-apiserver and etcd are stopped and started
// again during a burst; the leader is killed in the middle of an OptimizationJob's search. Nothing may be lost:
// afterwards every TrainJob has exactly its own children and says it is built, and the search has exactly its
// trials. A replica that exits is run again, as the kubelet would (restartPolicy Always).
package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/config"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/snapshot"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/stack"
)

var env struct {
	stack  *stack.Stack
	client client.Client
}

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	// The cluster's and the stack's clients log nothing; the operator logs to its own file.
	log.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir, err := os.MkdirTemp("", "trainjob-chaos-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := 1
	defer func() {
		if code == 0 {
			_ = os.RemoveAll(dir)
		} else {
			fmt.Fprintf(os.Stderr, "chaos: logs kept in %s\n", dir)
		}
	}()
	binary, err := stack.Binary(ctx, dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	c, err := cluster.Start(ctx, cluster.Options{Profile: cluster.ProfileAPI, LogDir: dir})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = c.Stop() }()
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "chaos: "+format+"\n", args...) }
	// The OptimizationJob gate on: TestKillDuringSearch kills the leader in the middle of a search.
	s, err := stack.Up(ctx, c, stack.Options{Binary: binary, Dir: dir, Logf: logf, Replicas: replicas,
		ExtraArgs: []string{"--feature-gates=" + config.FeatureOptimizationJob + "=true"}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = s.Down() }()
	env.stack, env.client = s, s.Client
	code = m.Run()
	return code
}

// replicas is the Deployment's replica count (config/manager).
const replicas = 2

// burst is how many TrainJobs a burst creates, and faultAfter after how many creates its fault strikes.
const (
	burst      = 500
	faultAfter = 150
	workers    = 10
)

// outage is how long kube-apiserver or etcd stays down: longer than the leader election's renew deadline,
// so the leader loses its lease and exits, and must be run again.
const outage = 15 * time.Second

// TestKillDuringBurst: SIGKILL of the leader while 500 TrainJobs are being created; the kubelet runs it again.
func TestKillDuringBurst(t *testing.T) {
	burstWithFault(t, "SIGKILL of the leading replica", func(ctx context.Context) error {
		leader, err := leader(ctx)
		if err != nil {
			return err
		}
		return env.stack.KillReplica(ctx, leader)
	})
}

// TestAPIServerRestartDuringBurst: kube-apiserver stops for longer than a lease's renew deadline during the
// burst and starts again.
func TestAPIServerRestartDuringBurst(t *testing.T) {
	burstWithFault(t, "a kube-apiserver restart", func(ctx context.Context) error {
		return env.stack.Cluster.RestartAPIServer(ctx, outage)
	})
}

// TestEtcdRestartDuringBurst: etcd stops for longer than a lease's renew deadline during the burst (the API
// server runs on, failing every request) and starts again.
func TestEtcdRestartDuringBurst(t *testing.T) {
	burstWithFault(t, "an etcd restart", func(ctx context.Context) error {
		return env.stack.Cluster.RestartEtcd(ctx, outage)
	})
}

// burstWithFault creates 500 TrainJobs in a new namespace, ten at a time, and strikes with fault after 150.
// Creates that meet the webhooks or the API server down are retried, as a client would. Then every
// TrainJob must get exactly one JobSet and one runtime snapshot, both controlled by it, and say
// ComponentsCreated=True, none Failed; replicas that exited meanwhile are run again.
func burstWithFault(t *testing.T, name string, fault func(context.Context) error) {
	ctx := t.Context()
	ns := cluster.NewNamespace(t, env.client, "chaos-", nil)
	var created atomic.Int32
	struck := make(chan error, 1)
	go func() {
		err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Minute, true, func(context.Context) (bool, error) {
			return created.Load() >= faultAfter, nil
		})
		if err == nil {
			t.Logf("%s after %d creates", name, created.Load())
			err = fault(ctx)
			t.Logf("%s is over after %d creates", name, created.Load())
		}
		struck <- err
	}()

	names := make(chan string)
	go func() {
		defer close(names)
		for i := range burst {
			names <- fmt.Sprintf("tj-%03d", i)
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for name := range names {
				if err := createRetrying(ctx, ns, name); err != nil {
					errs <- err
					return
				}
				created.Add(1)
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-struck; err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	for err := range errs {
		t.Fatal(err)
	}
	converges(t, ns)
}

// TestLeaderFailover: with the leader killed and not yet run again, a TrainJob created right away is
// admitted by the other replica's webhooks and built by it within 20 s: the Lease's duration plus a retry
// period, and the time to build.
func TestLeaderFailover(t *testing.T) {
	ctx := t.Context()
	ns := cluster.NewNamespace(t, env.client, "chaos-", nil)
	killedLeader, err := leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.stack.CrashReplica(killedLeader); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	t.Logf("SIGKILL of replica %d, the leader", killedLeader)
	if err := createRetrying(ctx, ns, "after-failover"); err != nil {
		t.Fatal(err)
	}
	created := time.Now()
	var last error
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, failoverDeadline, true, func(ctx context.Context) (bool, error) {
		if err := built(ctx, ns, "after-failover"); ctx.Err() == nil {
			last = err
		}
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("the TrainJob created after the leader died is not built within %v: %v", failoverDeadline, last)
	}
	t.Logf("built %v after its create, %v after the kill", time.Since(created).Round(100*time.Millisecond), time.Since(killed).Round(100*time.Millisecond))
	if n, err := env.stack.RestartExited(ctx); err != nil || n != 1 {
		t.Fatalf("run the killed replica again: %d run, %v", n, err)
	}
	// leader polls: the replica just run again serves its metrics only once it has started.
	if got, err := leader(ctx); err != nil || got == killedLeader {
		t.Fatalf("after the failover replica %d leads (%v), want the other one", got, err)
	}
}

// failoverDeadline is how long after its create a TrainJob must be built when the leader has just died: the
// dead leader's Lease expires (a lease duration), the other replica takes it at its next try (a retry period),
// and it then has a minute to start its controllers and build, on a machine of 2 cores busy with other tests.
const failoverDeadline = config.DefaultLeaseDuration + config.DefaultRetryPeriod + time.Minute

// leader waits until one replica leads, as after a restart one takes the Lease within a lease duration.
func leader(ctx context.Context) (int, error) {
	i, last := -1, error(nil)
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		i, last = env.stack.Leader(ctx)
		return last == nil, nil
	})
	if err != nil {
		return -1, fmt.Errorf("%w: %v", err, last)
	}
	return i, nil
}

// converges waits until every TrainJob of ns is built, running again the replicas that exited.
func converges(t *testing.T, ns string) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(t.Context(), time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := env.stack.RestartExited(ctx)
		if err != nil {
			return false, err
		}
		if n > 0 {
			t.Logf("%d replica(s) had exited and were run again", n)
		}
		last = allBuilt(ctx, ns)
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("after the fault: %v, %v (operator logs: %s)", err, last, logPaths())
	}
}

func logPaths() []string {
	var paths []string
	for _, o := range env.stack.Replicas {
		paths = append(paths, o.LogPath)
	}
	return paths
}

// createRetrying creates a one-node torch TrainJob, again while the webhook is down (the operator restarts),
// for at most two minutes. A create that went through before an error reached the client counts as done.
func createRetrying(ctx context.Context, ns, name string) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: "torch-distributed"},
				Trainer: &trainer.Trainer{NumNodes: ptr.To[int32](1)}}}
		last = client.IgnoreAlreadyExists(env.client.Create(ctx, tj))
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("create TrainJob %s: %w (last: %v)", name, err, last)
	}
	return nil
}

// allBuilt is nil when every TrainJob of ns is built, not failed, and has exactly its own JobSet and snapshot.
func allBuilt(ctx context.Context, ns string) error {
	var tjs trainer.TrainJobList
	var jss jobsetv1alpha2.JobSetList
	var cms corev1.ConfigMapList
	for _, l := range []client.ObjectList{&tjs, &jss, &cms} {
		if err := env.client.List(ctx, l, client.InNamespace(ns)); err != nil {
			return err
		}
	}
	if len(tjs.Items) != burst {
		return fmt.Errorf("%d TrainJobs, want %d", len(tjs.Items), burst)
	}
	jobSets := map[string]*jobsetv1alpha2.JobSet{}
	for i := range jss.Items {
		jobSets[jss.Items[i].Name] = &jss.Items[i]
	}
	snapshots := map[string]*corev1.ConfigMap{}
	for i := range cms.Items {
		snapshots[cms.Items[i].Name] = &cms.Items[i]
	}
	var problems []error
	for i := range tjs.Items {
		if err := builtWith(&tjs.Items[i], jobSets, snapshots); err != nil {
			problems = append(problems, err)
		}
	}
	if len(jss.Items) != burst {
		problems = append(problems, fmt.Errorf("%d JobSets for %d TrainJobs", len(jss.Items), burst))
	}
	if len(problems) > 3 {
		problems = append(problems[:3], fmt.Errorf("and %d more", len(problems)-3))
	}
	return errors.Join(problems...)
}

// built is nil when TrainJob ns/name is built, not failed, with its own JobSet and snapshot.
func built(ctx context.Context, ns, name string) error {
	var tj trainer.TrainJob
	if err := env.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &tj); err != nil {
		return err
	}
	var js jobsetv1alpha2.JobSet
	var cm corev1.ConfigMap
	jobSets, snapshots := map[string]*jobsetv1alpha2.JobSet{}, map[string]*corev1.ConfigMap{}
	if err := env.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &js); err == nil {
		jobSets[name] = &js
	} else if !apierrors.IsNotFound(err) {
		return err
	}
	snapshot := snapshot.Name(&tj)
	if err := env.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: snapshot}, &cm); err == nil {
		snapshots[snapshot] = &cm
	} else if !apierrors.IsNotFound(err) {
		return err
	}
	return builtWith(&tj, jobSets, snapshots)
}

// builtWith is nil when tj is built, not failed, and the JobSet and snapshot of its names are its own.
func builtWith(tj *trainer.TrainJob, jobSets map[string]*jobsetv1alpha2.JobSet, snapshots map[string]*corev1.ConfigMap) error {
	switch {
	case meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobFailed):
		return fmt.Errorf("%s failed: %+v", tj.Name, tj.Status.Conditions)
	case !meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobComponentsCreated):
		return fmt.Errorf("%s not built: %+v", tj.Name, tj.Status.Conditions)
	case jobSets[tj.Name] == nil || !metav1.IsControlledBy(jobSets[tj.Name], tj):
		return fmt.Errorf("%s has no JobSet of its own", tj.Name)
	case snapshots[snapshot.Name(tj)] == nil || !metav1.IsControlledBy(snapshots[snapshot.Name(tj)], tj):
		return fmt.Errorf("%s has no snapshot of its own", tj.Name)
	}
	return nil
}
