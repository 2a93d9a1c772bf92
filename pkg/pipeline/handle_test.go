package pipeline_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
)

// TestOfflineHandle: offline, the cluster is the objects given, read as a
// client reads them; anything else is NotFound.
func TestOfflineHandle(t *testing.T) {
	ctx := context.Background()
	secret := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": "cert", "namespace": "ops", "labels": map[string]any{"app": "x"}},
		"data":     map[string]any{"ca.crt": "Q0E="},
	}}
	other := &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}, ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "team"}}
	r := pipeline.OfflineHandle(pipeline.OperatorInfo{Namespace: "ops"}, secret, other).Reader()

	var typed corev1.Secret
	if err := r.Get(ctx, client.ObjectKey{Namespace: "ops", Name: "cert"}, &typed); err != nil {
		t.Fatal(err)
	}
	if string(typed.Data["ca.crt"]) != "CA" {
		t.Errorf("typed Secret data = %q, want CA", typed.Data)
	}
	meta := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}}
	if err := r.Get(ctx, client.ObjectKey{Namespace: "ops", Name: "cert"}, meta); err != nil || meta.Labels["app"] != "x" {
		t.Errorf("metadata-only read: %v, labels %v", err, meta.Labels)
	}
	err := r.Get(ctx, client.ObjectKey{Namespace: "team", Name: "cert"}, &corev1.Secret{})
	if !apierrors.IsNotFound(err) || err.Error() != `secrets "cert" not found` {
		t.Errorf("Secret of another namespace: %v, want NotFound as the API server words it", err)
	}
	if err := r.Get(ctx, client.ObjectKey{Namespace: "ops", Name: "cert"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Errorf("ConfigMap of the Secret's name: %v, want NotFound", err)
	}

	var list corev1.SecretList
	if err := r.List(ctx, &list); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range list.Items {
		names = append(names, s.Namespace+"/"+s.Name)
	}
	if diff := cmp.Diff([]string{"ops/cert", "team/other"}, names); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
	list = corev1.SecretList{}
	if err := r.List(ctx, &list, client.InNamespace("team")); err != nil || len(list.Items) != 1 || list.Items[0].Name != "other" {
		t.Errorf("List in namespace team: %v, %d items", err, len(list.Items))
	}
	list = corev1.SecretList{}
	if err := r.List(ctx, &list, client.MatchingLabels{"app": "x"}); err != nil || len(list.Items) != 1 || list.Items[0].Name != "cert" {
		t.Errorf("List by label: %v, %d items", err, len(list.Items))
	}
}
