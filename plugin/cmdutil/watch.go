package cmdutil

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// Watch is how every command follows objects as they change: `list -w`, `status -w`, `wait`, `create --wait`
// and `logs -f`. It is client-go's informer, as kubectl's own waits use it: the objects are listed, then
// watched; a watch that ends is resumed from the last version seen, and one whose version is too old for the
// API server is listed again, so no change is lost and no command has to give up.
type Watch struct {
	// Object is the kind to watch, e.g. &corev1.Pod{}; a kind the client's scheme does not know (Kueue's
	// Workload) is watched as metadata: a *metav1.PartialObjectMetadata with its kind set, which changes, as its
	// resource version, with every change of the object.
	Object client.Object
	// Namespace is the namespace to watch; "" is all namespaces.
	Namespace string
	// Options narrows the watch: client.MatchingLabels, client.MatchingFields.
	Options []client.ListOption
	// From is the resource version of a list the caller has already read and shown: the watch begins there
	// and reports only what changed since. When the API server no longer has that version, everything is
	// listed again and reported as added. "" reports every object as added first.
	From string
	// Transform, when set, changes each object before the watch keeps it and reports it: a watch that holds
	// many objects strips what it does not use (StripManagedFields), or keeps another object made of it (the
	// dashboard's rows). It must return what it is given when given what it returned: the watch may transform
	// an object twice.
	Transform cache.TransformFunc
	// Synced, when set, is called once every object of the first list has been reported.
	Synced func()
	// Listed, when set, is called once the first list is over: every object of it reported (after Synced), or
	// the list failed. A watch refused (Forbidden) has then stopped and told handle so; one that failed
	// otherwise goes on trying, and reports what its next list holds as added.
	Listed func()
}

// StripManagedFields is a Watch's Transform that drops the objects' managedFields, often the larger part of
// an object that a command never shows.
func StripManagedFields(obj any) (any, error) {
	if o, ok := obj.(metav1.Object); ok {
		o.SetManagedFields(nil)
	}
	return obj, nil
}

// Event is an object that was added, changed or deleted; or, last, why the watch stopped before its context
// ended (Err, without an object).
type Event struct {
	Object  client.Object
	Deleted bool
	Err     error
}

// Start calls handle with every change, in order and from one goroutine, until ctx ends; the returned channel
// is closed once the watch and handle have stopped. A kind the user may not list or watch (Forbidden) is not
// watched: handle is told so once (Event.Err), and the watch stops. The commands that read what they show
// themselves take changes only as a signal to read again, and go on without it.
func (w Watch) Start(ctx context.Context, c client.WithWatch, handle func(Event)) (<-chan struct{}, error) {
	gvk, err := apiutil.GVKForObject(w.Object, c.Scheme())
	if err != nil {
		return nil, err
	}
	newList := func() (client.ObjectList, error) {
		if _, ok := w.Object.(*metav1.PartialObjectMetadata); ok {
			list := &metav1.PartialObjectMetadataList{}
			list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
			return list, nil
		}
		obj, err := c.Scheme().New(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err != nil {
			return nil, err
		}
		list, ok := obj.(client.ObjectList)
		if !ok {
			return nil, fmt.Errorf("%s is not a list", gvk.Kind+"List")
		}
		return list, nil
	}
	if _, err := newList(); err != nil {
		return nil, err
	}
	opts := append([]client.ListOption{client.InNamespace(w.Namespace)}, w.Options...)
	with := func(raw *metav1.ListOptions) []client.ListOption {
		// A list's limit and continue token go in controller-runtime's own options: it sets Raw's from them.
		return append(append([]client.ListOption{}, opts...), &client.ListOptions{Raw: raw, Limit: raw.Limit, Continue: raw.Continue})
	}
	skipFirstList := atomic.Bool{}
	skipFirstList.Store(w.From != "")
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, raw metav1.ListOptions) (runtime.Object, error) {
			list, err := newList()
			if err != nil {
				return nil, err
			}
			if skipFirstList.Swap(false) {
				// The caller's own list stands for the first one: the informer starts watching at its version.
				list.SetResourceVersion(w.From)
				return list, nil
			}
			if w.Transform != nil {
				return w.transformedList(ctx, c, newList, with)
			}
			return list, c.List(ctx, list, with(&raw)...)
		},
		WatchFuncWithContext: func(ctx context.Context, raw metav1.ListOptions) (watch.Interface, error) {
			list, err := newList()
			if err != nil {
				return nil, err
			}
			return c.Watch(ctx, list, with(&raw)...)
		},
	}
	var lister cache.ListerWatcher = lw
	if w.From != "" || w.Transform != nil {
		// A streaming list (watch with initial events) would replay every object the caller has shown.
		lister = listThenWatch{lw}
	}
	ctx, cancel := context.WithCancel(ctx)
	var refused atomic.Pointer[error]
	listed := sync.OnceFunc(func() {})
	if w.Listed != nil {
		listed = sync.OnceFunc(w.Listed)
	}
	inf := cache.NewSharedIndexInformerWithOptions(lister, w.Object, cache.SharedIndexInformerOptions{})
	if err := inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		if apierrors.IsForbidden(err) {
			refused.CompareAndSwap(nil, &err)
			cancel() // listed once handle is told
			return
		}
		// Anything else is retried by the informer, with back-off; the commands print nothing about it.
		listed()
	}); err != nil {
		cancel()
		return nil, err
	}
	if w.Transform != nil {
		if err := inf.SetTransform(w.Transform); err != nil {
			cancel()
			return nil, err
		}
	}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { deliver(handle, obj, false) },
		UpdateFunc: func(_, obj any) { deliver(handle, obj, false) },
		DeleteFunc: func(obj any) { deliver(handle, obj, true) },
	})
	if err != nil {
		cancel()
		return nil, err
	}
	go func() {
		select {
		case <-reg.HasSyncedChecker().Done():
			if w.Synced != nil {
				w.Synced()
			}
			listed()
		case <-ctx.Done():
		}
	}()
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer cancel()
		defer listed()
		inf.RunWithContext(ctx)
		if err := refused.Load(); err != nil {
			handle(Event{Err: fmt.Errorf("watch of %s: %w", gvk.Kind, *err)})
		}
	}()
	return done, nil
}

