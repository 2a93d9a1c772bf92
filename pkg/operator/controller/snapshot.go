package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator/runtimes"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
)

// snapshots gives a TrainJob the runtime it was first built from (spec
// §2.5 step 1). The first reconcile copies the live runtime into the
// TrainJob's snapshot ConfigMap; every later one reads the snapshot, so a
// runtime can change or go away without touching TrainJobs that use it.
type snapshots struct {
	client  client.Client
	live    client.Reader
	scheme  *runtime.Scheme
	decoder runtime.Decoder
}

func newSnapshots(c client.Client, live client.Reader, scheme *runtime.Scheme) *snapshots {
	return &snapshots{client: c, live: live, scheme: scheme, decoder: serializer.NewCodecFactory(scheme).UniversalDeserializer()}
}

// snapshotName is the name of a TrainJob's snapshot ConfigMap.
func snapshotName(tj *trainer.TrainJob) string { return tj.Name + RuntimeSnapshotSuffix }

// runtime returns tj's runtime from its snapshot, taking the snapshot first
// when there is none. apply server-side applies an object.
func (s *snapshots) runtime(ctx context.Context, tj *trainer.TrainJob, apply func(context.Context, client.Object) error) (*pipeline.Runtime, error) {
	key := client.ObjectKey{Namespace: tj.Namespace, Name: snapshotName(tj)}
	cm := &corev1.ConfigMap{}
	err := s.client.Get(ctx, key, cm)
	if apierrors.IsNotFound(err) {
		// The cache may not have seen a snapshot taken a moment ago; taking
		// it again could copy a runtime changed since.
		err = s.live.Get(ctx, key, cm)
	}
	switch {
	case err == nil:
		return decodeSnapshot(s.decoder, cm, tj)
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("get runtime snapshot %s: %w", key, err)
	}

	rt, err := runtimes.Get(ctx, s.client, s.live, tj)
	if err != nil {
		return nil, missingRuntimeError(tj, err)
	}
	snapshot, err := newSnapshot(s.scheme, rt, tj)
	if err != nil {
		return nil, err
	}
	if err := apply(ctx, snapshot); err != nil {
		return nil, fmt.Errorf("create runtime snapshot %s: %w", key, err)
	}
	return rt, nil
}

// missingRuntimeError words a failure to read the runtime as upstream does.
func missingRuntimeError(tj *trainer.TrainJob, err error) error {
	if !apierrors.IsNotFound(err) {
		return err
	}
	if pipeline.RuntimeRefGroupKind(tj) == runtimes.TrainingRuntime {
		return fmt.Errorf("TrainingRuntime specified in TrainJob is not found: %w", err)
	}
	return fmt.Errorf("not found ClusterTrainingRuntime specified in TrainJob: %w", err)
}

// newSnapshot is the snapshot ConfigMap of tj holding rt.
func newSnapshot(scheme *runtime.Scheme, rt *pipeline.Runtime, tj *trainer.TrainJob) (*corev1.ConfigMap, error) {
	obj := rt.Object.DeepCopyObject().(client.Object)
	gvk, err := apiutil.GVKForObject(obj, scheme)
	if err != nil {
		return nil, err
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	obj.SetManagedFields(nil)
	data, err := yaml.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encode runtime snapshot: %w", err)
	}
	return &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            snapshotName(tj),
			Namespace:       tj.Namespace,
			Labels:          map[string]string{TrainJobNameLabel: tj.Name},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(tj, trainer.GroupVersion.WithKind(trainer.TrainJobKind))},
		},
		Data: map[string]string{RuntimeSnapshotKey: string(data)},
	}, nil
}

// decodeSnapshot reads the runtime out of a snapshot ConfigMap, after
// checking that it belongs to tj and holds the runtime tj references.
func decodeSnapshot(decoder runtime.Decoder, cm *corev1.ConfigMap, tj *trainer.TrainJob) (*pipeline.Runtime, error) {
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("invalid runtime snapshot: "+format, args...)
	}
	if owner := metav1.GetControllerOf(cm); owner == nil || owner.UID != tj.UID {
		return nil, invalid("ConfigMap %s is not controlled by TrainJob %s (uid %s)", cm.Name, tj.Name, tj.UID)
	}
	data, ok := cm.Data[RuntimeSnapshotKey]
	if !ok {
		return nil, invalid("ConfigMap %s has no %q key", cm.Name, RuntimeSnapshotKey)
	}
	obj, gvk, err := decoder.Decode([]byte(data), nil, nil)
	if err != nil {
		return nil, invalid("ConfigMap %s: %v", cm.Name, err)
	}
	co, ok := obj.(client.Object)
	if !ok {
		return nil, invalid("ConfigMap %s holds a %s, not a runtime", cm.Name, gvk.Kind)
	}
	rt, err := pipeline.RuntimeOf(co)
	if err != nil {
		return nil, invalid("ConfigMap %s holds a %s, not a runtime", cm.Name, gvk.Kind)
	}
	want := pipeline.RuntimeRefGroupKind(tj)
	if got := rt.GroupKind(); got != want || co.GetName() != tj.Spec.RuntimeRef.Name {
		return nil, invalid("ConfigMap %s holds %s %q, but the TrainJob references %s %q",
			cm.Name, got, co.GetName(), want, tj.Spec.RuntimeRef.Name)
	}
	return rt, nil
}
