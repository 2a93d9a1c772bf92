package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
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
// The first reconcile builds from the live runtime while the snapshot is
// written: if writing it fails, the reconcile fails and the next one takes
// the snapshot again, from the runtime as it is then.
type snapshots struct {
	client  client.Client
	live    client.Reader
	scheme  *runtime.Scheme
	decoder runtime.Decoder
}

func newSnapshots(c client.Client, live client.Reader, scheme *runtime.Scheme) *snapshots {
	return &snapshots{client: c, live: live, scheme: scheme, decoder: newDecodingCache(serializer.NewCodecFactory(scheme).UniversalDeserializer())}
}

// runtime returns tj's runtime from its snapshot or, when there is none,
// from the live runtime, with the snapshot ConfigMap to take of it (nil
// when the snapshot exists). The caller applies the snapshot.
func (s *snapshots) runtime(ctx context.Context, tj *trainer.TrainJob) (*pipeline.Runtime, *corev1.ConfigMap, error) {
	// The live read when the cache misses the snapshot matters: taking a
	// snapshot the cache has not seen yet again could copy a runtime
	// changed since. A TrainJob no reconcile has reported on has no
	// snapshot, unless a reconcile took it and then failed to write the
	// status (taking it again then copies the runtime as it is a moment
	// later); the first reconcile of every TrainJob saves the read.
	live := s.live
	if meta.FindStatusCondition(tj.Status.Conditions, trainer.TrainJobComponentsCreated) == nil {
		live = nil
	}
	rt, err := runtimes.Snapshot(ctx, s.client, live, s.decoder, tj)
	switch {
	case err == nil:
		return rt, nil, nil
	case !apierrors.IsNotFound(err):
		return nil, nil, err
	}

	rt, err = runtimes.Get(ctx, s.client, s.live, tj)
	if err != nil {
		return nil, nil, missingRuntimeError(tj, err)
	}
	snapshot, err := newSnapshot(s.scheme, rt, tj)
	if err != nil {
		return nil, nil, err
	}
	return rt, snapshot, nil
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
			Name:            runtimes.SnapshotName(tj),
			Namespace:       tj.Namespace,
			Labels:          map[string]string{TrainJobNameLabel: tj.Name},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(tj, trainer.GroupVersion.WithKind(trainer.TrainJobKind))},
		},
		Data: map[string]string{runtimes.SnapshotKey: string(data)},
	}, nil
}