// transformPage is how many objects a watch with a Transform lists at once.
const transformPage = 500

// transformedList lists the watch's objects page by page, each object transformed as it comes: the whole list
// is never held as the API server sends it (a streaming list, or one list of everything, would hold every
// object untransformed until the last one is in). The list it returns holds the transformed objects, of
// whatever type the Transform made.
func (w Watch) transformedList(ctx context.Context, c client.WithWatch, newList func() (client.ObjectList, error),
	with func(*metav1.ListOptions) []client.ListOption) (*metav1.List, error) {
	list := &metav1.List{}
	raw := metav1.ListOptions{Limit: transformPage}
	for {
		page, err := newList()
		if err != nil {
			return nil, err
		}
		if err := c.List(ctx, page, with(&raw)...); err != nil {
			return nil, err
		}
		if err := meta.EachListItem(page, func(obj runtime.Object) error {
			t, err := w.Transform(obj)
			if err == nil {
				list.Items = append(list.Items, runtime.RawExtension{Object: t.(runtime.Object)})
			}
			return err
		}); err != nil {
			return nil, err
		}
		list.ResourceVersion = page.GetResourceVersion()
		if raw.Continue = page.GetContinue(); raw.Continue == "" {
			return list, nil
		}
	}
}

func deliver(handle func(Event), obj any, deleted bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if o, ok := obj.(client.Object); ok {
		handle(Event{Object: o, Deleted: deleted})
	}
}

// Changes signals on the returned channel whenever a watched object changes, and every resync (when it is not
// 0), until ctx ends. Signals that come while one is pending are one: a command reads everything again anyway.
//
// It returns once every watch has listed what it watches, or failed to (Watch.Listed), with no signal for
// what they listed: a read made after it sees at least what the watches listed (or the error that stopped
// them), and every later change signals. A command thus reads once what has not changed, rather than once and
// again when the watches' first lists come in; a watch refused does not hold the read back.
func Changes(ctx context.Context, c client.WithWatch, resync time.Duration, watches ...Watch) (<-chan struct{}, error) {
	changes := make(chan struct{}, 1)
	notify := func(Event) {
		select {
		case changes <- struct{}{}:
		default:
		}
	}
	var listing sync.WaitGroup
	for _, w := range watches {
		listing.Add(1)
		w.Listed = listing.Done
		if _, err := w.Start(ctx, c, notify); err != nil {
			return nil, err
		}
	}
	listed := make(chan struct{})
	go func() {
		listing.Wait()
		close(listed)
	}()
	select {
	case <-listed:
	case <-ctx.Done():
	}
	select { // what the first lists reported: the caller reads it now
	case <-changes:
	default:
	}
	if resync > 0 {
		go func() {
			t := time.NewTicker(resync)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					notify(Event{})
				}
			}
		}()
	}
	return changes, nil
}

// listThenWatch is a ListWatch the reflector lists and then watches, never a streaming list.
type listThenWatch struct{ *cache.ListWatch }

func (listThenWatch) IsWatchListSemanticsUnSupported() bool { return true }
