package dashboard

import (
	"cmp"
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/list"
)

// syncWait bounds how long a page waits for the first list of the dashboard's watch of the TrainJobs before
// the server lists them itself (and says why it could not, when it cannot).
const syncWait = 10 * time.Second

// trainJobCache is the dashboard's one watch of the TrainJobs it shows (the CLI's one watcher), shared by
// every page: it keeps of each TrainJob its row of the list as the page reads it, made when the TrainJob
// changes (the watch's Transform), not the TrainJob. A push then costs no list of every TrainJob from the API
// server and makes again only the rows of the TrainJobs in a Kueue LocalQueue, whatever the number of pages.
type trainJobCache struct {
	mu    sync.Mutex
	items map[types.NamespacedName]*row
	// pages are told of every change, at most one pending each.
	pages map[chan struct{}]struct{}
	// synced is closed once the first list is in, or the watch was refused (refused says why).
	synced  chan struct{}
	once    sync.Once
	refused error
}

// Start watches the TrainJobs the dashboard shows until ctx ends, for every page to read.
func (s *Server) Start(ctx context.Context) error {
	c := &trainJobCache{items: map[types.NamespacedName]*row{}, pages: map[chan struct{}]struct{}{}, synced: make(chan struct{})}
	w := cmdutil.Watch{Object: &trainer.TrainJob{}, Namespace: s.Namespace, Transform: func(obj any) (any, error) {
		if tj, ok := obj.(*trainer.TrainJob); ok {
			return newRow(ctx, s.Rows, tj)
		}
		return obj, nil // a row already: the informer may transform again what the list transformed
	}, Synced: func() { c.once.Do(func() { close(c.synced) }) }}
	if _, err := w.Start(ctx, s.Client, c.handle); err != nil {
		return err
	}
	s.cache = c
	return nil
}

func (c *trainJobCache) handle(e cmdutil.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch r, _ := e.Object.(*row); {
	case e.Err != nil:
		c.refused = e.Err
		c.once.Do(func() { close(c.synced) })
	case r == nil:
		return
	case e.Deleted:
		delete(c.items, types.NamespacedName{Namespace: r.Namespace, Name: r.Name})
	default:
		c.items[types.NamespacedName{Namespace: r.Namespace, Name: r.Name}] = r
	}
	for page := range c.pages {
		select {
		case page <- struct{}{}:
		default:
		}
	}
}

// list is the row of every TrainJob watched, in the order the API server lists them; ok is false when the
// watch cannot tell (refused, or not listed within syncWait): the caller lists them itself.
func (c *trainJobCache) list(ctx context.Context) (rows []*row, ok bool) {
	if !c.wait(ctx) {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.refused != nil {
		return nil, false
	}
	rows = slices.Collect(maps.Values(c.items))
	slices.SortFunc(rows, func(a, b *row) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return rows, true
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

// row is what the dashboard keeps of a TrainJob: its row of the list as the page reads it (a JSON array of the
// cells of columns) and, when it is in a Kueue LocalQueue, whose Workload completes the row when it is shown
// (list.Rows.Queue), the row and what Queue reads of the TrainJob. It is a client.Object for the watch to
// keep (named as the TrainJob), and never changed once made.
type row struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	json  json.RawMessage
	row   list.Row
	queue *trainer.TrainJob
}

func (r *row) DeepCopyObject() runtime.Object {
	c := *r
	return &c
}

// newRow is tj's row, made by rows.
func newRow(ctx context.Context, rows *list.Rows, tj *trainer.TrainJob) (*row, error) {
	r := &row{ObjectMeta: metav1.ObjectMeta{Namespace: tj.Namespace, Name: tj.Name}, queue: list.ForQueue(tj)}
	lr := rows.Alone(ctx, tj)
	if r.queue != nil {
		r.row = lr
	}
	var err error
	r.json, err = rowJSON(&lr)
	return r, err
}

// columns are the cells of a row of the list the page reads, in order: what it shows of list's row, and the
// creation time in seconds since the epoch.
var columns = []struct {
	name string
	of   func(*list.Row) any
}{
	{"namespace", func(r *list.Row) any { return r.Namespace }},
	{"name", func(r *list.Row) any { return r.Name }},
	{"stage", func(r *list.Row) any { return r.Stage }},
	{"reason", func(r *list.Row) any { return r.Reason }},
	{"runtime", func(r *list.Row) any { return r.Runtime }},
	{"nodes", func(r *list.Row) any { return r.Nodes }},
	{"gpus", func(r *list.Row) any { return r.GPUs }},
	{"percentage", func(r *list.Row) any { return r.Percentage }},
	{"eta", func(r *list.Row) any { return r.ETA }},
	{"queue", func(r *list.Row) any { return r.Queue }},
	{"position", func(r *list.Row) any { return r.Position }},
	{"created", func(r *list.Row) any { return r.Created.Unix() }},
}

// columnNames name the cells of a row the page reads (TrainJobs.Columns).
var columnNames = func() []string {
	names := make([]string, len(columns))
	for i, c := range columns {
		names[i] = c.name
	}
	return names
}()

// rowJSON is r as the page reads it: the JSON array of its cells of columns.
func rowJSON(r *list.Row) (json.RawMessage, error) {
	cells := make([]any, len(columns))
	for i, c := range columns {
		cells[i] = c.of(r)
	}
	return json.Marshal(cells)
}
