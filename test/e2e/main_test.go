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
	"fmt"
	"os"
	"testing"

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
	repo, err := cluster.RepoRoot()
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e setup: %v\n", err)
		os.Exit(1)
	}
	os.Exit(stack.RunSuite(m, "e2e", cluster.Options{Profile: cluster.ProfileFull}, func(s *stack.Suite) {
		suite.cluster, suite.stack, suite.client = s.Cluster, s.Stack, s.Stack.Client
		suite.binary, suite.kubeconfig, suite.repo = s.Binary, s.Cluster.KubeconfigPath, repo
	}))
}
