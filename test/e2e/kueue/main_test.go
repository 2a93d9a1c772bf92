// Package kueue runs the product with Kueue on the local simulated-GPU cluster (test/cluster, full profile
// with Options.Kueue): TrainJobs in a LocalQueue are queued, admitted within the ClusterQueue's GPU quota,
// preempted and resumed, and the JobSets the operator builds are what Kueue accounts for.
//
// One cluster, one Kueue and one operator serve every test (TestMain), as in test/e2e. The cluster has 8 GPU
// nodes, 2 blocks of 2 racks of 2 (cluster.RackOf), so that topology-aware placement has racks to choose from.
package kueue

import (
	"os"
	"testing"

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
	os.Exit(stack.RunSuite(m, "e2e/kueue", cluster.Options{Profile: cluster.ProfileFull, Kueue: true, GPUNodes: 8}, func(s *stack.Suite) {
		suite.cluster, suite.client, suite.binary = s.Cluster, s.Stack.Client, s.Binary
	}))
}
