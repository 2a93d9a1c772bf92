package pipeline

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// TrainJobNameLabel is set on every ConfigMap and Secret the operator
// writes for a TrainJob, with the TrainJob's name. The operator caches only
// ConfigMaps and Secrets that carry it, rather than every one in the
// cluster (kubeflow/trainer#3374).
const TrainJobNameLabel = "trainer.kubeflow.org/trainjob-name"

// AppliedHashAnnotation is set on every object the operator writes, with the
// hash of what it wrote: an object that carries the hash of what the
// operator would write now, and has not drifted, is not written again.
const AppliedHashAnnotation = "trainer.kubeflow.org/applied-hash"

// AsApplied is a copy of an object the Build phase returned, exactly as the
// operator writes it: with its apiVersion and kind, without
// creationTimestamp, for ConfigMaps and Secrets with TrainJobNameLabel, and
// with, in AppliedHashAnnotation, the hash of that copy. The operator's
// applier and `render` both call it, so that render prints what is applied.
// The annotation travels with the object, so that a later reconcile can
// tell the object is already as built without writing it again (a
// suspended TrainJob's JobSet is rebuilt at every reconcile). The hash is of
// the typed object's JSON, which is deterministic; an object that already
// carries a hash gets the same one again.
func AsApplied(scheme *runtime.Scheme, obj client.Object, trainJobName string) (client.Object, schema.GroupVersionKind, error) {
	gvk, err := apiutil.GVKForObject(obj, scheme)
	if err != nil {
		return nil, gvk, err
	}
	built := obj.DeepCopyObject().(client.Object)
	built.GetObjectKind().SetGroupVersionKind(gvk)
	built.SetCreationTimestamp(metav1.Time{})
	if gvk.Group == "" && (gvk.Kind == "ConfigMap" || gvk.Kind == "Secret") {
		labels := built.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[TrainJobNameLabel] = trainJobName
		built.SetLabels(labels)
	}
	annotations := built.GetAnnotations()
	if _, ok := annotations[AppliedHashAnnotation]; ok {
		delete(annotations, AppliedHashAnnotation)
		if len(annotations) == 0 {
			built.SetAnnotations(nil)
		}
	}
	data, err := json.Marshal(built)
	if err != nil {
		return nil, gvk, err
	}
	sum := sha256.Sum256(data)
	if annotations = built.GetAnnotations(); annotations == nil {
		annotations = map[string]string{}
	}
	annotations[AppliedHashAnnotation] = hex.EncodeToString(sum[:16])
	built.SetAnnotations(annotations)
	return built, gvk, nil
}
