package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/dashboard"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/fit"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/stack"
)

// testDashboardInBrowser opens the dashboard in a real headless Chromium (Debian's, which `make tools`
// installs) driven by chromedp, on the API server c: the list shows the TrainJobs with their stages, a change
// of stage shows without a reload, a failed TrainJob's page shows its first failure and its rank grid, a
// read-only dashboard offers no action, the trainer's reports of progress and loss are charted as they come,
// and one with --allow-writes suspends and resumes. Every step waits on the DOM, with a deadline of its own.
// Screenshots of each view at 1440×900 and 390×844 are saved in the test's artifacts (go test -artifacts keeps
// them).
func testDashboardInBrowser(t *testing.T, c *cluster.Cluster) {
	browser := startBrowser(t)
	f := fixtureOn(t, c)
	tj := runningTrainJob(f, "llama")
	oom := failedTrainJob(f, "oom")
	// A rank that still runs beside the one that failed: the logs panel can leave it out.
	f.pod(oom, podState{rj: "node", rank: 1, node: "gpu-node-3", gpus: 8, phase: corev1.PodRunning, started: 72 * time.Second})
	other := runningTrainJob(f, "other")
	f.create(&trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "team-torch"}, Spec: minimalRuntimeSpec()})
	f.trainJob("described", 1, false, func(tj *trainer.TrainJob) {
		tj.Spec.RuntimeRef = trainer.RuntimeRef{Name: "team-torch", Kind: ptr.To(trainer.TrainingRuntimeKind)}
	})
	page := startDashboard(t, kubeArgs(c, f.ns)...)

	ctx := browser
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		inBrowser(t, ctx, browser, what, chromedp.Steps(steps...))
	}
	row := func(name, stage string) chromedp.CSS {
		return chromedp.CSS(`#trainjobs tr[data-name="` + name + `"] .stage[data-stage="` + stage + `"]`)
	}

	do("the list", chromedp.EmulateViewport(1440, 900), chromedp.Navigate(page.printed),
		chromedp.WaitVisible(row("llama", "Training")), chromedp.WaitVisible(row("oom", "Failed")),
		chromedp.WaitVisible(chromedp.CSS(`#live.live-ok`)))
	// A mark on the document: a reload would lose it.
	inBrowser(t, ctx, browser, "the mark", chromedp.Evaluate[string](`document.body.dataset.mark = "not reloaded"`))
	screenshots(t, browser, "list", "")

	tj.Status.Conditions = []metav1.Condition{condition(trainer.TrainJobComplete, "AllJobsCompleted", "jobset completed successfully", metav1.ConditionTrue, metav1.Now())}
	tj.Status.JobsStatus = []trainer.JobStatus{jobStatus("node", 0, 0, 1, 0)}
	f.updateStatus(tj)
	do("the change of stage", chromedp.WaitVisible(row("llama", "Complete")))
	if mark := inBrowser(t, ctx, browser, "the mark", chromedp.Evaluate[string](`document.body.dataset.mark || ""`)); mark != "not reloaded" {
		t.Errorf("the page was reloaded to show llama Complete (mark %q)", mark)
	}

	// The list's text filter (name, runtime, reason, queue), its stage filter and its sorting by a column, as
	// the user sees the rows.
	shows := func(what string, want ...string) {
		t.Helper()
		do(what, chromedp.Poll[chromedp.Void](`[...document.querySelectorAll("#trainjobs tr[data-name]")].map((r) => r.dataset.name).join() === `+
			strconv.Quote(strings.Join(want, ","))))
	}
	set := func(sel, value, event string) {
		t.Helper()
		inBrowser(t, ctx, browser, sel+" "+value, chromedp.Evaluate[bool](`(() => { const e = document.querySelector(`+strconv.Quote(sel)+`);
			e.value = `+strconv.Quote(value)+`; return e.dispatchEvent(new Event(`+strconv.Quote(event)+`)); })()`))
	}
	do("filter by name", chromedp.SendKeys(chromedp.CSS(`#filter`), "oo"))
	shows("the rows that hold oo", "oom")
	set("#filter", "team-torch", "input")
	shows("the rows whose runtime is team-torch", "described")
	set("#filter", "", "input")
	set("#stage-filter", "Failed", "change")
	shows("the Failed rows", "oom")
	set("#stage-filter", "", "change")
	sortBy := func(title string) {
		t.Helper()
		inBrowser(t, ctx, browser, "the column "+title, chromedp.Evaluate[bool](`(() => { const th = [...document.querySelectorAll("#trainjobs th")]
			.find((h) => h.textContent.trim() === `+strconv.Quote(title)+`); th.click(); return true; })()`))
	}
	sortBy("Name")
	shows("sorted by name", "described", "llama", "oom", "other")
	sortBy("Name")
	shows("sorted by name, descending", "other", "oom", "llama", "described")
	sortBy("Stage")
	shows("sorted by stage", "described", "other", "llama", "oom")

	do("a failed TrainJob", chromedp.EmulateViewport(1440, 900), chromedp.Click(chromedp.CSS(`#trainjobs tr[data-name="oom"] a`)),
		chromedp.WaitVisible(chromedp.CSS(`#detail .title .stage[data-stage="Failed"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#first-failure`)),
		chromedp.WaitVisible(chromedp.CSS(`.ranks .cell.pod-failed`)))
	// Polled: any push (a resync) draws the page again, and a card read in between is one being replaced.
	inBrowser(t, ctx, browser, `the first failure card with "OOMKilled", "137" and "gpu-node-2"`, chromedp.Poll[bool](
		`(() => { const t = (document.querySelector("#first-failure") || {}).innerText || "";
			return ["OOMKilled", "137", "gpu-node-2"].every((w) => t.includes(w)); })()`))
	// Each stage's dates and duration hold on one line beside its bar on a laptop's screen, whole.
	wrapped := inBrowser(t, ctx, browser, "the pipeline's dates", chromedp.Evaluate[[]string](`[...document.querySelectorAll(".pipeline-time")]
		.filter((e) => { const r = document.createRange(); r.selectNodeContents(e);
			return new Set([...r.getClientRects()].map((c) => Math.round(c.top))).size > 1 || e.scrollWidth > e.clientWidth; })
		.map((e) => e.textContent)`))
	if len(wrapped) > 0 {
		t.Errorf("at 1440×900 the pipeline's dates wrap over several lines or are cut: %q", wrapped)
	}
	if n := inBrowser(t, ctx, browser, "the actions", chromedp.Evaluate[int](`document.querySelectorAll("button.action").length`)); n != 0 {
		t.Errorf("a read-only dashboard shows %d action buttons", n)
	}
	// Its Jobs, pods and YAML; without a runtime snapshot, the page says why.
	do("the TrainJob's objects", chromedp.WaitVisible(chromedp.CSS(`#jobs tbody tr`)))
	for sel, want := range map[string]string{"#jobs": "oom-node-0", "#pods": "oom-node-0-0-x00", "#yaml-runtime": "no runtime snapshot",
		"#yaml-trainjob": "kind: TrainJob", "#yaml-jobset": "kind: JobSet"} {
		// Read in one step of the page's script: a push may draw the view again between a query and a read.
		if got := inBrowser(t, ctx, browser, sel, chromedp.Evaluate[string](`(document.querySelector(`+strconv.Quote(sel)+`) || {}).textContent || ""`)); !strings.Contains(got, want) {
			t.Errorf("%s lacks %q:\n%s", sel, want, got)
		}
	}
	screenshots(t, browser, "trainjob", "")

	// The logs panel: every rank, or only the failed ones; a grep.
	options := func() []string {
		t.Helper()
		return inBrowser(t, ctx, browser, "the log's ranks", chromedp.Evaluate[[]string](`[...document.querySelectorAll("#log-pod option")].slice(1).map((o) => o.value)`))
	}
	if got := options(); len(got) != 2 {
		t.Errorf("the logs panel offers %q, want both ranks of oom", got)
	}
	do("failed ranks only", chromedp.Click(chromedp.CSS(`#log-failed`)), chromedp.WaitVisible(chromedp.CSS(`#log-grep`)))
	if got := options(); len(got) != 1 || got[0] != "oom-node-0-0-x00" {
		t.Errorf("with failed ranks only the logs panel offers %q, want oom-node-0-0-x00", got)
	}

	// A TrainJob of 1 024 ranks, one of which failed: one cell per rank, all on one screen at 1440×900;
	// hovering a cell names its pod, rank and node; the failed rank is red, as the Failed stage is.
	const ranks = 1024
	wide := f.trainJob("wide", ranks, false, func(tj *trainer.TrainJob) { tj.Spec.Suspend = ptr.To(false) })
	wide.Status = trainer.TrainJobStatus{JobsStatus: []trainer.JobStatus{jobStatus("node", ranks-1, ranks-1, 0, 1)}}
	f.updateStatus(wide)
	f.jobSet(wide, "node")
	f.job(wide, "node", ranks, jobTimes{start: 10 * time.Second, end: -1})
	states := make([]podState, ranks)
	for i := range states {
		states[i] = podState{rj: "node", rank: i, node: fmt.Sprintf("gpu-node-%d", i/8), gpus: 8, phase: corev1.PodRunning, started: 20 * time.Second}
	}
	const failedRank = 517
	states[failedRank].phase, states[failedRank].finished, states[failedRank].exitCode = corev1.PodFailed, time.Minute, 1
	f.pods(wide, states)
	inBrowser(t, ctx, browser, "open wide", chromedp.Evaluate[string](`location.hash = "#/trainjob/`+f.ns+`/wide"`))
	do("the 1024-rank grid", chromedp.Poll[chromedp.Void](fmt.Sprintf(`document.querySelectorAll(".ranks [data-pod]").length === %d`, ranks)))
	failedPod := fmt.Sprintf("wide-node-0-%d-x%d", failedRank, failedRank)
	grid := inBrowser(t, ctx, browser, "the grid's cells", chromedp.Evaluate[struct {
		Height, Viewport            float64
		Title, Colour, Red, Running string
	}](`(() => {
		const cells = [...document.querySelectorAll(".ranks [data-pod]")];
		const boxes = cells.map((c) => c.getBoundingClientRect());
		const failed = cells.find((c) => c.dataset.pod === `+strconv.Quote(failedPod)+`);
		const red = document.createElement("i");
		red.style.color = "var(--red)";
		document.body.append(red);
		const out = { height: Math.max(...boxes.map((b) => b.bottom)) - Math.min(...boxes.map((b) => b.top)), viewport: innerHeight,
			title: failed ? failed.title : "", colour: failed ? getComputedStyle(failed).backgroundColor : "",
			red: getComputedStyle(red).color, running: getComputedStyle(cells[0]).backgroundColor };
		red.remove();
		return out; })()`))
	for _, want := range []string{failedPod, "rank 517", "node gpu-node-64"} {
		if !strings.Contains(grid.Title, want) {
			t.Errorf("hovering rank %d's cell shows %q, want %q in it", failedRank, grid.Title, want)
		}
	}
	if grid.Colour != grid.Red || grid.Running == grid.Red {
		t.Errorf("the failed rank's cell is %s and a running rank's %s, want the failed one red (%s) and only it", grid.Colour, grid.Running, grid.Red)
	}
	if grid.Height > grid.Viewport {
		t.Errorf("the 1024 cells take %.0f px of height, more than one screen (%.0f px)", grid.Height, grid.Viewport)
	}
	screenshots(t, browser, "ranks", "")

	// describe-pipeline's table: what each plugin changed, of a TrainJob whose runtime is there.
	inBrowser(t, ctx, browser, "open described", chromedp.Evaluate[string](`location.hash = "#/trainjob/`+f.ns+`/described"`))
	do("describe-pipeline", chromedp.WaitVisible(chromedp.CSS(`#describe-table tbody tr, #describe-pipeline .error`)))
	described := inBrowser(t, ctx, browser, "describe-pipeline's table", chromedp.Text(chromedp.CSS(`#describe-pipeline`)))
	for _, want := range []string{"Build", "EnforceMLPolicy", "Torch", "ComponentBuilder", "builds "} {
		if !strings.Contains(described, want) {
			t.Errorf("describe-pipeline's table lacks %q:\n%s", want, described)
		}
	}

	// The trainer's reports (status.trainerStatus) are charted as the pushes bring them: its progress and its
	// loss over time, one point per report.
	inBrowser(t, ctx, browser, "open other", chromedp.Evaluate[string](`location.hash = "#/trainjob/`+f.ns+`/other"`))
	do("other's page", chromedp.WaitVisible(chromedp.CSS(`#detail .title .stage[data-stage="Training"]`)))
	reported := time.Now().Add(-time.Minute).Truncate(time.Second)
	for i, r := range []struct {
		pct  int32
		loss string
	}{{20, "2.5"}, {60, "1.25"}} {
		other.Status.TrainerStatus = &trainer.TrainerStatus{ProgressPercentage: ptr.To(r.pct), Metrics: []trainer.Metric{{Name: "loss", Value: r.loss}},
			LastUpdatedTime: metav1.NewTime(reported.Add(time.Duration(i) * 30 * time.Second))}
		f.updateStatus(other)
		do(fmt.Sprintf("report %d charted", i+1), chromedp.Poll[chromedp.Void](fmt.Sprintf(`document.querySelectorAll("#chart-percentage circle").length === %d`, i+1)))
	}
	for chart, want := range map[string][]string{"#chart-percentage": {"20", "60"}, "#chart-trainer-loss": {"2.5", "1.25"}} {
		got := inBrowser(t, ctx, browser, chart, chromedp.Evaluate[[]string](`[...document.querySelectorAll("`+chart+` circle")].map((c) => c.dataset.y)`))
		if !slices.Equal(got, want) {
			t.Errorf("%s charts %q, want %q", chart, got, want)
		}
	}
	screenshots(t, browser, "charts", "")

	// With --allow-writes the page suspends and resumes, and shows each change of stage as it happens.
	rw := startDashboard(t, withArgs(kubeArgs(c, f.ns), "--allow-writes")...)
	stage := func(s string) chromedp.Action[chromedp.Void] {
		return chromedp.WaitVisible(chromedp.CSS(`#detail .title .stage[data-stage="` + s + `"]`))
	}
	// The views are drawn again at each push: a button is clicked in the page, at once, not through a node
	// that a push may have replaced in between.
	click := func(sel string) chromedp.Action[chromedp.Void] {
		return chromedp.Steps(chromedp.WaitVisible(chromedp.CSS(sel)), chromedp.Func(func(ctx context.Context, target *chromedp.Target) error {
			_, err := chromedp.Evaluate[bool](`document.querySelector(`+strconv.Quote(sel)+`).click() === undefined`)(ctx, target)
			return err
		}))
	}
	do("a TrainJob with --allow-writes", chromedp.EmulateViewport(1440, 900), chromedp.Navigate(rw.printed),
		chromedp.WaitVisible(row("other", "Training")))
	inBrowser(t, ctx, browser, "open other", chromedp.Evaluate[string](`location.hash = "#/trainjob/`+f.ns+`/other"`))
	do("suspend", stage("Training"),
		click(`button.action[data-action="suspend"]`), stage("Suspended"))
	if !f.suspended("other") {
		t.Error("the page showed other Suspended, but it is not")
	}
	do("resume", click(`button.action[data-action="resume"]`), stage("Training"))
	if f.suspended("other") {
		t.Error("the page showed other Training again, but it is suspended")
	}

	// Rerun with a --set change opens the copy; Delete lists what goes with it as delete does, and deletes it.
	do("rerun", click(`button.action[data-action="rerun"]`), chromedp.WaitVisible(chromedp.CSS(`#rerun-set`)),
		chromedp.SendKeys(chromedp.CSS(`#rerun-set`), "nodes=2\nruntime=trainingruntime/team-torch"), chromedp.Click(chromedp.CSS(`button[data-action="confirm-rerun"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#notice`)), chromedp.WaitVisible(chromedp.CSS(`#detail .title h1`)))
	if got := inBrowser(t, ctx, browser, "the rerun's page", chromedp.Text(chromedp.CSS(`#detail .title h1`))); got != "other-rerun-1" ||
		ptr.Deref(f.get("other-rerun-1").Spec.Trainer.NumNodes, 0) != 2 {
		t.Errorf("after the rerun the page shows %q, want other-rerun-1, created on 2 nodes", got)
	}
	do("delete", click(`button.action[data-action="delete"]`), chromedp.WaitVisible(chromedp.CSS(`#confirm-delete pre.listing`)))
	if got := inBrowser(t, ctx, browser, "the delete's listing", chromedp.Text(chromedp.CSS(`#confirm-delete pre.listing`))); !strings.Contains(got, "trainjob/other-rerun-1 (") {
		t.Errorf("the delete's confirmation lists %q, want other-rerun-1 as delete lists it", got)
	}
	do("confirm the delete", chromedp.Click(chromedp.CSS(`button[data-action="confirm-delete"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#notice`)), chromedp.WaitVisible(row("other", "Training")))
	if f.exists("other-rerun-1") {
		t.Error("the page confirmed the delete, but other-rerun-1 is still there")
	}
	if n := inBrowser(t, ctx, browser, "the list", chromedp.Evaluate[int](`document.querySelectorAll('#trainjobs tr[data-name="other-rerun-1"]').length`)); n != 0 {
		t.Error("the list still shows other-rerun-1 after its delete")
	}
}

