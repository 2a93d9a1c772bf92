package snapshot

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
)

// The runtime snapshot (spec §2.5): a ConfigMap `<trainjob>-runtime-snapshot`
// whose key `runtime` holds the YAML of the runtime the TrainJob was first
// built from. The TrainJob controller takes it; from then on the TrainJob
// runs from it, whatever becomes of the runtime.
const (
	Suffix = "-runtime-snapshot"
	Key    = "runtime"
)

// Name is the name of a TrainJob's snapshot ConfigMap.
func Name(tj *trainer.TrainJob) string { return tj.Name + Suffix }

// Read reads the runtime tj runs from out of its snapshot, from cached
// and, when the cache does not have the snapshot (taken a moment ago),
// live, unless live is nil. It is a NotFound API error when the snapshot is
// not taken yet.
func Read(ctx context.Context, cached, live client.Reader, decoder runtime.Decoder, tj *trainer.TrainJob) (*pipeline.Runtime, error) {
	key := client.ObjectKey{Namespace: tj.Namespace, Name: Name(tj)}
	cm := &corev1.ConfigMap{}
	err := cached.Get(ctx, key, cm)
	if apierrors.IsNotFound(err) && live != nil {
		err = live.Get(ctx, key, cm)
	}
	if err != nil {
		return nil, err
	}
	return Decode(decoder, cm, tj)
}

// Decode reads the runtime out of a snapshot ConfigMap, after
// checking that tj controls it (else a pipeline.NotControlledError) and that
// it holds the runtime tj references.
func Decode(decoder runtime.Decoder, cm *corev1.ConfigMap, tj *trainer.TrainJob) (*pipeline.Runtime, error) {
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("invalid runtime snapshot: "+format, args...)
	}
	if err := pipeline.CheckControlled(cm, "ConfigMap", tj); err != nil {
		return nil, err
	}
	data, ok := cm.Data[Key]
	if !ok {
		return nil, invalid("ConfigMap %s has no %q key", cm.Name, Key)
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

// SharedContents trims the snapshots in the operator's cache: the
// snapshots of one runtime version share one copy of their content
// (decoding gives each ConfigMap its own, and the TrainJobs of a runtime all
// have the same), and what the operator never reads of a snapshot goes.
type SharedContents struct {
	// contents are the shared data maps of snapshots, keyed by their content.
	contents VersionCache[string, map[string]string]
}

// Share trims cm when it is a snapshot. Its data becomes the map shared by
// the snapshots with the same content (a content not seen before becomes
// the shared one): the cache hands out copies and never writes the objects
// it holds, so they can share a map as they share a string. Its labels and
// annotations go: the operator reads of a snapshot only its name, owner and
// content (Read), and never writes one again while it exists, so it
// never compares the rest with what it would build.
func (s *SharedContents) Share(cm *corev1.ConfigMap) {
	data, ok := cm.Data[Key]
	if !ok || !strings.HasSuffix(cm.Name, Suffix) {
		return
	}
	cm.Labels, cm.Annotations = nil, nil
	shared, ok := s.contents.Get(data)
	switch {
	case !ok && len(cm.Data) == 1:
		s.contents.Add(data, cm.Data)
	case !ok:
		s.contents.Add(data, map[string]string{Key: data})
	case len(cm.Data) == 1:
		cm.Data = shared
	default:
		// Someone added keys: only the content is shared.
		cm.Data[Key] = shared[Key]
	}
}
