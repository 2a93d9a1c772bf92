package dashboard

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/kueue"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/kueue/kueuetest"
)

// post is a write from the dashboard's own page: with the cookie, its Origin and body as JSON.
func post(t *testing.T, s *Server, target, body string) (int, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, target, strings.NewReader(body))
	req.Host = testHost
	req.AddCookie(&http.Cookie{Name: cookieName, Value: testToken})
	req.Header.Set("Origin", "http://"+testHost)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

// TestActions: with --allow-writes the page deletes a TrainJob after listing what goes with it as `delete`
// lists it, and reruns one with --set changes as `rerun` does; without it the listing, the delete and the
// rerun are refused (403) and nothing changes.
func TestActions(t *testing.T) {
	api := &kueuetest.API{Versions: []string{"v1beta2"}, LocalQueues: []kueue.LocalQueue{gpuQueue()}}
	objs := builtTrainJob(t, api)
	// What `kubectl trainjob create` wrote: rerun copies it.
	objs[0].SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kubectl-trainjob", Operation: metav1.ManagedFieldsOperationUpdate,
		APIVersion: trainer.GroupVersion.String(), FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(
			`{"f:metadata":{"f:labels":{".":{},"f:kueue.x-k8s.io/queue-name":{}}},"f:spec":{".":{},"f:runtimeRef":{".":{},"f:name":{},"f:kind":{}},"f:suspend":{}}}`)}}})
	s := clusterServer(t, api, objs...)
	exists := func(name string) *trainer.TrainJob {
		t.Helper()
		tj := &trainer.TrainJob{}
		if err := s.Client.Get(context.Background(), client.ObjectKey{Namespace: "team-a", Name: name}, tj); err != nil {
			return nil
		}
		return tj
	}

	t.Run("read-only", func(t *testing.T) {
		if resp := serve(t, s, request{method: "GET", target: "/api/trainjobs/team-a/llama/delete", cookie: true}); resp.StatusCode != http.StatusForbidden {
			t.Errorf("GET the delete's listing of a read-only dashboard: %d %s, want 403", resp.StatusCode, body(t, resp))
		}
		for _, target := range []string{"/api/trainjobs/team-a/llama/delete?uid=uid-llama", "/api/trainjobs/team-a/llama/rerun"} {
			if code, got := post(t, s, target, `{}`); code != http.StatusForbidden {
				t.Errorf("POST %s to a read-only dashboard: %d %s, want 403", target, code, got)
			}
		}
		if exists("llama") == nil || exists("llama-rerun-1") != nil {
			t.Error("the read-only dashboard deleted llama or reran it")
		}
	})

	s.AllowWrites = true
	t.Run("rerun", func(t *testing.T) {
		code, got := post(t, s, "/api/trainjobs/team-a/llama/rerun", `{"set":["nodes=3","env=EPOCHS=10"]}`)
		var a Action
		if err := json.Unmarshal([]byte(got), &a); code != http.StatusOK || err != nil || a.Name != "llama-rerun-1" ||
			!strings.Contains(a.Message, "llama-rerun-1 created") {
			t.Fatalf("POST rerun: %d %s; want llama-rerun-1 created", code, got)
		}
		copied := exists("llama-rerun-1")
		if copied == nil || ptr.Deref(copied.Spec.Trainer.NumNodes, 0) != 3 || copied.Annotations["trainer.kubeflow.org/rerun-of"] != "llama" ||
			copied.Labels[kueue.QueueLabel] != "gpu" {
			t.Errorf("the rerun: %+v; want 3 nodes, a rerun of llama in LocalQueue gpu", copied)
		}
		if code, got := post(t, s, "/api/trainjobs/team-a/llama/rerun", `{"set":["gpus=8"]}`); code != http.StatusUnprocessableEntity ||
			!strings.Contains(got, `invalid --set \"gpus=8\": gpus is not a flag create takes`) {
			t.Errorf("POST rerun --set gpus=8: %d %s; want 422 with rerun's message", code, got)
		}
	})

	t.Run("delete", func(t *testing.T) {
		var l DeleteListing
		resp := serve(t, s, request{method: "GET", target: "/api/trainjobs/team-a/llama/delete", cookie: true})
		got := body(t, resp)
		if err := json.Unmarshal([]byte(got), &l); resp.StatusCode != http.StatusOK || err != nil || l.UID != "uid-llama" ||
			!strings.Contains(l.Listing, `These TrainJobs in namespace "team-a" will be deleted with what they own (--cascade=background):`) ||
			!strings.Contains(l.Listing, "trainjob/llama (Pending): jobset/llama, 1 job, configmap/llama-runtime-snapshot") {
			t.Fatalf("GET the delete's listing: %d %s; want llama's JobSet, Job and runtime snapshot, as delete lists them", resp.StatusCode, got)
		}
		if code, got := post(t, s, "/api/trainjobs/team-a/llama/delete", ``); code != http.StatusBadRequest || exists("llama") == nil {
			t.Errorf("POST delete without the uid listed: %d %s; want 400 and llama kept", code, got)
		}
		code, got := post(t, s, "/api/trainjobs/team-a/llama/delete?uid="+string(l.UID), ``)
		if code != http.StatusOK || !strings.Contains(got, `trainjobs.trainer.kubeflow.org \"llama\" deleted`) || exists("llama") != nil {
			t.Errorf("POST delete: %d %s; want llama deleted", code, got)
		}
	})
}
