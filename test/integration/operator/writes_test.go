package operator_test

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/integration/operator/internal/optest"
)

// request is an API request of the operator, as the tests count them: its
// verb (create, update, patch, apply, delete, get, list, watch), resource
// (with its subresource: trainjobs/status) and, for writes, whether the API
// server refused it.
type request struct {
	Verb, Resource string
	Failed         bool
}

func (r request) String() string {
	s := r.Verb + " " + r.Resource
	if r.Failed {
		s += " (failed)"
	}
	return s
}

func (r request) write() bool { return r.Verb != "get" && r.Verb != "list" && r.Verb != "watch" }

// requestCounter counts the in-process operator's requests by namespace;
// its transport is wrapped in TestMain.
type requestCounter struct {
	mu   sync.Mutex
	byNS map[string]map[request]int
}

var requests = &requestCounter{byNS: map[string]map[request]int{}}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		ns, r, ok := describe(req)
		if ok {
			r.Failed = r.write() && (err != nil || resp.StatusCode >= 300)
			c.mu.Lock()
			if c.byNS[ns] == nil {
				c.byNS[ns] = map[request]int{}
			}
			c.byNS[ns][r]++
			c.mu.Unlock()
		}
		return resp, err
	})
}

// describe tells the namespace and request of a namespaced resource's URL
// (/api/v1/namespaces/NS/RESOURCE[/NAME[/SUBRESOURCE]], /apis/G/V/…).
func describe(req *http.Request) (string, request, bool) {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	i := 0
	for i < len(parts) && parts[i] != "namespaces" {
		i++
	}
	if i+2 >= len(parts) {
		return "", request{}, false
	}
	ns, rest := parts[i+1], parts[i+2:]
	r := request{Resource: rest[0]}
	if len(rest) > 2 {
		r.Resource += "/" + rest[2]
	}
	named := len(rest) > 1
	switch req.Method {
	case http.MethodGet:
		switch {
		case named:
			r.Verb = "get"
		case req.URL.Query().Get("watch") == "true":
			r.Verb = "watch"
		default:
			r.Verb = "list"
		}
	case http.MethodPost:
		r.Verb = "create"
	case http.MethodPut:
		r.Verb = "update"
	case http.MethodPatch:
		r.Verb = "patch"
		if strings.HasPrefix(req.Header.Get("Content-Type"), "application/apply-patch") {
			r.Verb = "apply"
		}
	case http.MethodDelete:
		r.Verb = "delete"
	default:
		r.Verb = strings.ToLower(req.Method)
	}
	return ns, r, true
}

// of is a copy of the counts of namespace ns.
func (c *requestCounter) of(ns string) map[request]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.byNS[ns])
}

// writes are the operator's writes in a namespace between two counts, in
// words ("apply jobsets": 1): to objects, and to events apart; and its
// reads, which only the log shows (a read after a write depends on how far
// the cache lags).
type writes struct{ objects, events, reads map[string]int }

func (w writes) String() string {
	return fmt.Sprintf("objects %v, events %v (reads %v)", w.objects, w.events, w.reads)
}

func writesBetween(before, after map[request]int) writes {
	w := writes{objects: map[string]int{}, events: map[string]int{}, reads: map[string]int{}}
	for r, n := range after {
		if n -= before[r]; n == 0 {
			continue
		}
		switch {
		case !r.write():
			w.reads[r.String()] += n
		case r.Resource == "events":
			w.events[r.String()] += n
		default:
			w.objects[r.String()] += n
		}
	}
	return w
}

// settledWrites waits until the operator has processed everything that
// happened in ns (settle), and returns its writes there since before.
func settledWrites(t *testing.T, ns string, before map[request]int) writes {
	t.Helper()
	settle(t, ns)
	return writesBetween(before, requests.of(ns))
}

// settle waits until the operator has processed everything that happened in
// ns: its cache holds every TrainJob and JobSet of ns at the version the API
// server holds (their events have reached the TrainJob controller), then
// that controller is settled (they have been reconciled to the end). When
// those reconciles wrote, it goes round again.
func settle(t *testing.T, ns string) {
	t.Helper()
	deadline := time.Now().Add(optest.Timeout)
	for {
		live, err := versionsIn(t.Context(), env.Client, ns)
		if err != nil {
			t.Fatal(err)
		}
		optest.Eventually(t, "the operator's cache holds namespace "+ns+" as the API server does", func(ctx context.Context) error {
			cached, err := versionsIn(ctx, op.Cache(), ns)
			if err != nil {
				return err
			}
			if diff := cmp.Diff(live, cached); diff != "" {
				return fmt.Errorf("resourceVersions (-API server +cache):\n%s", diff)
			}
			return nil
		})
		optest.Settled(t)
		after, err := versionsIn(t.Context(), env.Client, ns)
		if err != nil {
			t.Fatal(err)
		}
		if maps.Equal(live, after) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the operator keeps writing in namespace %s after %v: resourceVersions %v, then %v", ns, optest.Timeout, live, after)
		}
	}
}

