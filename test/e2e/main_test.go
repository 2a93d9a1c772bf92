// Package e2e runs the whole product on the local simulated-GPU cluster (test/cluster, full profile): the
// manifests of config/default applied, the operator's Deployment running as a process of the real binary
// (test/stack), TrainJobs created and inspected with the real `kubectl trainjob` commands, and the chain
// TrainJob → pipeline → JobSet → Jobs → Pods on GPU nodes → conditions → CLI checked end to end.
//
// One cluster and one operator serve every test (TestMain); each test works in its own namespace, waits on
// conditions with deadlines, and on failure prints its TrainJobs, JobSets, pods and events and the tail of
// every component's log and the operator's.
package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/stack"
)

// suite is what every test shares.
var suite struct {
	cluster *cluster.Cluster
	stack   *stack.Stack
	client  client.Client
	// binary is the kubectl-trainjob binary the operator and the CLI run from.
	binary string
	// kubeconfig is the administrator's, for the CLI.
	kubeconfig string
	// repo is the repository's root folder.
	repo string
}

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) (code int) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir, err := os.MkdirTemp("", "trainjob-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	logDir := filepath.Join(dir, "logs")
	defer func() {
		if code == 0 {
			_ = os.RemoveAll(dir)
		} else {
			fmt.Fprintf(os.Stderr, "e2e: logs of every component and of the operator kept in %s\n", logDir)
		}
	}()
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "e2e setup: %v\n", err)
		return 1
	}
	if suite.repo, err = cluster.RepoRoot(); err != nil {
		return fail(err)
	}

	// The binary builds while the cluster starts.
	begin := time.Now()
	built := make(chan error, 1)
	go func() {
		var err error
		suite.binary, err = stack.Binary(ctx, dir)
		built <- err
	}()
	c, err := cluster.Start(ctx, cluster.Options{Profile: cluster.ProfileFull, LogDir: logDir})
	if err != nil {
		<-built
		return fail(err)
	}
	suite.cluster = c
	defer func() {
		if err := c.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: stop the cluster: %v\n", err)
		}
	}()
	fmt.Fprintf(os.Stderr, "e2e: local cluster up in %v\n", time.Since(begin).Round(100*time.Millisecond))
	if err := <-built; err != nil {
		return fail(err)
	}
	suite.kubeconfig = c.KubeconfigPath

	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "e2e: "+format+"\n", args...) }
	s, err := stack.Up(ctx, c, stack.Options{Binary: suite.binary, Dir: dir, LogDir: logDir, Logf: logf})
	if err != nil {
		c.DumpLogs(os.Stderr, 40)
		return fail(err)
	}
	suite.stack, suite.client = s, s.Client
	defer func() {
		if err := s.Down(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: stop the operator: %v\n", err)
		}
	}()
	fmt.Fprintf(os.Stderr, "e2e: operator ready %v after start\n", time.Since(begin).Round(100*time.Millisecond))
	return m.Run()
}