// startBrowser starts a headless Chromium at 1440×900 for t (skipped where there is none), and returns the
// context of its tab.
func startBrowser(t *testing.T) context.Context {
	t.Helper()
	chromium := cluster.RequireChromium(t)
	browser, stop := stack.Chromium(t.Context(), chromium)
	t.Cleanup(stop)
	// The first action starts the browser, which a step's deadline (inBrowser) must not stop.
	if err := chromedp.Do(browser); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return browser
}

// testDashboardGPUsInBrowser opens the GPUs view of the dashboard on TestFit's full cluster c, whose GPU nodes
// are taken by another team's pods (gpu-node-0, gpu-node-2) and by TrainJob llama of ns (gpu-node-1): each
// node shows its GPUs used and who holds them (the pod on gpu-node-3 with llama's label but not llama's as a
// bare pod), and llama's YAML pasted says it does not fit now, as fit -f
// says. Then llama's page charts the loss its rank prints in its log.
func testDashboardGPUsInBrowser(t *testing.T, c *cluster.Cluster, ns string) {
	browser := startBrowser(t)
	if err := c.WritePodLog(t.Context(), ns, "llama-node-0-0-x01", "train", "step 1 loss 2.0", "step 2 loss 1.0", "step 3 loss 0.5"); err != nil {
		t.Fatal(err)
	}
	page := startDashboard(t, kubeArgs(c, ns)...)
	testDashboardGPUs(t, page, ns)
	ctx := browser
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		inBrowser(t, ctx, browser, what, chromedp.Steps(steps...))
	}
	node := func(name string) string { return `#gpu-nodes tr[data-node="` + name + `"]` }
	do("the GPUs view", chromedp.Navigate(page.printed), chromedp.WaitVisible(chromedp.CSS(`#trainjobs`)),
		chromedp.Click(chromedp.CSS(`#nav-gpus`)), chromedp.WaitVisible(chromedp.CSS(node(cluster.GPUNodeName(3)))))
	for name, want := range map[string][]string{
		cluster.GPUNodeName(0): {"0 of 8 free", "pod team-b/busy-on-" + cluster.GPUNodeName(0), "8 GPUs", "0 of 8 free"},
		cluster.GPUNodeName(1): {"0 of 8 free", ns + "/llama", "8 GPUs"},
		// The pod that only carries llama's JobSet label is no TrainJob's: a bare pod.
		cluster.GPUNodeName(3): {"0 of 8 free", "pod " + ns + "/llama-node-0-1-stray", "8 GPUs"},
	} {
		got := inBrowser(t, ctx, browser, name, chromedp.Text(chromedp.CSS(node(name))))
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("the GPUs view's row of %s lacks %q: %s", name, w, got)
			}
		}
	}
	yaml, err := os.ReadFile(filepath.Join("testdata", "fit", "four-nodes.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	do("fit a pasted TrainJob", chromedp.SetValue(chromedp.CSS(`#fit-yaml`), string(yaml)), chromedp.Click(chromedp.CSS(`#fit-check`)),
		chromedp.WaitVisible(chromedp.CSS(`#fit-verdict, #fit-result .error`)))
	if got := inBrowser(t, ctx, browser, "the verdict", chromedp.Text(chromedp.CSS(`#fit-result`))); !strings.Contains(got, "does not fit now") ||
		slices.Contains(strings.Split(got, "\n"), "null") {
		t.Errorf("the pasted four-nodes.yaml: %s, want it not to fit now (and no line \"null\")", got)
	}

	screenshots(t, browser, "gpus", "")

	inBrowser(t, ctx, browser, "open llama", chromedp.Evaluate[string](`location.hash = "#/trainjob/`+ns+`/llama"`))
	do("llama's loss charted", chromedp.Poll[chromedp.Void](`document.querySelectorAll("#chart-metric-lines circle").length === 3`))
	if got := inBrowser(t, ctx, browser, "the loss", chromedp.Evaluate[[]string](`[...document.querySelectorAll("#chart-metric-lines circle")].map((c) => c.dataset.x + ":" + c.dataset.y)`)); !slices.Equal(got, []string{"1:2", "2:1", "3:0.5"}) {
		t.Errorf("llama's loss is charted at %q, want 1:2, 2:1, 3:0.5", got)
	}

	// The logs panel follows: a click on the rank's cell opens its log, and a line the rank writes next shows
	// without a reload.
	pod := "llama-node-0-0-x01"
	logHolds := func(line string) chromedp.Action[chromedp.Void] {
		return chromedp.Poll[chromedp.Void](`(document.querySelector("#log") || {}).textContent.includes(` + strconv.Quote(line) + `)`)
	}
	do("llama's log", chromedp.Click(chromedp.CSS(`.ranks [data-pod="`+pod+`"]`)), logHolds("step 3 loss 0.5"))
	if !inBrowser(t, ctx, browser, "follow", chromedp.Evaluate[bool](`document.querySelector("#log-follow").checked`)) {
		t.Error("the logs panel does not follow by default")
	}
	inBrowser(t, ctx, browser, "the mark", chromedp.Evaluate[string](`document.body.dataset.mark = "not reloaded"`))
	if err := c.WritePodLog(t.Context(), ns, pod, "train", "step 4 loss 0.25"); err != nil {
		t.Fatal(err)
	}
	do("the line written next", logHolds("step 4 loss 0.25"))
	if mark := inBrowser(t, ctx, browser, "the mark", chromedp.Evaluate[string](`document.body.dataset.mark || ""`)); mark != "not reloaded" {
		t.Errorf("the page was reloaded to show the log's new line (mark %q)", mark)
	}
	screenshots(t, browser, "logs", "#log")

	// The log's API as the panel asks it: grep keeps only the matching lines; after a restart, previous=1 is the
	// container before; a pod not of llama's namespace, or only labelled as llama's, is not read; an invalid
	// expression is refused.
	if err := c.RestartContainer(t.Context(), ns, pod, "train", 1); err != nil {
		t.Fatal(err)
	}
	if err := c.WritePodLog(t.Context(), ns, pod, "train", "step 5 loss 0.2", "checkpoint saved"); err != nil {
		t.Fatal(err)
	}
	logPath := "/api/trainjobs/" + ns + "/llama/log?pod="
	for _, tc := range []struct {
		query string
		code  int
		want  string
	}{
		{pod, http.StatusOK, "step 5 loss 0.2\ncheckpoint saved\n"},
		{pod + "&grep=" + url.QueryEscape("^step"), http.StatusOK, "step 5 loss 0.2\n"},
		{pod + "&previous=1", http.StatusOK, "step 1 loss 2.0\nstep 2 loss 1.0\nstep 3 loss 0.5\nstep 4 loss 0.25\n"},
		{pod + "&grep=" + url.QueryEscape("(unclosed"), http.StatusBadRequest, ""},
		{"busy-on-" + cluster.GPUNodeName(0), http.StatusNotFound, ""},
		// It carries llama's JobSet label, but no Job of llama's JobSet controls it.
		{"llama-node-0-1-stray", http.StatusNotFound, ""},
	} {
		if code, body := page.do(t, http.MethodGet, logPath+tc.query, nil); code != tc.code || tc.code == http.StatusOK && body != tc.want {
			t.Errorf("GET %s: %d %q, want %d %q", logPath+tc.query, code, body, tc.code, tc.want)
		}
	}
}

