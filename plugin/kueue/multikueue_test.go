package kueue_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/kueue"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/kueue/kueuetest"
)

// workerKubeconfig is a kubeconfig as MultiKueue's Secrets hold them: a ServiceAccount's token.
const workerKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: worker
  cluster: {server: "https://10.0.0.7:6443", certificate-authority-data: ""}
users:
- name: multikueue-sa
  user: {token: t0ken}
contexts:
- name: worker
  context: {cluster: worker, user: multikueue-sa}
current-context: worker
`

// TestWorker: a worker cluster is reached as MultiKueue reaches it, its MultiKueueCluster (either API
// version's shape) and then its kubeconfig Secret in Kueue's namespace, in two requests asked once; what the
// user may not read, or a worker reached another way, says why instead of failing.
func TestWorker(t *testing.T) {
	secretPath := "/api/v1/namespaces/kueue-system/secrets/worker-1-kubeconfig"
	clusterPath := "/apis/kueue.x-k8s.io/v1beta2/multikueueclusters/worker-1"
	secret := corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: kueue.Namespace, Name: "worker-1-kubeconfig"},
		Data: map[string][]byte{"kubeconfig": []byte(workerKubeconfig)}}
	inSecret := func(spec map[string]any) map[string]any {
		return map[string]any{"metadata": map[string]any{"name": "worker-1"}, "spec": spec}
	}
	v1beta2 := inSecret(map[string]any{"clusterSource": map[string]any{"kubeConfig": map[string]any{"location": "worker-1-kubeconfig", "locationType": "Secret"}}})
	for _, tc := range []struct {
		name        string
		cluster     map[string]any
		forbidden   []string
		host        string // of the worker's client configuration, when reached
		secret      string
		unreachable string
		requests    []string
	}{{
		name: "through its Secret (v1beta2)", cluster: v1beta2, host: "https://10.0.0.7:6443", secret: "kueue-system/worker-1-kubeconfig",
		requests: []string{"GET " + clusterPath, "GET " + secretPath},
	}, {
		name:    "v1beta1's shape, the location type defaulted",
		cluster: inSecret(map[string]any{"kubeConfig": map[string]any{"location": "worker-1-kubeconfig"}}),
		host:    "https://10.0.0.7:6443", secret: "kueue-system/worker-1-kubeconfig",
		requests: []string{"GET " + clusterPath, "GET " + secretPath},
	}, {
		name: "the Secret forbidden", cluster: v1beta2, forbidden: []string{secretPath}, secret: "kueue-system/worker-1-kubeconfig",
		unreachable: "you may not read its kubeconfig Secret kueue-system/worker-1-kubeconfig",
		requests:    []string{"GET " + clusterPath, "GET " + secretPath},
	}, {
		name: "the MultiKueueCluster forbidden", cluster: v1beta2, forbidden: []string{clusterPath},
		unreachable: "you may not read MultiKueueCluster worker-1",
		requests:    []string{"GET " + clusterPath},
	}, {
		name:        "no such MultiKueueCluster",
		unreachable: "MultiKueueCluster worker-1 is not there",
		requests:    []string{"GET " + clusterPath},
	}, {
		name:        "a kubeconfig on Kueue's disk",
		cluster:     inSecret(map[string]any{"clusterSource": map[string]any{"kubeConfig": map[string]any{"location": "/etc/worker", "locationType": "Path"}}}),
		unreachable: "MultiKueueCluster worker-1 reads its kubeconfig from /etc/worker on Kueue's own disk",
		requests:    []string{"GET " + clusterPath},
	}, {
		name:        "a ClusterProfile",
		cluster:     inSecret(map[string]any{"clusterSource": map[string]any{"clusterProfileRef": map[string]any{"name": "worker-1"}}}),
		unreachable: "MultiKueueCluster worker-1 reaches it through a ClusterProfile, with Kueue's own credentials",
		requests:    []string{"GET " + clusterPath},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			api := &kueuetest.API{Versions: []string{"v1beta2", "v1beta1"}, Secrets: []corev1.Secret{secret}, Forbidden: tc.forbidden}
			if tc.cluster != nil {
				api.MultiKueueClusters = map[string]any{"worker-1": tc.cluster}
			}
			c := api.Client()
			if _, err := c.Served(context.Background()); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				w, err := c.Worker(context.Background(), "worker-1")
				if err != nil {
					t.Fatal(err)
				}
				host := ""
				if w.Config != nil {
					host = w.Config.Host
					if w.Config.BearerToken != "t0ken" {
						t.Errorf("the worker's credentials are not the Secret's: token %q", w.Config.BearerToken)
					}
				}
				if w.Cluster != "worker-1" || host != tc.host || w.Secret != tc.secret || w.Unreachable != tc.unreachable {
					t.Errorf("Worker = {Cluster %q, host %q, Secret %q, Unreachable %q}, want {worker-1, %q, %q, %q}",
						w.Cluster, host, w.Secret, w.Unreachable, tc.host, tc.secret, tc.unreachable)
				}
			}
			got := api.Requests()[1:] // after the discovery
			if diff := cmp.Diff(tc.requests, got); diff != "" {
				t.Errorf("requests, asked twice (-want +got):\n%s", diff)
			}
		})
	}
}

// TestWorkerOf: a dispatched TrainJob's worker is the one its Workload names; none before MultiKueue chooses.
func TestWorkerOf(t *testing.T) {
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "llama", UID: "uid-llama"},
		Spec: trainer.TrainJobSpec{ManagedBy: ptr.To(trainer.MultiKueueController)}}
	if !kueue.Dispatched(tj) {
		t.Errorf("a TrainJob with spec.managedBy %s is not Dispatched", trainer.MultiKueueController)
	}
	if kueue.Dispatched(&trainer.TrainJob{Spec: trainer.TrainJobSpec{ManagedBy: ptr.To(trainer.TrainJobControllerManager)}}) {
		t.Errorf("a TrainJob of the Trainer controller is Dispatched")
	}
	wl := kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "trainjob-llama-1a2b3",
		OwnerReferences: []metav1.OwnerReference{{Kind: trainer.TrainJobKind, Name: "llama", UID: "uid-llama", Controller: ptr.To(true)}}}}
	for _, tc := range []struct {
		name    string
		cluster *string
		want    string
	}{{"not dispatched yet", nil, ""}, {"dispatched", ptr.To("worker-1"), "worker-1"}} {
		t.Run(tc.name, func(t *testing.T) {
			wl.Status.ClusterName = tc.cluster
			api := &kueuetest.API{Versions: []string{"v1beta2"}, Workloads: []kueue.Workload{wl}}
			w, got, err := api.Client().WorkerOf(context.Background(), tj)
			if err != nil {
				t.Fatal(err)
			}
			name := ""
			if w != nil {
				name = w.Cluster
			}
			if got == nil || got.Name != wl.Name || name != tc.want {
				t.Errorf("WorkerOf = %q, Workload %v; want %q, %s", name, got, tc.want, wl.Name)
			}
		})
	}
}
