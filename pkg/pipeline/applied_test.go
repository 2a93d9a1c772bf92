package pipeline_test

import (
	"maps"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/scheme"
)

func TestAsApplied(t *testing.T) {
	s := scheme.New()
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "alpha", Namespace: "ns", Annotations: map[string]string{"a": "b"}},
		Spec: jobsetv1alpha2.JobSetSpec{Suspend: ptr.To(true)}}
	orig := js.DeepCopy()
	built, gvk, err := pipeline.AsApplied(s, js, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	hash := built.GetAnnotations()[pipeline.AppliedHashAnnotation]
	if diff := cmp.Diff(orig, js); diff != "" {
		t.Errorf("AsApplied changed the object the Build phase returned (-before +after):\n%s", diff)
	}
	if gvk.Kind != "JobSet" || built.GetObjectKind().GroupVersionKind() != gvk {
		t.Errorf("kind %v, object kind %v; want JobSet on both", gvk, built.GetObjectKind().GroupVersionKind())
	}
	if want := map[string]string{"a": "b", pipeline.AppliedHashAnnotation: hash}; !maps.Equal(built.GetAnnotations(), want) || len(hash) != 32 {
		t.Errorf("annotations %v, want %v (a 32-digit hash)", built.GetAnnotations(), want)
	}
	again, err := hashOf(pipeline.AsApplied(s, js.DeepCopy(), "alpha"))
	if err != nil || again != hash {
		t.Errorf("the same object hashed %q then %q (%v)", hash, again, err)
	}
	js.Spec.Suspend = ptr.To(false)
	if resumed, _ := hashOf(pipeline.AsApplied(s, js, "alpha")); resumed == hash {
		t.Error("a resumed JobSet has the suspended one's hash")
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "alpha-mpi-hostfile", Namespace: "ns"}}
	builtCM, _, err := pipeline.AsApplied(s, cm, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	cmHash := builtCM.GetAnnotations()[pipeline.AppliedHashAnnotation]
	if builtCM.GetLabels()[pipeline.TrainJobNameLabel] != "alpha" || cm.Labels != nil || cmHash == hash {
		t.Errorf("ConfigMap labels %v (the Build phase's %v), hash %q; want the TrainJob's name label on the copy only", builtCM.GetLabels(), cm.Labels, cmHash)
	}
}

// TestAsAppliedIsIdempotent: an object as applied, applied again, is the
// same (render's output fed back, a hash recomputed).
func TestAsAppliedIsIdempotent(t *testing.T) {
	s := scheme.New()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "alpha-mpi-hostfile", Namespace: "ns"}, Data: map[string]string{"k": "v"}}
	once, _, err := pipeline.AsApplied(s, cm, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	twice, _, err := pipeline.AsApplied(s, once, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(once, twice); diff != "" {
		t.Errorf("applied twice (-once +twice):\n%s", diff)
	}
}

// hashOf is the hash AsApplied gave.
func hashOf(built client.Object, _ schema.GroupVersionKind, err error) (string, error) {
	if err != nil {
		return "", err
	}
	return built.GetAnnotations()[pipeline.AppliedHashAnnotation], nil
}
