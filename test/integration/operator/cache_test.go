package operator_test

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator/controller"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator/runtimes"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/integration/operator/internal/optest"
)

// TestCacheScope: the operator caches the ConfigMaps and Secrets it applied
// (labelled with their TrainJob), not the others of the cluster
// (kubeflow/trainer#3374), in full or as metadata.
func TestCacheScope(t *testing.T) {
	ns := optest.NewNamespace(t, env.Client)
	unrelated := map[string]client.Object{
		"ConfigMap": &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unrelated"}, Data: map[string]string{"big": "data"}},
		"Secret":    &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unrelated"}, StringData: map[string]string{"password": "x"}},
	}
	for _, obj := range unrelated {
		create(t, obj)
	}
	createTrainingRuntime(t, ns, "torch", torchSpec())
	tj := newTrainJob(ns, "alpha", trainer.TrainingRuntimeKind, "torch")
	tj.Spec.Suspend = ptr.To(true)
	create(t, tj)

	snapshot := nsName(ns, "alpha"+runtimes.SnapshotSuffix)
	optest.Eventually(t, "the operator's cache holds the snapshot", func(ctx context.Context) error {
		return optest.Get(ctx, op.Cache(), snapshot, &corev1.ConfigMap{})
	})
	optest.Consistently(t, "the operator's cache holds nothing else", func(ctx context.Context) error {
		for kind, obj := range unrelated {
			if err := optest.Absent(ctx, op.Cache(), key(obj), obj.DeepCopyObject().(client.Object)); err != nil {
				return err
			}
			metadata := &metav1.PartialObjectMetadata{}
			metadata.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kind))
			if err := optest.Absent(ctx, op.Cache(), key(obj), metadata); err != nil {
				return err
			}
		}
		var list corev1.ConfigMapList
		if err := op.Cache().List(ctx, &list, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, cm := range list.Items {
			if cm.Labels[controller.TrainJobNameLabel] == "" {
				return fmt.Errorf("the cache lists ConfigMap %s", cm.Name)
			}
		}
		return nil
	})
}
