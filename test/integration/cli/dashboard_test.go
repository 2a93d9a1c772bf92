package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

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
	s := StartWith(t, f, "", []plugin.CommandAdder{dashboard.NewCmdDashboard}, append([]string{"dashboard", "--port", "0"}, args...)...)
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
	return p
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
	var l dashboard.TrainJobs
	if err := json.Unmarshal([]byte(data), &l); err != nil {
		t.Fatalf("%v: %s", err, data)
	}
	for _, r := range l.Items {
		if r.Name == name {
			return string(r.Stage)
		}
	}
	return ""
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
