package apply

import (
	"context"
	"reflect"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The cache sees an object some time after the operator created it. Within
// one reconcile, the objects it created are kept in the context, and the
// plugins' reads find them there first: the JobSet plugin reads the JobSet
// the same reconcile created (and reports its jobs as not started), instead
// of failing, or asking the API server again. The record ends with the
// reconcile. Nothing newer than the cache is kept otherwise (see Applier):
// the status derived from it would step back at the next reconcile.
type written struct {
	mu   sync.Mutex
	objs map[writtenKey]client.Object
}

type writtenKey struct {
	gvk schema.GroupVersionKind
	key client.ObjectKey
}

type writtenContextKey struct{}

// WithWritten returns a context that records the objects written during
// one reconcile.
func WithWritten(ctx context.Context) context.Context {
	return context.WithValue(ctx, writtenContextKey{}, &written{objs: map[writtenKey]client.Object{}})
}

// remember records obj, of kind gvk, as the reconcile of ctx wrote it.
func remember(ctx context.Context, gvk schema.GroupVersionKind, obj client.Object) {
	w, ok := ctx.Value(writtenContextKey{}).(*written)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.objs[writtenKey{gvk, client.ObjectKeyFromObject(obj)}] = obj
}

// Written fills obj with the object of kind gvk named key that the
// reconcile of ctx wrote, and reports whether there was one.
func Written(ctx context.Context, gvk schema.GroupVersionKind, key client.ObjectKey, obj client.Object) bool {
	w, ok := ctx.Value(writtenContextKey{}).(*written)
	if !ok {
		return false
	}
	w.mu.Lock()
	stored, ok := w.objs[writtenKey{gvk, key}]
	w.mu.Unlock()
	if !ok || reflect.TypeOf(stored) != reflect.TypeOf(obj) {
		return false
	}
	reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(stored.DeepCopyObject()).Elem())
	return true
}
