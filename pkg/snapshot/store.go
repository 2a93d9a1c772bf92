package snapshot

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/admission"
	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
)

// Store gives a TrainJob the runtime it was first built from (spec
// §2.5 step 1). The first reconcile copies the live runtime into the
// TrainJob's snapshot ConfigMap; every later one reads the snapshot, so a
// runtime can change or go away without touching TrainJobs that use it.
// The first reconcile builds from the live runtime while the snapshot is
// written: if writing it fails, the reconcile fails and the next one takes
// the snapshot again, from the runtime as it is then.
type Store struct {
	client  client.Reader
	live    client.Reader
	scheme  *runtime.Scheme
	decoder runtime.Decoder
	encoded *encodingCache
}

// NewStore is the Store of an operator whose cache c and API server live
// hold the snapshots and runtimes.
func NewStore(c client.Reader, live client.Reader, scheme *runtime.Scheme) *Store {
	return &Store{client: c, live: live, scheme: scheme, decoder: newDecodingCache(serializer.NewCodecFactory(scheme).UniversalDeserializer()),
		encoded: &encodingCache{}}
}

// Runtime returns tj's runtime from its snapshot or, when there is none,
// from the live runtime, with the snapshot ConfigMap to take of it (nil
// when the snapshot exists). The caller applies the snapshot.
func (s *Store) Runtime(ctx context.Context, tj *trainer.TrainJob) (*pipeline.Runtime, *corev1.ConfigMap, error) {
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
	rt, err := Read(ctx, s.client, live, s.decoder, tj)
	switch {
	case err == nil:
		return rt, nil, nil
	case !apierrors.IsNotFound(err):
		return nil, nil, err
	}

	rt, err = LiveRuntime(ctx, s.client, s.live, tj)
	if err != nil {
		return nil, nil, missingRuntimeError(tj, err)
	}
	content, err := s.encoded.encode(rt.Object, func() (string, error) { return Encode(s.scheme, rt) })
	if err != nil {
		return nil, nil, err
	}
	return rt, NewConfigMap(content, tj), nil
}

// missingRuntimeError words a failure to read the runtime as upstream does.
func missingRuntimeError(tj *trainer.TrainJob, err error) error {
	if !apierrors.IsNotFound(err) {
		return err
	}
	if pipeline.RuntimeRefGroupKind(tj) == admission.TrainingRuntime {
		return fmt.Errorf("TrainingRuntime specified in TrainJob is not found: %w", err)
	}
	return fmt.Errorf("not found ClusterTrainingRuntime specified in TrainJob: %w", err)
}

// Encode is the content of a snapshot of rt: its YAML, with its
// apiVersion and kind, without managed fields.
func Encode(scheme *runtime.Scheme, rt *pipeline.Runtime) (string, error) {
	obj := rt.Object.DeepCopyObject().(client.Object)
	gvk, err := apiutil.GVKForObject(obj, scheme)
	if err != nil {
		return "", err
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	obj.SetManagedFields(nil)
	data, err := yaml.Marshal(obj)
	if err != nil {
		return "", fmt.Errorf("encode runtime snapshot: %w", err)
	}
	return string(data), nil
}

// encodingCache encodes each version of a runtime once: the TrainJobs of a
// runtime all take a snapshot of it, and encoding its YAML each time would
// repeat the same work. A version is the runtime's kind, UID and
// resourceVersion, which the API server changes with any change of it.
type encodingCache struct {
	encoded VersionCache[encodedKey, string]
}

type encodedKey struct {
	kind            string
	uid             types.UID
	resourceVersion string
}

// encode returns the content of a snapshot of runtime, from encode when
// this version of it was not encoded yet. A runtime without UID or
// resourceVersion is encoded every time.
func (c *encodingCache) encode(runtime client.Object, encode func() (string, error)) (string, error) {
	k := encodedKey{kind: fmt.Sprintf("%T", runtime), uid: runtime.GetUID(), resourceVersion: runtime.GetResourceVersion()}
	if k.uid == "" || k.resourceVersion == "" {
		return encode()
	}
	if content, ok := c.encoded.Get(k); ok {
		return content, nil
	}
	content, err := encode()
	if err != nil {
		return "", err
	}
	c.encoded.Add(k, content)
	return content, nil
}

// NewConfigMap is the snapshot ConfigMap of tj holding content.
func NewConfigMap(content string, tj *trainer.TrainJob) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            Name(tj),
			Namespace:       tj.Namespace,
			Labels:          map[string]string{pipeline.TrainJobNameLabel: tj.Name},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(tj, trainer.GroupVersion.WithKind(trainer.TrainJobKind))},
		},
		Data: map[string]string{Key: content},
		// A record nobody can rewrite: the API server refuses every edit,
		// so a hand-edited image never reaches a pod. Deleting it remains;
		// the next build takes it again from the live runtime.
		Immutable: ptr.To(true),
	}
}