// versionsIn are the resourceVersions of the TrainJobs and JobSets of ns,
// keyed by kind and name: the objects whose changes the TrainJob controller
// reconciles here (it takes no other child's event but a snapshot's
// deletion).
func versionsIn(ctx context.Context, c client.Reader, ns string) (map[string]string, error) {
	versions := map[string]string{}
	var trainJobs trainer.TrainJobList
	if err := c.List(ctx, &trainJobs, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	for _, tj := range trainJobs.Items {
		versions["TrainJob "+tj.Name] = tj.ResourceVersion
	}
	var jobSets jobsetv1alpha2.JobSetList
	if err := c.List(ctx, &jobSets, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	for _, js := range jobSets.Items {
		versions["JobSet "+js.Name] = js.ResourceVersion
	}
	return versions, nil
}

func wantWrites(t *testing.T, what string, got writes, objects, events map[string]int) {
	t.Helper()
	t.Logf("%s: %v", what, got)
	if diff := cmp.Diff(objects, got.objects); diff != "" {
		t.Errorf("%s: object writes (-want +got):\n%s", what, diff)
	}
	if diff := cmp.Diff(events, got.events); diff != "" {
		t.Errorf("%s: event writes (-want +got):\n%s", what, diff)
	}
}

// touch changes a label of tj, which the operator does not read, and waits
// until a reconcile of tj has run the Build phase on that version (the
// probe of optest.Builds): tj is reconciled again with nothing to do.
func touch(t *testing.T, tj *trainer.TrainJob, value string) {
	t.Helper()
	touched := tj.DeepCopy()
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"labels":{"touched":%q}}}`, value))
	if err := env.Client.Patch(t.Context(), touched, patch); err != nil {
		t.Fatalf("label the TrainJob: %v", err)
	}
	optest.Eventually(t, "a reconcile of the labelled TrainJob", func(context.Context) error {
		return optest.BuiltVersion(key(tj), touched.ResourceVersion)
	})
}

// TestWrites counts the operator's writes over a TrainJob's life at its
// transport (issue 8: at most 3 per TrainJob with ComponentsCreated, none
// refused because the cache lagged, none for a TrainJob already as built).
func TestWrites(t *testing.T) {
	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	createTrainingRuntime(t, ns, "torch", torchSpec())
	// The runtime snapshot and the JobSet are created, not applied: a create
	// costs the API server less.
	creation := map[string]int{"create configmaps": 1, "create jobsets": 1, "update trainjobs/status": 1}
	oneEvent := map[string]int{"create events": 1}

	t.Run("running", func(t *testing.T) {
		before := requests.of(ns)
		tj := newTrainJob(ns, "running", trainer.TrainingRuntimeKind, "torch")
		create(t, tj)
		trainJobMatches(t, tj, "ComponentsCreated", hasConditions(componentsCreated))
		jobSetOf(t, tj)
		wantWrites(t, "creation", settledWrites(t, ns, before), creation, oneEvent)

		// What the JobSet controller reports before any of its Jobs runs
		// is what the TrainJob's status already says.
		before = requests.of(ns)
		cluster.SetJobSetStatus(t, env.Client, key(tj), optest.Timeout, func(s *jobsetv1alpha2.JobSetStatus) {
			s.ReplicatedJobsStatus = []jobsetv1alpha2.ReplicatedJobStatus{{Name: trainer.Node}}
		})
		wantWrites(t, "the JobSet controller's first status", settledWrites(t, ns, before), map[string]int{}, map[string]int{})

		before = requests.of(ns)
		touch(t, tj, "1")
		wantWrites(t, "a reconcile with nothing to do", settledWrites(t, ns, before), map[string]int{}, map[string]int{})
	})

	t.Run("suspended, then resumed", func(t *testing.T) {
		before := requests.of(ns)
		tj := newTrainJob(ns, "suspended", trainer.TrainingRuntimeKind, "torch")
		tj.Spec.Suspend = ptr.To(true)
		create(t, tj)
		trainJobMatches(t, tj, "Suspended", hasConditions(componentsCreated, suspended))
		jobSetOf(t, tj)
		wantWrites(t, "creation", settledWrites(t, ns, before), creation, map[string]int{"create events": 2})

		for _, value := range []string{"1", "2"} {
			before = requests.of(ns)
			touch(t, tj, value)
			wantWrites(t, "a reconcile of a suspended TrainJob as built", settledWrites(t, ns, before), map[string]int{}, map[string]int{})
		}

		before = requests.of(ns)
		resume(t, tj)
		trainJobMatches(t, tj, "Resumed", hasConditions(componentsCreated, resumed))
		jobSetResumed(t, tj)
		wantWrites(t, "resume", settledWrites(t, ns, before), map[string]int{"apply jobsets": 1, "update trainjobs/status": 1}, oneEvent)
	})
}
