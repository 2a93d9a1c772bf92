package cli

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/scheme"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
)

// TestWatch follows TrainJobs with cmdutil.Watch, the one watcher of list -w, status -w, wait, delete --wait and
// logs -f, against a real API server.
func TestWatch(t *testing.T) {
	c, f := newFixture(t)
	wc, err := client.NewWithWatch(c.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	f.trainJob("before", 1, false)
	shown := &trainer.TrainJobList{}
	if err := f.c.List(t.Context(), shown, client.InNamespace(f.ns)); err != nil {
		t.Fatal(err)
	}
	// start watches the test's namespace; the returned func waits for an event of name (deleted or not) and
	// returns the names of the events before it, in order.
	start := func(t *testing.T, w cmdutil.Watch) func(name string, deleted bool) []string {
		ctx, cancel := context.WithCancel(t.Context())
		events := make(chan cmdutil.Event, 100)
		w.Object, w.Namespace = &trainer.TrainJob{}, f.ns
		done, err := w.Start(ctx, wc, func(e cmdutil.Event) { events <- e })
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cancel()
			<-done
		})
		return func(name string, deleted bool) []string {
			t.Helper()
			var before []string
			deadline := time.After(30 * time.Second)
			for {
				select {
				case e := <-events:
					if e.Object.GetName() == name && e.Deleted == deleted {
						return before
					}
					before = append(before, e.Object.GetName())
				case <-deadline:
					t.Fatalf("no event of %s (deleted %v) within 30s; saw %v", name, deleted, before)
				}
			}
		}
	}

	t.Run("from a list already shown, only what changed since", func(t *testing.T) {
		next := start(t, cmdutil.Watch{From: shown.ResourceVersion})
		f.trainJob("after", 1, false)
		if before := next("after", false); len(before) != 0 {
			t.Errorf("events before the new TrainJob's: %v; want none (the list at %s showed them)", before, shown.ResourceVersion)
		}
	})
	t.Run("from a version the API server no longer serves, everything again", func(t *testing.T) {
		next := start(t, cmdutil.Watch{From: "1"})
		// Listed again, both are reported as added, in the list's order (by name).
		if before := next("before", false); len(before) != 1 || before[0] != "after" {
			t.Errorf("events before before's: %v; want after's alone", before)
		}
	})
	t.Run("without a version, every object first, then changes and deletions; by name", func(t *testing.T) {
		next := start(t, cmdutil.Watch{Options: []client.ListOption{client.MatchingFields{"metadata.name": "after"}}})
		if before := next("after", false); len(before) != 0 {
			t.Errorf("events before after's: %v; want none (the watch selects after alone)", before)
		}
		tj := &trainer.TrainJob{}
		for _, name := range []string{"before", "after"} {
			if err := f.c.Get(t.Context(), client.ObjectKey{Namespace: f.ns, Name: name}, tj); err != nil {
				t.Fatal(err)
			}
			if err := f.c.Delete(t.Context(), tj); err != nil {
				t.Fatal(err)
			}
		}
		if before := next("after", true); len(before) != 0 {
			t.Errorf("events before after's deletion: %v; want none", before)
		}
	})
	cfg := rest.CopyConfig(c.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "nobody"}
	nobody, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("a kind the user may not watch: told once, then stopped", func(t *testing.T) {
		var got []cmdutil.Event
		done, err := cmdutil.Watch{Object: &trainer.TrainJob{}, Namespace: f.ns}.Start(t.Context(), nobody, func(e cmdutil.Event) { got = append(got, e) })
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("the watch of a user who may not list TrainJobs did not stop within 30s")
		}
		if len(got) != 1 || got[0].Object != nil || !apierrors.IsForbidden(got[0].Err) {
			t.Errorf("events %+v; want one, with a Forbidden error", got)
		}
	})
	// Changes returns once its watches have listed, with no signal for what they listed: a command that reads
	// after it reads what has not changed once, and a change after it signals.
	t.Run("Changes: once listed, no signal for the first list", func(t *testing.T) {
		f.trainJob("listed", 1, false)
		lists := &listsDone{WithWatch: wc}
		changes, err := cmdutil.Changes(t.Context(), lists, 0,
			cmdutil.Watch{Object: &trainer.TrainJob{}, Namespace: f.ns, Transform: cmdutil.StripManagedFields})
		if err != nil {
			t.Fatal(err)
		}
		if lists.done.Load() == 0 {
			t.Error("Changes returned before its watch had listed the TrainJobs")
		}
		select {
		case <-changes:
			t.Error("a change was signalled for what the watch first listed")
		default:
		}
		f.trainJob("changed", 1, false)
		select {
		case <-changes:
		case <-time.After(30 * time.Second):
			t.Fatal("no change signalled within 30s of a TrainJob created")
		}
	})
	t.Run("Changes: a watch the user may not list does not hold it back", func(t *testing.T) {
		returned := make(chan (<-chan struct{}), 1)
		go func() {
			changes, err := cmdutil.Changes(t.Context(), nobody, 0, cmdutil.Watch{Object: &trainer.TrainJob{}, Namespace: f.ns})
			if err != nil {
				t.Error(err)
			}
			returned <- changes
		}()
		select {
		case changes := <-returned:
			select {
			case <-changes:
				t.Error("a change was signalled for the refused watch: the read that follows says it")
			default:
			}
		case <-time.After(30 * time.Second):
			t.Fatal("Changes with a watch refused did not return within 30s")
		}
	})
}

// listsDone is a client that counts the lists it has answered, and keeps the limit each asked the API server for.
type listsDone struct {
	client.WithWatch
	done   atomic.Int32
	mu     sync.Mutex
	limits []int64
}

func (c *listsDone) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	defer c.done.Add(1)
	c.mu.Lock()
	c.limits = append(c.limits, (&client.ListOptions{}).ApplyOptions(opts).AsListOptions().Limit)
	c.mu.Unlock()
	return c.WithWatch.List(ctx, list, opts...)
}

// TestWatchListsByPages: a watch with a Transform lists what it watches 500 at a time, transforming each page as
// it comes, so that it never holds every object as the API server sends it (10 000 TrainJobs decoded at once
// are about 30 MB).
func TestWatchListsByPages(t *testing.T) {
	c, f := newFixture(t)
	const n = 501
	var g errgroup.Group
	g.SetLimit(8)
	for i := range n {
		g.Go(func() error {
			return f.c.Create(t.Context(), &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: fmt.Sprintf("tj-%03d", i)},
				Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: "torch-distributed"}}})
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	wc, err := client.NewWithWatch(c.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	lists := &listsDone{WithWatch: wc}
	synced := make(chan struct{})
	var seen atomic.Int32
	if _, err := (cmdutil.Watch{Object: &trainer.TrainJob{}, Namespace: f.ns, Transform: cmdutil.StripManagedFields,
		Synced: func() { close(synced) }}).Start(t.Context(), lists, func(cmdutil.Event) { seen.Add(1) }); err != nil {
		t.Fatal(err)
	}
	select {
	case <-synced:
	case <-time.After(time.Minute):
		t.Fatal("the watch did not list within a minute")
	}
	lists.mu.Lock()
	defer lists.mu.Unlock()
	if got := seen.Load(); got != n || !slices.Equal(lists.limits, []int64{500, 500}) {
		t.Errorf("the first list of %d TrainJobs: %d reported, limits asked %v; want %d, in two pages of 500", n, got, lists.limits, n)
	}
}
