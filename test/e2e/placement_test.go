package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
)

// TestGPUTrainJobFromFlags: a GPU TrainJob created from flags on the shipped torch-distributed runtime, which
// tolerates no taint, schedules on two GPU nodes and completes: the cluster's API server gives pods that request
// nvidia.com/gpu the toleration of the GPU taint (ExtendedResourceToleration), as GPU clusters do. It is the
// command the demo's "try next" list shows.
func TestGPUTrainJobFromFlags(t *testing.T) {
	t.Parallel()
	useGPUs(t)
	ns := cluster.NewNamespace(t, suite.client, "e2e-", diagnose)
	mustKubectlTrainJob(t, "create", "llama", "-n", ns, "--runtime", "torch-distributed", "--nodes", "2", "--gpus-per-node", "8",
		"--", "torchrun", "train.py")
	waitTrainJob(t, ns, "llama", trainer.TrainJobComplete, runTimeout)
	pods, err := jobSetPods(t.Context(), ns, "llama")
	if err != nil {
		t.Fatal(err)
	}
	nodes := podsOf(pods, "node")
	if len(nodes) != 2 {
		t.Fatalf("%d trainer pods, want 2", len(nodes))
	}
	admitted := corev1.Toleration{Key: string(cluster.GPUResource), Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	if nodes[0].Spec.NodeName == nodes[1].Spec.NodeName {
		t.Errorf("both trainer pods ran on %s, want two GPU nodes", nodes[0].Spec.NodeName)
	}
	for _, p := range nodes {
		if p.Status.Phase != corev1.PodSucceeded || !isGPUNode(p.Spec.NodeName) {
			t.Errorf("pod %s is %s on %q, want Succeeded on a GPU node", p.Name, p.Status.Phase, p.Spec.NodeName)
		}
		if gpus := container(t, &p, "node").Resources.Requests[cluster.GPUResource]; gpus.Value() != 8 {
			t.Errorf("pod %s requests %s nvidia.com/gpu, want 8", p.Name, gpus.String())
		}
		if !slices.Contains(p.Spec.Tolerations, admitted) {
			t.Errorf("pod %s tolerations %+v lack %+v, which ExtendedResourceToleration adds", p.Name, p.Spec.Tolerations, admitted)
		}
	}
}

// TestCPUTrainJobStaysOffGPUNodes: a CPU TrainJob never lands on a GPU node, even when its pods must wait for
// the CPU nodes while the GPU nodes have room: four pods of 20 CPUs, one at a time on each CPU node (32 CPUs),
// where a GPU node (96 CPUs) would hold four.
func TestCPUTrainJobStaysOffGPUNodes(t *testing.T) {
	t.Parallel()
	ns := cluster.NewNamespace(t, suite.client, "e2e-", diagnose)
	mustKubectlTrainJob(t, "create", "cpu-only", "-n", ns, "--runtime", "torch-distributed", "--nodes", "4",
		"--resources-per-node", "cpu=20", "--", "torchrun", "train.py")
	waitTrainJob(t, ns, "cpu-only", trainer.TrainJobComplete, runTimeout)
	pods, err := jobSetPods(t.Context(), ns, "cpu-only")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(podsOf(pods, "node")); n != 4 {
		t.Errorf("%d trainer pods, want 4", n)
	}
	for _, p := range pods {
		if p.Spec.NodeName == "" || isGPUNode(p.Spec.NodeName) {
			t.Errorf("pod %s ran on %q, want a CPU node", p.Name, p.Spec.NodeName)
		}
		if slices.ContainsFunc(p.Spec.Tolerations, func(tol corev1.Toleration) bool { return tol.Key == cluster.GPUTaintKey }) {
			t.Errorf("pod %s of a CPU TrainJob tolerates the GPU taint: %+v", p.Name, p.Spec.Tolerations)
		}
	}
}

// TestBlockedOnlyByTaint: a pod that only the GPU nodes could hold (64 CPUs; the CPU nodes have 32) and that
// does not tolerate their taint stays Pending, and `kubectl trainjob status` says that the taint alone keeps it
// off them, names the taint, the nodes and the way out.
func TestBlockedOnlyByTaint(t *testing.T) {
	t.Parallel()
	ns := cluster.NewNamespace(t, suite.client, "e2e-", diagnose)
	nodes, err := readNodes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var tainted []string
	for _, n := range nodes {
		if slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == cluster.GPUTaintKey }) {
			tainted = append(tainted, n.Name)
		}
	}
	slices.Sort(tainted)
	mustKubectlTrainJob(t, "create", "big-cpu", "-n", ns, "--runtime", "torch-distributed", "--nodes", "1",
		"--resources-per-node", "cpu=64", "--", "torchrun", "train.py")

	var s *statusSummary
	cluster.Eventually(t, "status -o json says a taint blocks the pod", runTimeout, func(ctx context.Context) error {
		var err error
		if s, err = status(ctx, ns, "big-cpu"); err != nil {
			return err
		}
		if s.BlockedByTaint == nil {
			return fmt.Errorf("stage %s (%s), no blockedByTaint", s.Stage, s.Reason)
		}
		return nil
	})
	b := s.BlockedByTaint
	want := fmt.Sprintf("1 pod unschedulable only because it does not tolerate the taint nvidia.com/gpu=present:NoSchedule of %d nodes", len(tainted))
	switch {
	case s.Stage != "Pending" || !strings.HasPrefix(s.Reason, want):
		t.Errorf("stage %s (%s), want Pending: %s…", s.Stage, s.Reason, want)
	case b.Pods != 1 || !slices.Equal(b.Taints, []string{"nvidia.com/gpu=present:NoSchedule"}) || !slices.Equal(b.Nodes, tainted):
		t.Errorf("blockedByTaint %+v, want 1 pod, the GPU taint, nodes %v", b, tainted)
	case len(b.ExtendedResources) != 0:
		t.Errorf("blockedByTaint names extended resources %v, but the pod requests none", b.ExtendedResources)
	case !strings.Contains(b.WayOut, "add a toleration of nvidia.com/gpu to the runtime ClusterTrainingRuntime/torch-distributed"):
		t.Errorf("way out %q does not say to add a toleration to the runtime", b.WayOut)
	}

	screen := mustKubectlTrainJob(t, "status", "-n", ns, "big-cpu")
	for _, line := range []string{"Stage:       Pending: " + s.Reason, "Hint:        " + b.WayOut} {
		if !strings.Contains(screen, line+"\n") {
			t.Errorf("kubectl trainjob status lacks the line %q:\n%s", line, screen)
		}
	}
	pods, err := jobSetPods(t.Context(), ns, "big-cpu")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if p.Spec.NodeName != "" {
			t.Errorf("pod %s is on node %s, want none", p.Name, p.Spec.NodeName)
		}
	}
}

func isGPUNode(name string) bool { return strings.HasPrefix(name, "gpu-node-") }