// screenshots saves the view shown in browser at 1440×900 and 390×844 in the test's artifacts as
// VIEW-WxH.png (go test -artifacts keeps them), scrolled to the element of selector at, when given.
func screenshots(t *testing.T, browser context.Context, view, at string) {
	t.Helper()
	for _, size := range []struct{ w, h int64 }{{1440, 900}, {390, 844}} {
		inBrowser(t, browser, browser, "the viewport "+view, chromedp.Steps(chromedp.EmulateViewport(size.w, size.h), chromedp.WaitVisible(chromedp.CSS("main"))))
		if at != "" {
			inBrowser(t, browser, browser, "scroll to "+at, chromedp.Evaluate[bool](`document.querySelector(`+strconv.Quote(at)+`).scrollIntoView({ block: "center" }) === undefined`))
		}
		png := inBrowser(t, browser, browser, "a screenshot of "+view, chromedp.CaptureScreenshot())
		name := filepath.Join(t.ArtifactDir(), fmt.Sprintf("%s-%dx%d.png", view, size.w, size.h))
		if err := os.WriteFile(name, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// testDashboardGPUs reads the GPUs view's API of page, a dashboard of namespace ns on TestFit's cluster (see
// testDashboardGPUsInBrowser): every GPU node's GPUs as fit counts them, the extended resource's and the DRA
// devices its ResourceSlice publishes, and who holds them; and a pasted TrainJob placed as fit -f places it,
// answered read-only to the page itself only (its Origin), YAML without a TrainJob refused saying why.
func testDashboardGPUs(t *testing.T, page *dashboardPage, ns string) {
	t.Helper()
	code, body := page.do(t, http.MethodGet, "/api/gpus", nil)
	var got dashboard.GPUs
	if err := json.Unmarshal([]byte(body), &got); code != http.StatusOK || err != nil {
		t.Fatalf("GET /api/gpus: %d %v: %s", code, err, body)
	}
	gpuNode := func(i int, holder fit.GPUHolder) fit.NodeGPUs {
		return fit.NodeGPUs{Node: cluster.GPUNodeName(i), Product: cluster.GPUProductOf(i, 4), Resource: cluster.GPUResource,
			Allocatable: 8, Used: 8, Devices: 8, Holders: []fit.GPUHolder{holder}}
	}
	want := []fit.NodeGPUs{{Node: "cpu-node-0"}, {Node: "cpu-node-1"},
		gpuNode(0, fit.GPUHolder{Namespace: "team-b", Pod: "busy-on-" + cluster.GPUNodeName(0), GPUs: 8}),
		gpuNode(1, fit.GPUHolder{Namespace: ns, TrainJob: "llama", GPUs: 8}),
		gpuNode(2, fit.GPUHolder{Namespace: "team-b", Pod: "busy-on-" + cluster.GPUNodeName(2), GPUs: 8}),
		// The pod that only carries llama's JobSet label is no TrainJob's: a bare pod.
		gpuNode(3, fit.GPUHolder{Namespace: ns, Pod: "llama-node-0-1-stray", GPUs: 8}),
	}
	if len(got.Nodes) != len(want) {
		t.Fatalf("the GPUs view's nodes: %+v, want %+v", got.Nodes, want)
	}
	for i, w := range want {
		g := got.Nodes[i]
		if g.Node != w.Node || g.Product != w.Product || g.Resource != w.Resource || g.Allocatable != w.Allocatable || g.Used != w.Used ||
			g.Free != w.Free || g.Devices != w.Devices || g.DevicesAllocated != w.DevicesAllocated || !slices.Equal(g.Holders, w.Holders) {
			t.Errorf("the GPUs view's node %d: %+v, want %+v", i, g, w)
		}
	}

	yaml, err := os.ReadFile(filepath.Join("testdata", "fit", "four-nodes.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	code, body = page.do(t, http.MethodPost, "/api/fit", withBody(string(yaml)))
	var placed dashboard.FitResult
	if err := json.Unmarshal([]byte(body), &placed); code != http.StatusOK || err != nil || placed.Fit == nil ||
		placed.Fit.Verdict != fit.NotNow || placed.Fit.Pods != 4 || placed.Fit.FitNow != 0 || placed.Fit.FitEmpty != 4 || len(placed.Fit.ReplicatedJobs) != 1 {
		t.Errorf("POST /api/fit four-nodes.yaml: %d %s; want it placed as fit -f: 4 pods, none fits now, all would on emptied nodes", code, body)
	}
	noOrigin := func(r *http.Request) { withBody(string(yaml))(r); r.Header.Del("Origin") }
	if code, body := page.do(t, http.MethodPost, "/api/fit", noOrigin); code != http.StatusForbidden {
		t.Errorf("POST /api/fit without an Origin: %d %s, want 403", code, body)
	}
	if code, body := page.do(t, http.MethodPost, "/api/fit", withBody("kind: ConfigMap\n")); code != http.StatusBadRequest || !strings.Contains(body, "TrainJob") {
		t.Errorf("POST /api/fit of a ConfigMap: %d %s, want 400 saying it holds no TrainJob", code, body)
	}
}

// browserStep bounds one step in the browser: a step that does not end fails naming itself.
const browserStep = time.Minute

// inBrowser runs action in the page of ctx, within browserStep, and returns its value; on error it fails t
// with the page's HTML.
func inBrowser[T any](t *testing.T, ctx, browser context.Context, what string, action chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, browserStep)
	defer cancel()
	v, err := chromedp.Run(ctx, action)
	if err != nil {
		failInBrowser(t, browser, what, err)
	}
	return v
}

// failInBrowser fails t, saying what was waited for and what the page holds.
func failInBrowser(t *testing.T, browser context.Context, what string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(browser, 10*time.Second)
	defer cancel()
	html, _ := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("body")))
	t.Fatalf("%s: %v\npage:\n%s", what, err, html)
}
