package cluster_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
)

const queueLabel = "kueue.x-k8s.io/queue-name"

// TestKueue is the acceptance test of Kueue in the local cluster: JobSets in a LocalQueue are suspended at
// creation, admitted within the ClusterQueue's GPU quota with the ResourceFlavor's node labels and
// toleration, and kept waiting, with the reason in their Workload, when the quota cannot hold them; Kueue's
// visibility API, served through the API server, lists the waiting one first in its queues.
func TestKueue(t *testing.T) {
	c := cluster.StartForTest(t, cluster.Options{Profile: cluster.ProfileFull, CRDDirs: testCRDDirs(t), Kueue: true})
	s := &suite{c: c, cl: newClient(t, c)}
	ns := s.namespace(t)
	if err := c.CreateLocalQueue(t.Context(), ns); err != nil {
		t.Fatal(err)
	}

	t.Run("a JobSet within the quota is admitted onto the GPU nodes and completes", func(t *testing.T) {
		js := queuedJobSet(ns, "fits", 2)
		if err := s.cl.Create(t.Context(), js); err != nil {
			t.Fatal(err)
		}
		if !ptr.Deref(js.Spec.Suspend, false) {
			t.Errorf("Kueue's webhook did not suspend the JobSet at creation")
		}
		s.waitCompleted(t, js, "JobSet Completed")
		var pods corev1.PodList
		if err := s.cl.List(t.Context(), &pods, client.InNamespace(ns), client.MatchingLabels{"jobset.sigs.k8s.io/jobset-name": js.Name}); err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) != 2 {
			t.Fatalf("%d pods, want 2", len(pods.Items))
		}
		for _, p := range pods.Items {
			if p.Spec.NodeSelector[cluster.GPUPresentLabel] != "true" || !isGPUNode(p.Spec.NodeName) {
				t.Errorf("pod %s: nodeSelector %v, node %s; want the flavor's %s=true on a GPU node", p.Name, p.Spec.NodeSelector, p.Spec.NodeName, cluster.GPUPresentLabel)
			}
		}
		// Kueue sees the JobSet complete after the JobSet controller does.
		cluster.Eventually(t, "the Workload Finished", waitTimeout, cluster.Holds(func(ctx context.Context) (bool, error) {
			wl, err := findWorkload(ctx, s, ns, js.Name)
			if wl == nil || err != nil {
				return false, err
			}
			return condition(wl, "Finished")["status"] == "True", nil
		}))
	})

	t.Run("a JobSet above the quota stays suspended and its Workload says why", func(t *testing.T) {
		js := queuedJobSet(ns, "too-big", 3)
		if err := s.cl.Create(t.Context(), js); err != nil {
			t.Fatal(err)
		}
		cluster.Eventually(t, "the Workload not admitted for lack of nvidia.com/gpu", waitTimeout, cluster.Holds(func(ctx context.Context) (bool, error) {
			wl, err := findWorkload(ctx, s, ns, js.Name)
			if wl == nil || err != nil {
				return false, err
			}
			cond := condition(wl, "QuotaReserved")
			msg, _ := cond["message"].(string)
			return cond["status"] == "False" && strings.Contains(msg, string(cluster.GPUResource)), nil
		}))
		if err := s.cl.Get(t.Context(), client.ObjectKeyFromObject(js), js); err != nil {
			t.Fatal(err)
		}
		if !ptr.Deref(js.Spec.Suspend, false) {
			t.Errorf("the JobSet above the quota is not suspended")
		}
		wl, err := findWorkload(t.Context(), s, ns, js.Name)
		if err != nil || wl == nil {
			t.Fatalf("the Workload of %s: %v", js.Name, err)
		}
		p := "/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/" + ns + "/localqueues/" + cluster.KueueLocalQueue + "/pendingworkloads"
		raw, err := c.Clientset().CoreV1().RESTClient().Get().AbsPath(p).DoRaw(t.Context())
		if err != nil {
			t.Fatalf("GET %s: %v", p, err)
		}
		var pending struct {
			Items []struct {
				Metadata               metav1.ObjectMeta `json:"metadata"`
				PositionInClusterQueue int32             `json:"positionInClusterQueue"`
				PositionInLocalQueue   int32             `json:"positionInLocalQueue"`
			} `json:"items"`
		}
		if err := json.Unmarshal(raw, &pending); err != nil {
			t.Fatalf("GET %s: %v: %s", p, err, raw)
		}
		if len(pending.Items) != 1 || pending.Items[0].Metadata.Name != wl.GetName() ||
			pending.Items[0].PositionInClusterQueue != 0 || pending.Items[0].PositionInLocalQueue != 0 {
			t.Errorf("GET %s: %s; want %s alone, at position 0 in both queues", p, raw, wl.GetName())
		}
	})
}

// queuedJobSet is a JobSet in the cluster's LocalQueue of replicas pods, each asking for a whole GPU node, with
// neither node selector nor toleration: those come from the ResourceFlavor.
func queuedJobSet(ns, name string, replicas int32) *jobsetv1alpha2.JobSet {
	gpus := corev1.ResourceList{cluster.GPUResource: resource.MustParse("8")}
	return &jobsetv1alpha2.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{queueLabel: cluster.KueueLocalQueue}},
		Spec: jobsetv1alpha2.JobSetSpec{ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{
			Name:     "node",
			Replicas: replicas,
			Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
				Parallelism: ptr.To[int32](1),
				Completions: ptr.To[int32](1),
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyOnFailure,
					Containers: []corev1.Container{{
						Name:      "trainer",
						Image:     "pytorch/pytorch",
						Resources: corev1.ResourceRequirements{Requests: gpus, Limits: gpus},
					}},
				}},
			}},
		}}},
	}
}

// findWorkload returns the Workload Kueue made for the JobSet named owner, or nil while there is none.
func findWorkload(ctx context.Context, s *suite, ns, owner string) (*unstructured.Unstructured, error) {
	var list unstructured.UnstructuredList
	list.SetGroupVersionKind(cluster.KueueGroupVersion.WithKind("WorkloadList"))
	if err := s.cl.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	for i := range list.Items {
		for _, ref := range list.Items[i].GetOwnerReferences() {
			if ref.Kind == "JobSet" && ref.Name == owner {
				return &list.Items[i], nil
			}
		}
	}
	return nil, nil
}

// condition returns the status condition of type typ of a Kueue object, or nil.
func condition(u *unstructured.Unstructured, typ string) map[string]any {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			return m
		}
	}
	return nil
}
