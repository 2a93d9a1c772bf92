package e2e

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/stack"
)

// trainingNode is the node that example 02's nodeSelector (node-type: training) selects.
var trainingNode = cluster.CPUNodeName(1)

// TestReferenceExamples: the TrainJobs of the reference examples (checked-in copies in
// plugin/render/testdata/examples, 05 in its fixed form) applied as they are, as their comments say
// (`kubectl apply -f`), run to Complete; the cluster gets what they assume exists.
func TestReferenceExamples(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		file, trainJob string
		// prepare gives the namespace and cluster what the example assumes.
		prepare func(t *testing.T, ns string)
		check   func(t *testing.T, ns string, pods []corev1.Pod)
	}{
		{file: "trainjob-01-multi-node.yaml", trainJob: "multi-node-example",
			check: func(t *testing.T, _ string, pods []corev1.Pod) {
				if n := len(podsOf(pods, "node")); n != 3 {
					t.Errorf("%d trainer pods, want 3", n)
				}
			}},
		{file: "trainjob-02-runtime-patches.yaml", trainJob: "runtime-patches-example",
			// Its pods run as ServiceAccount training-sa on nodes labelled node-type=training.
			prepare: func(t *testing.T, ns string) {
				sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "training-sa"}}
				if err := suite.client.Create(t.Context(), sa); err != nil {
					t.Fatal(err)
				}
				labelNode(t, trainingNode, "node-type", "training")
			},
			check: func(t *testing.T, ns string, pods []corev1.Pod) {
				nodes := podsOf(pods, "node")
				if len(nodes) != 2 {
					t.Errorf("%d trainer pods, want 2", len(nodes))
				}
				for _, p := range nodes {
					if p.Spec.NodeName != trainingNode || p.Spec.ServiceAccountName != "training-sa" {
						t.Errorf("pod %s: node %s, serviceAccount %s; want %s, training-sa", p.Name, p.Spec.NodeName, p.Spec.ServiceAccountName, trainingNode)
					}
				}
				// The patch's template metadata is the JobSet's.
				var js jobsetv1alpha2.JobSet
				if err := suite.client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "runtime-patches-example"}, &js); err != nil {
					t.Fatal(err)
				}
				if js.Labels["team"] != "ml-platform" || js.Annotations["prometheus.io/scrape"] != "true" {
					t.Errorf("JobSet labels %v, annotations %v; want team=ml-platform, prometheus.io/scrape=true", js.Labels, js.Annotations)
				}
			}},
		{file: "trainjob-05-multi-step-fixed.yaml", trainJob: "multi-step-fixed",
			check: func(t *testing.T, ns string, pods []corev1.Pod) {
				var pvc corev1.PersistentVolumeClaim
				if err := suite.client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "initializer-multi-step-fixed"}, &pvc); err != nil {
					t.Fatal(err)
				}
				if pvc.Status.Phase != corev1.ClaimBound {
					t.Errorf("PVC %s is %s, want Bound", pvc.Name, pvc.Status.Phase)
				}
				init := podsOf(pods, trainer.DatasetInitializerName)
				if len(init) != 1 {
					t.Fatalf("%d dataset-initializer pods, want 1", len(init))
				}
				uri := ""
				for _, e := range container(t, &init[0], trainer.DatasetInitializerName).Env {
					if e.Name == "STORAGE_URI" {
						uri = e.Value
					}
				}
				if uri != "hf://tatsu-lab/alpaca" {
					t.Errorf("dataset-initializer STORAGE_URI %q, want hf://tatsu-lab/alpaca", uri)
				}
			}},
	} {
		t.Run(strings.TrimSuffix(tc.file, ".yaml"), func(t *testing.T) {
			t.Parallel()
			ns := cluster.NewNamespace(t, suite.client, "e2e-", diagnose)
			if tc.prepare != nil {
				tc.prepare(t, ns)
			}
			apply(t, ns, example(tc.file))
			waitTrainJob(t, ns, tc.trainJob, trainer.TrainJobComplete, runTimeout)
			storedAsRendered(t, ns, tc.file, tc.trainJob)
			pods, err := jobSetPods(t.Context(), ns, tc.trainJob)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range pods {
				if p.Status.Phase != corev1.PodSucceeded {
					t.Errorf("pod %s is %s, want Succeeded", p.Name, p.Status.Phase)
				}
			}
			tc.check(t, ns, pods)
		})
	}

	// Upstream's own 05, as shipped: its dataset-initializer does not mount the initializer volume, and the
	// TrainJob webhook refuses it as upstream's does.
	t.Run("trainjob-05-multi-step-refused", func(t *testing.T) {
		t.Parallel()
		ns := cluster.NewNamespace(t, suite.client, "e2e-", diagnose)
		err := stack.ApplyFile(t.Context(), suite.client, example("trainjob-05-multi-step.yaml"), ns)
		const want = "must have volumeMount with name - initializer"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("apply: %v; want an error saying %q", err, want)
		}
		var tj trainer.TrainJob
		if err := suite.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "multi-step-example"}, &tj); err == nil {
			t.Errorf("the refused TrainJob exists")
		}
	})
}

// storedAsRendered checks that the JobSet of the TrainJob named name, which the file made in ns, is stored as
// `kubectl trainjob render` shows it: the operator creates it with JobSet's defaults set, so neither JobSet's
// defaulting webhook nor the API server's schema defaults change its spec.
func storedAsRendered(t *testing.T, ns, file, name string) {
	t.Helper()
	runtimes, err := filepath.Glob(filepath.Join(suite.repo, "config", "runtimes", "*_*.yaml"))
	if err != nil || len(runtimes) == 0 {
		t.Fatalf("the shipped runtimes: %v, %v", runtimes, err)
	}
	out := mustKubectlTrainJob(t, "render", "-n", ns, "-f", example(file), "--runtime", strings.Join(runtimes, ","), "-o", "json")
	var list struct {
		Items []jobsetv1alpha2.JobSet `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("render -o json: %v\n%s", err, out)
	}
	var rendered *jobsetv1alpha2.JobSet
	for i, obj := range list.Items {
		if obj.Kind == "JobSet" && obj.Name == name {
			rendered = &list.Items[i]
		}
	}
	if rendered == nil {
		t.Fatalf("render shows no JobSet %s:\n%s", name, out)
	}
	var stored jobsetv1alpha2.JobSet
	if err := suite.client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, &stored); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(rendered.Spec, stored.Spec); diff != "" {
		t.Errorf("the JobSet %s as stored differs from the one render shows (-rendered +stored):\n%s", name, diff)
	}
}
