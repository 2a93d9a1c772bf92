package stack

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
)

// Suite is a local cluster with the product on it, which the tests of one package share (from their TestMain).
type Suite struct {
	Cluster *cluster.Cluster
	Stack   *Stack
	// Binary is the kubectl-trainjob binary the operator runs from, for the tests' CLI too.
	Binary string
}

// RunSuite runs m's tests on a local cluster started with opts and the product on it (Up; the binary builds
// while the cluster starts), and returns their exit code: for TestMain, `os.Exit(stack.RunSuite(m, …))`. set
// receives the suite before the tests run. Everything stops after them. name prefixes what it reports.
func RunSuite(m *testing.M, name string, opts cluster.Options, set func(*Suite)) int {
	return InSuiteDir(name, func(dir, logDir string) int {
		logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, name+": "+format+"\n", args...) }
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()

		begin := time.Now()
		var s Suite
		built := make(chan error, 1)
		go func() {
			var err error
			s.Binary, err = Binary(ctx, dir)
			built <- err
		}()
		opts.LogDir = logDir
		c, err := cluster.Start(ctx, opts)
		if err != nil {
			<-built
			logf("setup: %v", err)
			return 1
		}
		s.Cluster = c
		defer func() {
			if err := c.Stop(); err != nil {
				logf("stop the cluster: %v", err)
			}
		}()
		logf("local cluster up in %v", time.Since(begin).Round(100*time.Millisecond))
		if err := <-built; err != nil {
			logf("setup: %v", err)
			return 1
		}
		if s.Stack, err = Up(ctx, c, Options{Binary: s.Binary, Dir: dir, LogDir: logDir, Logf: logf}); err != nil {
			c.DumpLogs(os.Stderr, 40)
			logf("setup: %v", err)
			return 1
		}
		defer func() {
			if err := s.Stack.Down(); err != nil {
				logf("stop the operator: %v", err)
			}
		}()
		logf("operator ready %v after start", time.Since(begin).Round(100*time.Millisecond))
		set(&s)
		code := m.Run()
		if code != 0 {
			c.DumpLogs(os.Stderr, 40)
		}
		return code
	})
}

// InSuiteDir runs run with a new temporary folder and its logs/ subfolder, for what a suite starts, and
// returns run's exit code. The folder is removed when run succeeded; otherwise it is kept, and said where, for
// the logs of every component.
func InSuiteDir(name string, run func(dir, logDir string) int) int {
	dir, err := os.MkdirTemp("", "trainjob-"+strings.ReplaceAll(name, "/", "-")+"-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	logDir := filepath.Join(dir, "logs")
	code := run(dir, logDir)
	if code == 0 {
		_ = os.RemoveAll(dir)
	} else {
		fmt.Fprintf(os.Stderr, "%s: the logs of every component kept in %s\n", name, logDir)
	}
	return code
}
