// Package multikueue runs the product on two local clusters that Kueue's MultiKueue connects
// (test/cluster's StartMultiKueue): a management cluster (API server, Kueue dispatching through MultiKueue,
// the trainer CRDs and the operator, which must leave the TrainJobs there alone) and a worker cluster (the
// full profile with Kueue, JobSet and the operator). A TrainJob created on the management cluster with the
// real kubectl-trainjob binary is dispatched to the worker, runs and completes there, its status comes back,
// and `status` and `logs` read it through the management cluster's kubeconfig alone.
//
// The two clusters, their Kueues and their operators serve every test (TestMain).
package multikueue

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/stack"
)

var suite struct {
	clusters *cluster.MultiKueue
	// manager and worker are clients of each cluster's administrator, with the project's scheme.
	manager, worker client.Client
	binary          string
}

func TestMain(m *testing.M) {
	os.Exit(stack.InSuiteDir("e2e/multikueue", func(dir, logDir string) int { return runSuite(m, dir, logDir) }))
}

// runSuite starts the two clusters with their operators, in dir, runs m's tests and stops it all.
func runSuite(m *testing.M, dir, logDir string) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "e2e/multikueue: "+format+"\n", args...) }
	fail := func(err error) int {
		logf("setup: %v", err)
		return 1
	}

	begin := time.Now()
	// The binary builds while the clusters start; each cluster gets the product as soon as it is up, while the
	// other may still be starting.
	buildBinary := sync.OnceValues(func() (string, error) { return stack.Binary(ctx, dir) })
	var mu sync.Mutex
	var stacks []*stack.Stack
	// The operators stop before their clusters.
	defer func() {
		for _, s := range stacks {
			if err := s.Down(); err != nil {
				logf("stop an operator: %v", err)
			}
		}
		if suite.clusters != nil {
			if err := suite.clusters.Stop(); err != nil {
				logf("stop the clusters: %v", err)
			}
		}
	}()
	go func() { _, _ = buildBinary() }()
	install := func(ctx context.Context, name string, c *cluster.Cluster) error {
		binary, err := buildBinary()
		if err != nil {
			return err
		}
		s, err := stack.Up(ctx, c, stack.Options{Binary: binary, Dir: filepath.Join(dir, name), LogDir: filepath.Join(logDir, name),
			Logf: func(format string, args ...any) { logf(name+": "+format, args...) }})
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		stacks = append(stacks, s)
		if name == "manager" {
			suite.manager = s.Client
		} else {
			suite.worker = s.Client
		}
		logf("%s cluster and its operator up in %v", name, time.Since(begin).Round(100*time.Millisecond))
		return nil
	}
	mk, err := cluster.StartMultiKueue(ctx, cluster.MultiKueueOptions{
		Manager: cluster.Options{LogDir: filepath.Join(logDir, "manager")},
		Worker:  cluster.Options{LogDir: filepath.Join(logDir, "worker")},
		Started: install,
	})
	if err != nil {
		return fail(err)
	}
	suite.clusters = mk
	if suite.binary, err = buildBinary(); err != nil {
		return fail(err)
	}
	logf("management and worker clusters connected, each with its operator, in %v", time.Since(begin).Round(100*time.Millisecond))
	code := m.Run()
	if code != 0 {
		mk.DumpLogs(os.Stderr, 40)
	}
	return code
}
