package apply

import (
	"maps"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/scheme"
)

// applyForm is obj as server-side apply sends it.
func applyForm(s *runtime.Scheme, obj client.Object, trainJobName string) (*unstructured.Unstructured, error) {
	built, gvk, err := prepared(s, obj, trainJobName)
	if err != nil {
		return nil, err
	}
	return toApply(built, gvk)
}

// hashOf is the hash builtObject gave.
func hashOf(built client.Object, _ schema.GroupVersionKind, err error) (string, error) {
	if err != nil {
		return "", err
	}
	return built.GetAnnotations()[AppliedHashAnnotation], nil
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
			"labels": map[string]any{"a": "b", TrainJobNameLabel: "alpha"}},
	}
	if diff := cmp.Diff(want, u.Object); diff != "" {
		t.Errorf("ConfigMap (-want +got):\n%s", diff)
	}
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "alpha", Namespace: "ns"}}
	u, err = applyForm(s, js, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := u.Object["status"]; ok || u.GetLabels() != nil || u.GetKind() != "JobSet" || u.GetAPIVersion() != "jobset.x-k8s.io/v1alpha2" {
		t.Errorf("JobSet: %v; want apiVersion and kind, no status, no label", u.Object)
	}
}

func TestBuiltObject(t *testing.T) {
	s := scheme.New()
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "alpha", Namespace: "ns", Annotations: map[string]string{"a": "b"}},
		Spec: jobsetv1alpha2.JobSetSpec{Suspend: ptr.To(true)}}
	orig := js.DeepCopy()
	built, gvk, err := builtObject(s, js, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	hash := built.GetAnnotations()[AppliedHashAnnotation]
	if diff := cmp.Diff(orig, js); diff != "" {
		t.Errorf("builtObject changed the object the Build phase returned (-before +after):\n%s", diff)
	}
	if gvk.Kind != "JobSet" || built.GetObjectKind().GroupVersionKind() != gvk {
		t.Errorf("kind %v, object kind %v; want JobSet on both", gvk, built.GetObjectKind().GroupVersionKind())
	}
	if want := map[string]string{"a": "b", AppliedHashAnnotation: hash}; !maps.Equal(built.GetAnnotations(), want) || len(hash) != 32 {
		t.Errorf("annotations %v, want %v (a 32-digit hash)", built.GetAnnotations(), want)
	}
	again, err := hashOf(builtObject(s, js.DeepCopy(), "alpha"))
	if err != nil || again != hash {
		t.Errorf("the same object hashed %q then %q (%v)", hash, again, err)
	}
	js.Spec.Suspend = ptr.To(false)
	if resumed, _ := hashOf(builtObject(s, js, "alpha")); resumed == hash {
		t.Error("a resumed JobSet has the suspended one's hash")
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "alpha-mpi-hostfile", Namespace: "ns"}}
	builtCM, _, err := builtObject(s, cm, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	cmHash := builtCM.GetAnnotations()[AppliedHashAnnotation]
	if builtCM.GetLabels()[TrainJobNameLabel] != "alpha" || cm.Labels != nil || cmHash == hash {
		t.Errorf("ConfigMap labels %v (the Build phase's %v), hash %q; want the TrainJob's name label on the copy only", builtCM.GetLabels(), cm.Labels, cmHash)
	}
}
