package dashboard

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
)

// syncWait bounds how long a page waits for the first list of the dashboard's watch of the TrainJobs before
// the server lists them itself (and says why it could not, when it cannot).
const syncWait = 10 * time.Second

// trainJobCache is the dashboard's one watch of the TrainJobs it shows (the CLI's one watcher), shared by
// every page: the list and its pushes read the TrainJobs from it, not from the API server, so that a push
// costs no list of every TrainJob, and the server holds each TrainJob once, without its managedFields, however
// many pages are open.
type trainJobCache struct {
	mu    sync.Mutex
	items map[types.NamespacedName]*trainer.TrainJob
	// pages are told of every change, at most one pending each.
	pages map[chan struct{}]struct{}
	// synced is closed once the first list is in, or the watch was refused (refused says why).
	synced  chan struct{}
	once    sync.Once
	refused error
}

// Start watches the TrainJobs the dashboard shows until ctx ends, for every page to read.
func (s *Server) Start(ctx context.Context) error {
	c := &trainJobCache{items: map[types.NamespacedName]*trainer.TrainJob{}, pages: map[chan struct{}]struct{}{}, synced: make(chan struct{})}
	w := cmdutil.Watch{Object: &trainer.TrainJob{}, Namespace: s.Namespace, Transform: cmdutil.StripManagedFields,
		Synced: func() { c.once.Do(func() { close(c.synced) }) }}
	if _, err := w.Start(ctx, s.Client, c.handle); err != nil {
		return err
	}
	s.cache = c
	return nil
}

func (c *trainJobCache) handle(e cmdutil.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch tj, _ := e.Object.(*trainer.TrainJob); {
	case e.Err != nil:
		c.refused = e.Err
		c.once.Do(func() { close(c.synced) })
	case tj == nil:
		return
	case e.Deleted:
		delete(c.items, types.NamespacedName{Namespace: tj.Namespace, Name: tj.Name})
	default:
		c.items[types.NamespacedName{Namespace: tj.Namespace, Name: tj.Name}] = tj
	}
	for page := range c.pages {
		select {
		case page <- struct{}{}:
		default:
		}
	}
}

// list is every TrainJob watched; ok is false when the watch cannot tell (refused, or not listed within
// syncWait): the caller lists them itself.
func (c *trainJobCache) list(ctx context.Context) (items []trainer.TrainJob, ok bool) {
	if !c.wait(ctx) {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.refused != nil {
		return nil, false
	}
	items = make([]trainer.TrainJob, 0, len(c.items))
	for _, tj := range c.items {
		items = append(items, *tj)
	}
	// In the order the API server lists them.
	slices.SortFunc(items, func(a, b trainer.TrainJob) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return items, true
}

// wait waits until the first list is in or the watch was refused, for at most syncWait; false when it has not
// (or there is no watch).
func (c *trainJobCache) wait(ctx context.Context) bool {
	if c == nil {
		return false
	}
	select {
	case <-c.synced:
		return true
	case <-ctx.Done():
	case <-time.After(syncWait):
	}
	return false
}

// changes signals on the returned channel at every change of the TrainJobs and at every signal of also, until
// ctx ends.
func (c *trainJobCache) changes(ctx context.Context, also <-chan struct{}) <-chan struct{} {
	page := make(chan struct{}, 1)
	c.mu.Lock()
	c.pages[page] = struct{}{}
	c.mu.Unlock()
	go func() {
		defer func() {
			c.mu.Lock()
			delete(c.pages, page)
			c.mu.Unlock()
		}()
		for {
			select {
			case <-ctx.Done():
				return
			case <-also:
				select {
				case page <- struct{}{}:
				default:
				}
			}
		}
	}()
	return page
}
