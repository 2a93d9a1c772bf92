package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/dashboard"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/stack"
)

// dashboardPage is a running `kubectl trainjob dashboard` and a browser's client of it: it has opened the
// printed URL, so it holds the token's cookie.
type dashboardPage struct {
	// printed is the URL the command printed, with its token.
	printed string
	base    *url.URL
	client  *http.Client
}

// startDashboard runs `kubectl trainjob dashboard ARGS…` until the test ends and opens the URL it prints.
func startDashboard(t *testing.T, args ...string) *dashboardPage {
	t.Helper()
	return startDashboardWith(t, cmdutil.NewFactory(), args...)
}

// startDashboardWith is startDashboard with the factory f.
func startDashboardWith(t *testing.T, f cmdutil.Factory, args ...string) *dashboardPage {
	t.Helper()
	p, _ := startDashboardCmd(t, f, dashboard.NewCmdDashboard, args...)
	return p
}

// startDashboardCmd is startDashboardWith of the dashboard command cmd makes; it returns the command running too.
func startDashboardCmd(t *testing.T, f cmdutil.Factory, cmd plugin.CommandAdder, args ...string) (*dashboardPage, *Started) {
	t.Helper()
	s := StartWith(t, f, "", []plugin.CommandAdder{cmd}, append([]string{"dashboard", "--port", "0"}, args...)...)
	s.WaitForOutput(t, "Press Ctrl-C")
	printed := regexp.MustCompile(`http://\S+`).FindString(s.out.String())
	u, err := url.Parse(printed)
	if err != nil || u.Query().Get("token") == "" {
		t.Fatalf("dashboard printed no URL with a token: %q", s.out.String())
	}
	jar, _ := cookiejar.New(nil)
	p := &dashboardPage{printed: printed, base: &url.URL{Scheme: u.Scheme, Host: u.Host}, client: &http.Client{Jar: jar}}
	resp, err := p.client.Get(printed)
	if err != nil {
		t.Fatal(err)
	}
	page := readBody(t, resp)
	if resp.StatusCode != http.StatusOK || resp.Request.URL.RawQuery != "" || !strings.Contains(page, `<script src="/assets/app.js"`) {
		t.Fatalf("GET %s: status %d at %s, want the page without the token in its URL:\n%s", printed, resp.StatusCode, resp.Request.URL, page)
	}
	return p, s
}

// dashboardOpening is `dashboard` whose browser opener (--open) sends the URL it is asked to open to opened.
func dashboardOpening(opened chan<- string) plugin.CommandAdder {
	return func(f cmdutil.Factory, s cmdutil.Streams) *cobra.Command {
		o := dashboard.NewDashboardOptions(s)
		o.OpenURL = func(u string) error {
			opened <- u
			return nil
		}
		return dashboard.NewCmdDashboardWithOptions(f, o)
	}
}

// nonLoopbackIP is an address of this machine that is not loopback, nil when it has none.
func nonLoopbackIP(t *testing.T) net.IP {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP
		}
	}
	return nil
}

