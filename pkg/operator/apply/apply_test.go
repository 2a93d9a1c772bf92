package apply

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/scheme"
)

// applyForm is obj as server-side apply sends it.
func applyForm(s *runtime.Scheme, obj client.Object, trainJobName string) (*unstructured.Unstructured, error) {
	built, gvk, err := pipeline.AsApplied(s, obj, trainJobName)
	if err != nil {
		return nil, err
	}
	return toApply(built, gvk)
}

// TestOmitsAny: content leaves out a managed field when a map field, a list
// item by key, by value or by index, or anything below one, is missing.
func TestOmitsAny(t *testing.T) {
	content := map[string]any{
		"metadata": map[string]any{"labels": map[string]any{"a": "1"}},
		"spec": map[string]any{
			"replicatedJobs": []any{map[string]any{"name": "node", "replicas": int64(2)}},
			"finalizers":     []any{"x"},
			"args":           []any{"--a"},
		},
	}
	u := &unstructured.Unstructured{Object: content}
	for _, tc := range []struct {
		fields string
		want   bool
	}{
		{`{"f:metadata":{"f:labels":{".":{},"f:a":{}}}}`, false},
		{`{"f:metadata":{"f:labels":{"f:b":{}}}}`, true},
		{`{"f:spec":{"f:replicatedJobs":{"k:{\"name\":\"node\"}":{".":{},"f:replicas":{}}}}}`, false},
		{`{"f:spec":{"f:replicatedJobs":{"k:{\"name\":\"node\"}":{"f:parallelism":{}}}}}`, true},
		{`{"f:spec":{"f:replicatedJobs":{"k:{\"name\":\"launcher\"}":{}}}}`, true},
		{`{"f:spec":{"f:finalizers":{"v:\"x\"":{}}}}`, false},
		{`{"f:spec":{"f:finalizers":{"v:\"y\"":{}}}}`, true},
		{`{"f:spec":{"f:args":{"i:0":{}}}}`, false},
		{`{"f:spec":{"f:args":{"i:1":{}}}}`, true},
		{`{"f:status":{}}`, true},
	} {
		got, err := omitsAny(u, &metav1.FieldsV1{Raw: []byte(tc.fields)})
		if err != nil || got != tc.want {
			t.Errorf("omitsAny(%s) = %v, %v; want %v", tc.fields, got, err, tc.want)
		}
	}
	if _, err := omitsAny(u, &metav1.FieldsV1{Raw: []byte(`{"x":`)}); err == nil {
		t.Error("omitsAny of broken managed fields: no error")
	}
}

func TestApplyObject(t *testing.T) {
	s := scheme.New()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "alpha-mpi-hostfile", Namespace: "ns", Labels: map[string]string{"a": "b"}}}
	u, err := applyForm(s, cm, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "alpha-mpi-hostfile", "namespace": "ns",
			"labels":      map[string]any{"a": "b", pipeline.TrainJobNameLabel: "alpha"},
			"annotations": map[string]any{pipeline.AppliedHashAnnotation: u.GetAnnotations()[pipeline.AppliedHashAnnotation]}},
	}
	if diff := cmp.Diff(want, u.Object); diff != "" {
		t.Errorf("ConfigMap (-want +got):\n%s", diff)
	}
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "alpha", Namespace: "ns"}}
	u, err = applyForm(s, js, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := u.Object["status"]; ok || u.GetLabels() != nil || u.GetAnnotations()[pipeline.AppliedHashAnnotation] == "" || u.GetKind() != "JobSet" || u.GetAPIVersion() != "jobset.x-k8s.io/v1alpha2" {
		t.Errorf("JobSet: %v; want apiVersion and kind, no status, no label, the hash", u.Object)
	}
}
