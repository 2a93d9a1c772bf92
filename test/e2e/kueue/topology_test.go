package kueue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/stage"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/golden"
)

// TestTopology: on 8 GPU nodes in 4 racks of 2, a blocker holds one node of every rack (4 × 8 GPUs, pinned to
// the odd nodes). A TrainJob of 2 × 8 GPUs created with `create --topology rack` fits the free GPUs (32) and
// the TAS ClusterQueue's quota, but no rack: it waits, suspended, and `status` says why in Kueue's words.
// Once the blocker is deleted, Kueue admits it into one rack: its two pods run on the two nodes of one rack,
// and `status` shows the rack and the nodes Kueue assigned. `fit` says, while it waits, that no rack takes
// both pods now and every rack would emptied of other pods.
func TestTopology(t *testing.T) {
	ns := queueNamespace(t)
	nodesIdle(t)

	blocker := gpuTrainJob(ns, "blocker", "")
	blocker.Labels[queueLabel] = cluster.KueueTASLocalQueue
	blocker.Spec.Trainer.NumNodes = ptr.To[int32](4)
	var odd []string
	for i := 1; i < 8; i += 2 {
		odd = append(odd, cluster.GPUNodeName(i))
	}
	blocker.Spec.RuntimePatches = []trainer.RuntimePatch{{
		Manager: "e2e.kubectl-trainjob.trainer.kubeflow.org/blocker",
		TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{Template: &trainer.JobSetTemplatePatch{Spec: &trainer.JobSetSpecPatch{
			ReplicatedJobs: []trainer.ReplicatedJobPatch{{Name: trainer.Node, Template: &trainer.JobTemplatePatch{Spec: &trainer.JobSpecPatch{
				Template: &trainer.PodTemplatePatch{
					Metadata: &metav1.ObjectMeta{Annotations: map[string]string{"kueue.x-k8s.io/podset-unconstrained-topology": "true"}},
					Spec: &trainer.PodSpecPatch{Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
						RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
							MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: odd}},
						}}},
					}}},
				},
			}}}},
		}}},
	}}
	t.Run("the blocker holds a node of every rack", func(t *testing.T) {
		create(t, blocker)
		waitRunning(t, blocker)
		racks := podRacks(t, blocker)
		if want := []string{"rack-0", "rack-1", "rack-2", "rack-3"}; !slices.Equal(racks, want) {
			t.Fatalf("the blocker's pods are in racks %v, want one in each of %v", racks, want)
		}
	})

	placed := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "placed"}}
	t.Run("one rack's worth asked for one rack waits", func(t *testing.T) {
		out := inProcess(t, ns, metav1.Now().Time, "create", placed.Name, "--runtime", "torch-distributed", "--nodes", "2", "--gpus-per-node", "8",
			"--queue", cluster.KueueTASLocalQueue, "--topology", "rack", "--env", "SIM_RUN_SECONDS=3600")
		assertGolden(t, "topology-create", normalize(ns, out))
		var msg string
		cluster.Eventually(t, "the Workload asking for one rack and not admitted for want of one", waitTimeout, func(ctx context.Context) error {
			wl, err := workloadOf(ctx, placed)
			if err != nil {
				return err
			}
			sets, _, _ := unstructured.NestedSlice(wl.Object, "spec", "podSets")
			var required []string
			for _, s := range sets {
				r, _, _ := unstructured.NestedString(s.(map[string]any), "topologyRequest", "required")
				required = append(required, r)
			}
			if !slices.Contains(required, cluster.TopologyRackLabel) {
				return fmt.Errorf("the pod sets' required topology levels are %q, want %s among them", required, cluster.TopologyRackLabel)
			}
			c := condition(wl, "QuotaReserved")
			msg, _ = c["message"].(string)
			if c["status"] != "False" || !strings.Contains(msg, "topology") {
				return fmt.Errorf("QuotaReserved %v", c)
			}
			return nil
		})
		t.Logf("why it waits: %s", msg)
		if n := len(pods(t, placed)); n != 0 {
			t.Errorf("the waiting TrainJob has %d pods", n)
		}
		now := get(t, placed).CreationTimestamp.Add(sinceCreation)
		assertGolden(t, "topology-queued-status", normalize(ns, golden.ScreenHead(inProcess(t, ns, now, "status", placed.Name))))
		assertGolden(t, "topology-queued-fit", normalize(ns, inProcess(t, ns, now, "fit", placed.Name)))
	})

	t.Run("when a rack frees it runs inside it", func(t *testing.T) {
		if err := suite.client.Delete(t.Context(), blocker, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
			t.Fatal(err)
		}
		waitRunning(t, get(t, placed))
		waitStage(t, placed, stage.Training)
		racks := podRacks(t, placed)
		if len(racks) != 1 {
			t.Fatalf("the pods run in racks %v, want one rack", racks)
		}
		// Which rack Kueue picks among the free ones is its business: the golden names it <rack>, its nodes <node>.
		now := get(t, placed).CreationTimestamp.Add(sinceCreation)
		out := normalize(ns, golden.ScreenHead(inProcess(t, ns, now, "status", placed.Name)))
		out = strings.ReplaceAll(out, racks[0], "<rack>")
		for _, p := range pods(t, placed) {
			out = strings.ReplaceAll(out, p.Spec.NodeName, "<node>")
		}
		assertGolden(t, "topology-placed-status", out)
	})
}

// podRacks are the racks of the nodes tj's pods run on, sorted, each once.
func podRacks(t *testing.T, tj *trainer.TrainJob) []string {
	t.Helper()
	var racks []string
	for _, p := range pods(t, tj) {
		node := &corev1.Node{}
		if err := suite.client.Get(t.Context(), client.ObjectKey{Name: p.Spec.NodeName}, node); err != nil {
			t.Fatalf("pod %s on node %q: %v", p.Name, p.Spec.NodeName, err)
		}
		if r := node.Labels[cluster.TopologyRackLabel]; !slices.Contains(racks, r) {
			racks = append(racks, r)
		}
	}
	slices.Sort(racks)
	return racks
}

// nodesIdle waits until no pod of an earlier test is left on the GPU nodes: TAS counts such pods as usage and
// does not look again when they go.
func nodesIdle(t *testing.T) {
	t.Helper()
	cluster.Eventually(t, "no pod left on the GPU nodes", waitTimeout, func(ctx context.Context) error {
		var list corev1.PodList
		if err := suite.client.List(ctx, &list, client.HasLabels{jobsetv1alpha2.JobSetNameKey}); err != nil {
			return err
		}
		var left []string
		for _, p := range list.Items {
			if strings.HasPrefix(p.Spec.NodeName, "gpu-node-") {
				left = append(left, p.Namespace+"/"+p.Name)
			}
		}
		if len(left) > 0 {
			return errors.New("pods left: " + strings.Join(left, ", "))
		}
		return nil
	})
}
