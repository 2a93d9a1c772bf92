// Package chaos_test runs the operator as its Deployment's container (test/stack) on a local API server and
// breaks things under it: the operator is killed in the middle of a burst of creates. Nothing may be lost:
// after the restart every TrainJob has exactly its own children and says it is built.
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
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator/runtimes"
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
	s, err := stack.Up(ctx, c, stack.Options{Binary: binary, Dir: dir, Logf: logf})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = s.Down() }()
	env.stack, env.client = s, s.Client
	code = m.Run()
	return code
}

// burst is how many TrainJobs TestKillDuringBurst creates, and killAfter after how many creates it kills the
// operator.
const (
	burst     = 500
	killAfter = 150
	workers   = 10
)

// TestKillDuringBurst: SIGKILL of the operator while 500 TrainJobs are being created. Creates that meet the
// webhook down are retried, as a client would. After the restart every TrainJob has exactly one JobSet and one
// runtime snapshot, both controlled by it, says ComponentsCreated=True, and none failed.
func TestKillDuringBurst(t *testing.T) {
	ctx := t.Context()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "chaos-"}}
	if err := env.client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	var created atomic.Int32
	killed := make(chan error, 1)
	go func() {
		err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Minute, true, func(context.Context) (bool, error) {
			return created.Load() >= killAfter, nil
		})
		if err == nil {
			t.Logf("SIGKILL of the operator after %d creates", created.Load())
			err = env.stack.KillOperator(ctx)
			t.Logf("the operator is ready again after %d creates", created.Load())
		}
		killed <- err
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
				if err := createRetrying(ctx, ns.Name, name); err != nil {
					errs <- err
					return
				}
				created.Add(1)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := <-killed; err != nil {
		t.Fatalf("kill and restart the operator: %v", err)
	}

	var last error
	err := wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		last = allBuilt(ctx, ns.Name)
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("after the crash: %v (operator log: %s)", last, env.stack.Operator.LogPath)
	}
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
		tj := &tjs.Items[i]
		switch {
		case meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobFailed):
			problems = append(problems, fmt.Errorf("%s failed: %+v", tj.Name, tj.Status.Conditions))
		case !meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobComponentsCreated):
			problems = append(problems, fmt.Errorf("%s not built: %+v", tj.Name, tj.Status.Conditions))
		case jobSets[tj.Name] == nil || !metav1.IsControlledBy(jobSets[tj.Name], tj):
			problems = append(problems, fmt.Errorf("%s has no JobSet of its own", tj.Name))
		case snapshots[runtimes.SnapshotName(tj)] == nil || !metav1.IsControlledBy(snapshots[runtimes.SnapshotName(tj)], tj):
			problems = append(problems, fmt.Errorf("%s has no snapshot of its own", tj.Name))
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
