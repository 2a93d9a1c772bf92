package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
)

// hashedApplyObject is applyObject with, in AppliedHashAnnotation, the
// hash of what it applies: the annotation travels with the object, so that
// a later reconcile can tell the object is already as built without
// writing it again (a suspended TrainJob's JobSet is rebuilt at every
// reconcile).
func hashedApplyObject(scheme *runtime.Scheme, obj client.Object, trainJobName string) (*unstructured.Unstructured, string, error) {
	u, err := applyObject(scheme, obj, trainJobName)
	if err != nil {
		return nil, "", err
	}
	data, err := json.Marshal(u.Object)
	if err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(data)
	hash := hex.EncodeToString(sum[:16])
	annotations := u.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[AppliedHashAnnotation] = hash
	u.SetAnnotations(annotations)
	return u, hash, nil
}

// asBuilt tells whether the object u names already carries hash. It reads
// the cache and, when the cache does not have the object or has it without
// the hash, but an earlier reconcile built it (mayExist), the API server:
// the cache may not have seen the last apply yet. An object found is
// remembered for the rest of the reconcile.
func (r *TrainJobReconciler) asBuilt(ctx context.Context, u *unstructured.Unstructured, hash string, mayExist bool) (bool, error) {
	gvk := u.GroupVersionKind()
	key := client.ObjectKeyFromObject(u)
	for _, reader := range []client.Reader{r.client, r.live} {
		obj, err := r.newObject(gvk)
		if err != nil {
			return false, err
		}
		err = reader.Get(ctx, key, obj)
		switch {
		case err == nil && obj.GetAnnotations()[AppliedHashAnnotation] == hash:
			remember(ctx, gvk, obj)
			return true, nil
		case err != nil && !apierrors.IsNotFound(err):
			return false, err
		case !mayExist:
			return false, nil
		}
	}
	return false, nil
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