func readBody(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// do sends a request as the page would (its cookie), changed by edit; it returns the status and body.
func (p *dashboardPage) do(t *testing.T, method, path string, edit func(*http.Request)) (int, string) {
	t.Helper()
	return p.doWith(t, p.client, method, path, edit)
}

// doWith is do with client: one without the page's cookie is any other program on the machine.
func (p *dashboardPage) doWith(t *testing.T, client *http.Client, method, path string, edit func(*http.Request)) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, p.base.String()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Origin", p.base.String())
	if edit != nil {
		edit(req)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, readBody(t, resp)
}

// withBody sets a request's JSON body.
func withBody(body string) func(*http.Request) {
	return func(r *http.Request) {
		r.Body = io.NopCloser(strings.NewReader(body))
		r.ContentLength = int64(len(body))
		r.Header.Set("Content-Type", "application/json")
	}
}

// sse is the stream of server-sent events of path: each event's name and data.
func (p *dashboardPage) sse(t *testing.T, path string) <-chan stack.Event {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	events, err := stack.Events(ctx, p.client, p.base.String()+path)
	if err != nil {
		t.Fatal(err)
	}
	return events
}

// stageIn is the stage of TrainJob name in a list the dashboard sent, "" when it is not there.
func stageIn(t *testing.T, data, name string) string {
	t.Helper()
	for _, r := range cellsOf(t, data) {
		if r["name"] == name {
			return r["stage"].(string)
		}
	}
	return ""
}

// cellsOf are the rows of a list the dashboard sent, each its cells by the name of their column.
func cellsOf(t *testing.T, data string) []map[string]any {
	t.Helper()
	var l dashboard.TrainJobs
	if err := json.Unmarshal([]byte(data), &l); err != nil {
		t.Fatalf("%v: %s", err, data)
	}
	rows, err := l.Cells()
	if err != nil {
		t.Fatalf("%v: %s", err, data)
	}
	return rows
}

// testDashboard serves the dashboard against a real API server c (TestLifecycle's, to start no other): it lists the TrainJobs with list's stages,
// pushes a change of stage over server-sent events without a reload, shows a TrainJob as status does, refuses
// requests without the token, naming it by another DNS name or from another site, refuses writes unless
// started with --allow-writes and then suspends and resumes, and shows a read the user's RBAC refuses as
// forbidden.
func testDashboard(t *testing.T, c *cluster.Cluster) {
	f := fixtureOn(t, c)
	tj := runningTrainJob(f, "llama")
	runningTrainJob(f, "other")
	kube := kubeArgs(c, f.ns)
	page := startDashboard(t, kube...)

	t.Run("list", func(t *testing.T) {
		code, body := page.do(t, http.MethodGet, "/api/trainjobs", nil)
		if code != http.StatusOK || stageIn(t, body, "llama") != "Training" || stageIn(t, body, "other") != "Training" {
			t.Errorf("GET /api/trainjobs: %d %s; want llama and other Training", code, body)
		}
	})

	t.Run("trainjob", func(t *testing.T) {
		code, body := page.do(t, http.MethodGet, "/api/trainjobs/"+f.ns+"/llama", nil)
		var got dashboard.TrainJob
		if err := json.Unmarshal([]byte(body), &got); code != http.StatusOK || err != nil {
			t.Fatalf("GET the TrainJob: %d %v: %s", code, err, body)
		}
		if got.Summary.Stage != "Training" || !strings.Contains(got.TrainJobYAML, "kind: TrainJob") || strings.Contains(got.TrainJobYAML, "managedFields") {
			t.Errorf("stage %s, YAML:\n%s\nwant Training and the TrainJob without managedFields", got.Summary.Stage, got.TrainJobYAML)
		}
	})

	t.Run("stage-change-pushed", func(t *testing.T) {
		events := page.sse(t, "/api/watch")
		seen := func(want string) {
			t.Helper()
			deadline := time.After(time.Minute)
			var last stack.Event
			for {
				select {
				case e := <-events:
					last = e
					if e.Name == "trainjobs" && stageIn(t, e.Data, "llama") == want {
						return
					}
				case <-deadline:
					t.Fatalf("no event with llama %s; last: %s %s", want, last.Name, last.Data)
				}
			}
		}
		seen("Training")
		tj.Status.Conditions = []metav1.Condition{condition(trainer.TrainJobComplete, "AllJobsCompleted", "jobset completed successfully", metav1.ConditionTrue, metav1.Now())}
		tj.Status.JobsStatus = []trainer.JobStatus{jobStatus("node", 0, 0, 1, 0)}
		f.updateStatus(tj)
		seen("Complete")
	})

	// Every page of the list reads the dashboard's one watch of the TrainJobs: two pages and a change cost one
	// watch and no list of the TrainJobs (at 10 000 TrainJobs a list is seconds of the API server's).
	t.Run("one-watch", func(t *testing.T) {
		requests := &requestLog{}
		shared := startDashboardWith(t, requests.factory(), kube...)
		pages := []<-chan stack.Event{shared.sse(t, "/api/watch"), shared.sse(t, "/api/watch")}
		pushed := func(what string, want func(stack.Event) bool) {
			t.Helper()
			for i, events := range pages {
				deadline := time.After(time.Minute)
				for done := false; !done; {
					select {
					case e := <-events:
						done = e.Name == "trainjobs" && want(e)
					case <-deadline:
						t.Fatalf("page %d: no list with %s", i, what)
					}
				}
			}
		}
		pushed("llama", func(e stack.Event) bool { return stageIn(t, e.Data, "llama") != "" })
		f.create(&trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "late", Namespace: f.ns}, Spec: trainer.TrainJobSpec{RuntimeRef: tj.Spec.RuntimeRef}})
		pushed("late", func(e stack.Event) bool { return stageIn(t, e.Data, "late") != "" })
		var watches, lists []string
		for _, r := range requests.take() {
			if path, _, _ := strings.Cut(r, "?"); strings.HasSuffix(path, "/trainjobs") {
				if strings.Contains(r, "watch=true") {
					watches = append(watches, r)
				} else {
					lists = append(lists, r)
				}
			}
		}
		if len(watches) != 1 || len(lists) > 1 {
			t.Errorf("two pages of the list and a new TrainJob: watches of the TrainJobs %q, lists %q; want one watch, at most its first list", watches, lists)
		}
	})

	// A TrainJob's page that does not change is read and pushed once: what the server's watches of the
	// TrainJob, its pods and the Events first list is no change. The push after the first is that of a change
	// made after it (the barrier): pushing each change at once, a second read for what the watches first listed
	// would come before it, without the change.
	t.Run("pushed-once", func(t *testing.T) {
		runningTrainJob(f, "steady")
		immediate := func(fc cmdutil.Factory, s cmdutil.Streams) *cobra.Command {
			o := dashboard.NewDashboardOptions(s)
			o.Batch = 0
			return dashboard.NewCmdDashboardWithOptions(fc, o)
		}
		at, _ := startDashboardCmd(t, cmdutil.NewFactory(), immediate, kube...)
		events := at.sse(t, "/api/watch/"+f.ns+"/steady")
		next := func(what string) dashboard.TrainJob {
			t.Helper()
			select {
			case e := <-events:
				var got dashboard.TrainJob
				if err := json.Unmarshal([]byte(e.Data), &got); e.Name != "trainjob" || err != nil {
					t.Fatalf("%s: event %s %v: %s; want the TrainJob's page", what, e.Name, err, e.Data)
				}
				return got
			case <-time.After(time.Minute):
				t.Fatalf("%s: no push within a minute", what)
			}
			return dashboard.TrainJob{}
		}
		if first := next("the first push"); strings.Contains(first.TrainJobYAML, "barrier") {
			t.Fatalf("the first push holds the barrier, not yet made:\n%s", first.TrainJobYAML)
		}
		steady := f.get("steady")
		steady.Annotations = map[string]string{"barrier": "made after the first push"}
		if err := f.c.Update(t.Context(), steady); err != nil {
			t.Fatal(err)
		}
		if second := next("the push after the barrier"); !strings.Contains(second.TrainJobYAML, "barrier: made after the first push") {
			t.Errorf("the push after the first lacks the change made after it: a second push of a TrainJob that did not change:\n%s", second.TrainJobYAML)
		}
	})

	// Changes that come together are pushed once: several TrainJobs changed at once never show half changed.
	t.Run("updates-batched", func(t *testing.T) {
		const n = 8
		tjs := make([]*trainer.TrainJob, n)
		for i := range tjs {
			tjs[i] = runningTrainJob(f, fmt.Sprintf("batch-%d", i))
		}
		events := page.sse(t, "/api/watch")
		// progress is the progress of each batch-N in a pushed list, -1 where it reports none.
		progress := func(data string) []int32 {
			t.Helper()
			rows := cellsOf(t, data)
			got := make([]int32, n)
			for i := range got {
				got[i] = -1
				for _, r := range rows {
					if pct, ok := r["percentage"].(float64); ok && r["name"] == tjs[i].Name {
						got[i] = int32(pct)
					}
				}
			}
			return got
		}
		// each waits for a push in which every batch-N reports pct, and returns the pushes before it in which
		// some did and some did not.
		each := func(pct int32) (halfway [][]int32) {
			t.Helper()
			deadline := time.After(time.Minute)
			for {
				select {
				case e := <-events:
					if e.Name != "trainjobs" {
						continue
					}
					got := progress(e.Data)
					changed := len(slices.DeleteFunc(slices.Clone(got), func(p int32) bool { return p != pct }))
					switch changed {
					case n:
						return halfway
					case 0:
					default:
						halfway = append(halfway, got)
					}
				case <-deadline:
					t.Fatalf("no push with every batch-N at %d%%", pct)
				}
			}
		}
		each(-1)
		// The writes must all land within the server's batch (200 ms) for it to gather them: a round whose writes
		// took longer, under load, proves nothing and is done again.
		for round := int32(1); round <= 3; round++ {
			begin := time.Now()
			var g errgroup.Group
			for _, tj := range tjs {
				tj.Status.TrainerStatus = &trainer.TrainerStatus{ProgressPercentage: ptr.To(round * 10), LastUpdatedTime: metav1.Now()}
				g.Go(func() error { return f.c.Status().Update(t.Context(), tj) })
			}
			if err := g.Wait(); err != nil {
				t.Fatal(err)
			}
			took := time.Since(begin)
			halfway := each(round * 10)
			if took > 100*time.Millisecond {
				t.Logf("round %d: the %d writes took %v, too long to tell", round, n, took)
				continue
			}
			if len(halfway) > 0 {
				t.Errorf("%d TrainJobs changed at once (within %v) were pushed in several lists, some changed and some not: %v", n, took, halfway)
			}
			return
		}
		t.Skip("under this load no round of writes landed within the server's batch")
	})

	t.Run("open", func(t *testing.T) {
		opened := make(chan string, 1)
		shown, _ := startDashboardCmd(t, cmdutil.NewFactory(), dashboardOpening(opened), withArgs(kube, "--open")...)
		// The command opens the browser before it serves: the page was served, so it has.
		select {
		case u := <-opened:
			if u != shown.printed {
				t.Errorf("--open opened %s, want the URL printed, %s", u, shown.printed)
			}
		default:
			t.Errorf("--open opened no browser")
		}
		startDashboardCmd(t, cmdutil.NewFactory(), dashboardOpening(opened), kube...)
		select {
		case u := <-opened:
			t.Errorf("without --open the command opened %s", u)
		default:
		}
	})

	t.Run("address", func(t *testing.T) {
		ip := nonLoopbackIP(t)
		reach := func(p *dashboardPage) error {
			t.Helper()
			if ip == nil {
				return nil
			}
			conn, err := net.DialTimeout("tcp", net.JoinHostPort(ip.String(), p.base.Port()), 10*time.Second)
			if err == nil {
				_ = conn.Close()
			}
			return err
		}
		// By default only loopback: the machine's other address does not answer.
		loopback, s := startDashboardCmd(t, cmdutil.NewFactory(), dashboard.NewCmdDashboard, kube...)
		if loopback.base.Hostname() != "127.0.0.1" || strings.Contains(s.errOut.String(), "warning") {
			t.Errorf("by default the dashboard serves %s and warns %q, want 127.0.0.1 and no warning", loopback.base, s.errOut.String())
		}
		if err := reach(loopback); err == nil {
			t.Errorf("by default the dashboard answers on %s too, want loopback only", ip)
		}
		// --address 0.0.0.0: every address, with a warning; the URL printed is loopback's.
		every, s := startDashboardCmd(t, cmdutil.NewFactory(), dashboard.NewCmdDashboard, withArgs(kube, "--address", "0.0.0.0")...)
		if every.base.Hostname() != "127.0.0.1" || !strings.Contains(s.errOut.String(), "warning: listening on 0.0.0.0, not on loopback") {
			t.Errorf("--address 0.0.0.0 prints %s and warns %q, want a loopback URL and the warning", every.base, s.errOut.String())
		}
		if err := reach(every); err != nil {
			t.Errorf("--address 0.0.0.0 does not answer on %s: %v", ip, err)
		}
		if ip == nil {
			t.Log("this machine has no address but loopback: where the dashboard listens is not checked")
		}
		res := Run(t, "", []plugin.CommandAdder{dashboard.NewCmdDashboard}, withArgs(kube, "dashboard", "--address", "example.com")...)
		if res.Code == 0 || !strings.Contains(res.Stderr, `invalid --address "example.com"`) {
			t.Errorf("--address example.com: %s, want it refused", res)
		}
	})

	t.Run("refused", func(t *testing.T) {
		other := "/api/trainjobs/" + f.ns + "/other/"
		for _, tc := range []struct {
			name         string
			client       *http.Client
			method, path string
			edit         func(*http.Request)
			want         int
		}{
			{"no token", &http.Client{}, http.MethodGet, "/api/trainjobs", nil, http.StatusUnauthorized},
			{"DNS rebinding", page.client, http.MethodGet, "/api/trainjobs", func(r *http.Request) { r.Host = "attacker.example:" + page.base.Port() }, http.StatusForbidden},
			{"cross-site", page.client, http.MethodGet, "/api/trainjobs", func(r *http.Request) { r.Header.Set("Origin", "https://attacker.example") }, http.StatusForbidden},
			{"write without --allow-writes", page.client, http.MethodPost, other + "suspend", nil, http.StatusForbidden},
			{"delete's listing without --allow-writes", page.client, http.MethodGet, other + "delete", nil, http.StatusForbidden},
			{"delete without --allow-writes", page.client, http.MethodPost, other + "delete?uid=" + string(f.get("other").UID), nil, http.StatusForbidden},
			{"rerun without --allow-writes", page.client, http.MethodPost, other + "rerun", withBody(`{}`), http.StatusForbidden},
		} {
			t.Run(tc.name, func(t *testing.T) {
				path := tc.path
				code, body := page.doWith(t, tc.client, tc.method, path, tc.edit)
				if code != tc.want {
					t.Errorf("%s %s: %d %s, want %d", tc.method, path, code, body, tc.want)
				}
			})
		}
		if f.suspended("other") || !f.exists("other") || f.exists("other-rerun-1") {
			t.Error("the read-only dashboard suspended, deleted or reran other")
		}
	})

	t.Run("allow-writes", func(t *testing.T) {
		rw := startDashboard(t, withArgs(kube, "--allow-writes")...)
		for _, action := range []string{"suspend", "resume"} {
			code, body := rw.do(t, http.MethodPost, "/api/trainjobs/"+f.ns+"/other/"+action, nil)
			if code != http.StatusOK || f.suspended("other") != (action == "suspend") {
				t.Errorf("POST %s: %d %s; suspended %t", action, code, body, f.suspended("other"))
			}
		}
		other := "/api/trainjobs/" + f.ns + "/other/"
		f.create(&trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "team-torch"}, Spec: minimalRuntimeSpec()})
		code, body := rw.do(t, http.MethodPost, other+"rerun", withBody(`{"set":["nodes=2","runtime=trainingruntime/team-torch"]}`))
		var rerun dashboard.Action
		if err := json.Unmarshal([]byte(body), &rerun); code != http.StatusOK || err != nil || rerun.Name != "other-rerun-1" ||
			!strings.Contains(rerun.Message, "other-rerun-1 created") {
			t.Fatalf("POST rerun --set nodes=2 --set runtime=trainingruntime/team-torch: %d %s; want other-rerun-1 created", code, body)
		}
		if copied := f.get("other-rerun-1"); ptr.Deref(copied.Spec.Trainer.NumNodes, 0) != 2 || copied.Annotations["trainer.kubeflow.org/rerun-of"] != "other" ||
			copied.Labels["team"] != "nlp" {
			t.Errorf("the rerun: %+v; want a rerun of other on 2 nodes with its labels", copied.ObjectMeta)
		}
		if code, body := rw.do(t, http.MethodPost, other+"rerun", withBody(`{"set":["gpus=8"]}`)); code != http.StatusUnprocessableEntity ||
			!strings.Contains(body, `invalid --set \"gpus=8\": gpus is not a flag create takes`) {
			t.Errorf("POST rerun --set gpus=8: %d %s; want 422 with rerun's message", code, body)
		}
		ownedObjects(f, f.get("other"))
		code, body = rw.do(t, http.MethodGet, other+"delete", nil)
		var listed dashboard.DeleteListing
		if err := json.Unmarshal([]byte(body), &listed); code != http.StatusOK || err != nil || listed.UID != f.get("other").UID ||
			!strings.Contains(listed.Listing, `These TrainJobs in namespace "`+f.ns+`" will be deleted with what they own (--cascade=background):`) ||
			!strings.Contains(listed.Listing, "trainjob/other (Training): ") || !strings.Contains(listed.Listing, "configmap/other-runtime-snapshot") ||
			strings.Contains(listed.Listing, "other-notes") {
			t.Fatalf("GET other's delete listing: %d %s; want other with its stage and what it owns (not other-notes), as delete lists it", code, body)
		}
		if code, body := rw.do(t, http.MethodPost, other+"delete", nil); code != http.StatusBadRequest || !f.exists("other") {
			t.Errorf("POST delete without the uid listed: %d %s; want 400 and other kept", code, body)
		}
		// A TrainJob deleted and created again under the name since it was listed is not the one confirmed.
		code, body = rw.do(t, http.MethodPost, other+"delete?uid=not-the-listed-one", nil)
		if code != http.StatusUnprocessableEntity || !strings.Contains(body, "deleted and created again since it was listed") || !f.exists("other") {
			t.Errorf("POST delete of another uid than other's: %d %s; want it refused and other kept", code, body)
		}
		code, body = rw.do(t, http.MethodPost, other+"delete?uid="+string(listed.UID), nil)
		if code != http.StatusOK || !strings.Contains(body, `trainjobs.trainer.kubeflow.org \"other\" deleted`) || f.exists("other") {
			t.Errorf("POST delete of the listed other: %d %s; want other deleted", code, body)
		}
	})

	t.Run("forbidden", func(t *testing.T) {
		bob := startDashboard(t, withArgs(kube, "--as", "bob")...)
		code, body := bob.do(t, http.MethodGet, "/api/trainjobs", nil)
		if code != http.StatusForbidden || !strings.Contains(body, `"forbidden":true`) || !strings.Contains(body, `cannot list resource`) {
			t.Errorf("GET /api/trainjobs as bob, who may read nothing: %d %s; want 403 forbidden with the API server's message", code, body)
		}
	})
}
