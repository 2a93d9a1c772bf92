package cluster_test

import (
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
)

// multiKueueController is the spec.managedBy Kueue gives a job whose ClusterQueue dispatches through MultiKueue.
const multiKueueController = "kueue.x-k8s.io/multikueue"

// TestMultiKueue is the acceptance test of the two clusters of StartMultiKueue, with JobSets (MultiKueue's own
// integration, independent of the project's operator): a JobSet in the manager's LocalQueue gets MultiKueue's
// spec.managedBy, its Workload is dispatched to the worker, where its copy runs (the manager has neither
// nodes nor a JobSet controller), and the copy's status comes back until the manager's JobSet is Completed.
// Stop then stops both and removes their folders.
func TestMultiKueue(t *testing.T) {
	m := cluster.StartMultiKueueForTest(t, cluster.MultiKueueOptions{
		Manager: cluster.Options{CRDDirs: testCRDDirs(t)},
		Worker:  cluster.Options{CRDDirs: testCRDDirs(t)},
	})
	manager := &suite{c: m.Manager, cl: newClient(t, m.Manager)}
	const ns = "multikueue"
	if err := m.CreateNamespace(t.Context(), ns); err != nil {
		t.Fatal(err)
	}

	js := queuedJobSet(ns, "dispatched", 2)
	if err := manager.cl.Create(t.Context(), js); err != nil {
		t.Fatal(err)
	}
	if got := ptr.Deref(js.Spec.ManagedBy, ""); got != multiKueueController {
		t.Errorf("spec.managedBy of the JobSet in the manager's LocalQueue = %q, want %q", got, multiKueueController)
	}
	manager.waitCompleted(t, js, "the manager's JobSet Completed, its status copied from the worker")
	wl, err := findWorkload(t.Context(), manager, ns, js.Name)
	if err != nil || wl == nil {
		t.Fatalf("the manager's Workload of the JobSet: %v, %v", wl, err)
	}
	if got, _, _ := unstructured.NestedString(wl.Object, "status", "clusterName"); got != cluster.MultiKueueWorker {
		t.Errorf("the Workload's status.clusterName = %q, want %q", got, cluster.MultiKueueWorker)
	}

	if err := m.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
	for _, c := range []*cluster.Cluster{m.Manager, m.Worker} {
		if _, err := os.Stat(c.Dir); !os.IsNotExist(err) {
			t.Errorf("the working folder %s is still there after Stop (%v)", c.Dir, err)
		}
	}
}
