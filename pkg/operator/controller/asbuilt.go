package controller

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/value"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
)

// builtObject is a copy of an object the Build phase returned, as the
// operator writes it (labelled, see prepared), with, in
// AppliedHashAnnotation, the hash of that copy: the annotation travels with
// the object, so that a later reconcile can tell the object is already as
// built without writing it again (a suspended TrainJob's JobSet is rebuilt
// at every reconcile). The hash is of the typed object's JSON, which is
// deterministic: no conversion to unstructured is needed for it.
func builtObject(scheme *runtime.Scheme, obj client.Object, trainJobName string) (client.Object, schema.GroupVersionKind, string, error) {
	built, gvk, err := prepared(scheme, obj, trainJobName)
	if err != nil {
		return nil, gvk, "", err
	}
	data, err := json.Marshal(built)
	if err != nil {
		return nil, gvk, "", err
	}
	sum := sha256.Sum256(data)
	hash := hex.EncodeToString(sum[:16])
	annotations := built.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[AppliedHashAnnotation] = hash
	built.SetAnnotations(annotations)
	return built, gvk, hash, nil
}

// builtState is what asBuilt found of a built object.
type builtState int

const (
	// builtAbsent: neither the cache nor, when an earlier reconcile built
	// it, the API server has the object.
	builtAbsent builtState = iota
	// builtDiffers: the object exists, built from something else.
	builtDiffers
	// builtSame: the object exists and carries the hash.
	builtSame
)

// asBuilt tells whether the object u names exists and carries hash. It
// reads the cache and, when the cache does not have the object or has it
// without the hash, but an earlier reconcile built it (mayExist), the API
// server: the cache may not have seen the last write yet. An object found
// with the hash is remembered for the rest of the reconcile; one found
// without it is returned when read from the API server.
func (r *TrainJobReconciler) asBuilt(ctx context.Context, built client.Object, gvk schema.GroupVersionKind, hash string, mayExist bool) (builtState, client.Object, error) {
	key := client.ObjectKeyFromObject(built)
	state := builtAbsent
	for _, reader := range []client.Reader{r.client, r.live} {
		obj, err := r.newObject(gvk)
		if err != nil {
			return state, nil, err
		}
		err = reader.Get(ctx, key, obj)
		switch {
		case err == nil && obj.GetAnnotations()[AppliedHashAnnotation] == hash:
			remember(ctx, gvk, obj)
			return builtSame, nil, nil
		case err == nil && reader == r.live:
			return builtDiffers, obj, nil
		case err == nil:
			state = builtDiffers
		case apierrors.IsNotFound(err):
			state = builtAbsent
		default:
			return state, nil, err
		}
		if !mayExist {
			return state, nil, nil
		}
	}
	return state, nil, nil
}

// omitsAny tells whether u leaves out any of fields (the managed fields of
// a manager, in FieldsV1).
func omitsAny(u *unstructured.Unstructured, fields *metav1.FieldsV1) (bool, error) {
	if fields == nil {
		return false, nil
	}
	var set fieldpath.Set
	if err := set.FromJSON(bytes.NewReader(fields.Raw)); err != nil {
		return false, fmt.Errorf("decode managed fields: %w", err)
	}
	omits := false
	set.Iterate(func(p fieldpath.Path) {
		if !omits && !hasPath(u.Object, p) {
			omits = true
		}
	})
	return omits, nil
}

// hasPath tells whether the unstructured content obj has the field at p.
func hasPath(obj any, p fieldpath.Path) bool {
	for _, pe := range p {
		switch {
		case pe.FieldName != nil:
			m, ok := obj.(map[string]any)
			if !ok {
				return false
			}
			if obj, ok = m[*pe.FieldName]; !ok {
				return false
			}
		case pe.Index != nil:
			l, ok := obj.([]any)
			if !ok || *pe.Index >= len(l) {
				return false
			}
			obj = l[*pe.Index]
		case pe.Key != nil:
			m, ok := findItem(obj, func(item any) bool {
				m, ok := item.(map[string]any)
				return ok && matchesKey(m, *pe.Key)
			})
			if !ok {
				return false
			}
			obj = m
		case pe.Value != nil:
			v, ok := findItem(obj, func(item any) bool { return value.Equals(value.NewValueInterface(item), *pe.Value) })
			if !ok {
				return false
			}
			obj = v
		default:
			return false
		}
	}
	return true
}

// findItem returns the first item of the list l that matches.
func findItem(l any, matches func(any) bool) (any, bool) {
	items, _ := l.([]any)
	for _, item := range items {
		if matches(item) {
			return item, true
		}
	}
	return nil, false
}

// matchesKey tells whether the list item m has the key fields of key.
func matchesKey(m map[string]any, key value.FieldList) bool {
	for _, f := range key {
		v, ok := m[f.Name]
		if !ok || !value.Equals(value.NewValueInterface(v), f.Value) {
			return false
		}
	}
	return true
}

func (r *TrainJobReconciler) newObject(gvk schema.GroupVersionKind) (client.Object, error) {
	obj, err := r.scheme.New(gvk)
	if err != nil {
		return nil, err
	}
	co, ok := obj.(client.Object)
	if !ok {
		return nil, fmt.Errorf("%s is not an object", gvk)
	}
	return co, nil
}

// rememberApplied records the object the API server returned from an
// apply, for the rest of the reconcile.
func (r *TrainJobReconciler) rememberApplied(ctx context.Context, u *unstructured.Unstructured) {
	gvk := u.GroupVersionKind()
	obj, err := r.newObject(gvk)
	if err != nil || runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj) != nil {
		return
	}
	obj.SetManagedFields(nil)
	remember(ctx, gvk, obj)
}

// statusWrites remembers, for every TrainJob whose status the operator
// patched and whose patch the cache has not shown yet, the resourceVersion
// the patch was made from. A reconcile that reads the TrainJob at that
// resourceVersion reads a copy older than the API server's: the cache has
// not seen the operator's own write yet. It would compute the same status
// again and fail to write it (the patch is optimistically locked), so it
// does nothing; the write's watch event brings the TrainJob back.
type statusWrites struct {
	mu   sync.Mutex
	from map[types.NamespacedName]string
}

// wrote records a status patch of tj from resourceVersion from.
func (w *statusWrites) wrote(tj *trainer.TrainJob, from string) {
	if tj.ResourceVersion == from {
		// The patch changed nothing stored: no event will follow.
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.from[types.NamespacedName{Namespace: tj.Namespace, Name: tj.Name}] = from
}

// stale tells whether tj, as read from the cache, predates the operator's
// last status write; once it does not, the record is dropped.
func (w *statusWrites) stale(tj *trainer.TrainJob) bool {
	key := types.NamespacedName{Namespace: tj.Namespace, Name: tj.Name}
	w.mu.Lock()
	defer w.mu.Unlock()
	from, ok := w.from[key]
	if ok && from == tj.ResourceVersion {
		return true
	}
	delete(w.from, key)
	return false
}

func (w *statusWrites) forget(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.from, key)
}
