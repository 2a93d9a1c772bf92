package apply

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/scheme"
)

func TestCreator(t *testing.T) {
	type request struct {
		method, path, fieldManager, contentType string
		body                                    jobsetv1alpha2.JobSet
	}
	var got []request
	status := http.StatusCreated
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req := request{method: r.Method, path: r.URL.Path, fieldManager: r.URL.Query().Get("fieldManager"), contentType: r.Header.Get("Content-Type")}
		data, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(data, &req.body); err != nil {
			t.Errorf("request body %q: %v", data, err)
		}
		got = append(got, req)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		if status == http.StatusConflict {
			_ = json.NewEncoder(w).Encode(apierrors.NewAlreadyExists(schema.GroupResource{Group: "jobset.x-k8s.io", Resource: "jobsets"}, "alpha").Status())
			return
		}
		stored := req.body.DeepCopy()
		stored.UID, stored.ResourceVersion = "uid-from-the-server", "7"
		_ = json.NewEncoder(w).Encode(stored)
	}))
	defer srv.Close()

	s := scheme.New()
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(jobsetv1alpha2.SchemeGroupVersion.WithKind("JobSet"), meta.RESTScopeNamespace)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("ConfigMap"), meta.RESTScopeNamespace)
	c := fake.NewClientBuilder().WithScheme(s).WithRESTMapper(mapper).Build()
	cr := newCreator(c, &rest.Config{Host: srv.URL}, srv.Client(), s)
	built, gvk, err := pipeline.AsApplied(s, &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "alpha", Namespace: "ns"}}, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	hash := built.GetAnnotations()[pipeline.AppliedHashAnnotation]
	if err := cr.create(t.Context(), built, gvk); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("%d requests, want 1: %+v", len(got), got)
	}
	r := got[0]
	if r.method != http.MethodPost || r.path != "/apis/jobset.x-k8s.io/v1alpha2/namespaces/ns/jobsets" || r.fieldManager != FieldManager ||
		r.contentType != "application/json" || r.body.Name != "alpha" || r.body.Annotations[pipeline.AppliedHashAnnotation] != hash || r.body.Kind != "JobSet" {
		t.Errorf("request %s %s?fieldManager=%s (%s), body %s/%s annotations %v; want a POST of the JobSet with its hash, as %s",
			r.method, r.path, r.fieldManager, r.contentType, r.body.Kind, r.body.Name, r.body.Annotations, FieldManager)
	}
	if built.GetUID() != "" {
		t.Errorf("the answer was decoded into the object (uid %q): the object is what was sent", built.GetUID())
	}

	status = http.StatusConflict
	if err := cr.create(t.Context(), built, gvk); !apierrors.IsAlreadyExists(err) {
		t.Errorf("a 409 gave %v, want an AlreadyExists error", err)
	}

	// A Kubernetes kind goes through the client (here the fake), not to the server.
	cm, cmGVK, err := pipeline.AsApplied(s, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "alpha-mpi-hostfile", Namespace: "ns"}}, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if err := cr.create(t.Context(), cm, cmGVK); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Errorf("the ConfigMap reached the server: %+v", got[2:])
	}
	var stored corev1.ConfigMap
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(cm), &stored); err != nil || stored.Labels[pipeline.TrainJobNameLabel] != "alpha" {
		t.Errorf("the ConfigMap through the client: %v, labels %v", err, stored.Labels)
	}
}
