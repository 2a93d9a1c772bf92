package kueue_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/kueue"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/kueue/kueuetest"
)

// TestClient: the Client asks once which version of Kueue's API is served and reads that one; Kueue not
// installed is no error, and then nothing more is asked.
func TestClient(t *testing.T) {
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "llama", UID: "uid-llama"}}
	wl := kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "trainjob-llama-1a2b3",
		OwnerReferences: []metav1.OwnerReference{{Kind: trainer.TrainJobKind, Name: "llama", UID: "uid-llama", Controller: ptr.To(true)}}}}
	for _, tc := range []struct {
		name     string
		versions []string
		workload string
		requests []string
	}{
		{name: "Kueue v0.15 and later: v1beta2", versions: []string{"v1beta2", "v1beta1"}, workload: wl.Name,
			requests: []string{"GET /apis/kueue.x-k8s.io", "GET /apis/kueue.x-k8s.io/v1beta2/namespaces/team/workloads",
				"GET /apis/kueue.x-k8s.io/v1beta2/namespaces/team/workloads"}},
		{name: "an older Kueue: v1beta1", versions: []string{"v1beta1"}, workload: wl.Name,
			requests: []string{"GET /apis/kueue.x-k8s.io", "GET /apis/kueue.x-k8s.io/v1beta1/namespaces/team/workloads",
				"GET /apis/kueue.x-k8s.io/v1beta1/namespaces/team/workloads"}},
		{name: "a future Kueue that prefers a version not known here", versions: []string{"v1", "v1beta2"}, workload: wl.Name,
			requests: []string{"GET /apis/kueue.x-k8s.io", "GET /apis/kueue.x-k8s.io/v1beta2/namespaces/team/workloads",
				"GET /apis/kueue.x-k8s.io/v1beta2/namespaces/team/workloads"}},
		{name: "Kueue not installed", requests: []string{"GET /apis/kueue.x-k8s.io"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := &kueuetest.API{Versions: tc.versions, Workloads: []kueue.Workload{wl}}
			c := api.Client()
			for range 2 {
				got, err := c.WorkloadOf(context.Background(), tj)
				if err != nil {
					t.Fatal(err)
				}
				name := ""
				if got != nil {
					name = got.Name
				}
				if name != tc.workload {
					t.Errorf("WorkloadOf = %q, want %q", name, tc.workload)
				}
			}
			if diff := cmp.Diff(tc.requests, api.Requests()); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
		})
	}
}
