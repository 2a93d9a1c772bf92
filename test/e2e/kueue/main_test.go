// Package kueue runs the product with Kueue on the local simulated-GPU cluster (test/cluster, full profile
// with Options.Kueue): TrainJobs in a LocalQueue are queued, admitted within the ClusterQueue's GPU quota,
// preempted and resumed, and the JobSets the operator builds are what Kueue accounts for.
//
// One cluster, one Kueue and one operator serve every test (TestMain), as in test/e2e.
package kueue

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

var suite struct {
	cluster *cluster.Cluster
	client  client.Client
	binary  string
}

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) (code int) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir, err := os.MkdirTemp("", "trainjob-e2e-kueue-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	logDir := filepath.Join(dir, "logs")
	defer func() {
		if code == 0 {
			_ = os.RemoveAll(dir)
		} else {
			fmt.Fprintf(os.Stderr, "e2e/kueue: logs of every component and of the operator kept in %s\n", logDir)
		}
	}()
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "e2e/kueue setup: %v\n", err)
		return 1
	}

	begin := time.Now()
	built := make(chan error, 1)
	go func() {
		var err error
		suite.binary, err = stack.Binary(ctx, dir)
		built <- err
	}()
	c, err := cluster.Start(ctx, cluster.Options{Profile: cluster.ProfileFull, Kueue: true, LogDir: logDir})
	if err != nil {
		<-built
		return fail(err)
	}
	suite.cluster = c
	defer func() {
		if err := c.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e/kueue: stop the cluster: %v\n", err)
		}
	}()
	fmt.Fprintf(os.Stderr, "e2e/kueue: local cluster with Kueue up in %v\n", time.Since(begin).Round(100*time.Millisecond))
	if err := <-built; err != nil {
		return fail(err)
	}
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "e2e/kueue: "+format+"\n", args...) }
	s, err := stack.Up(ctx, c, stack.Options{Binary: suite.binary, Dir: dir, LogDir: logDir, Logf: logf})
	if err != nil {
		c.DumpLogs(os.Stderr, 40)
		return fail(err)
	}
	suite.client = s.Client
	defer func() {
		if err := s.Down(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e/kueue: stop the operator: %v\n", err)
		}
	}()
	code = m.Run()
	if code != 0 {
		c.DumpLogs(os.Stderr, 40)
	}
	return code
}
