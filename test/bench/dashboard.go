package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/kubectl-trainjob/kubectl-trainjob/test/stack"
)

// DashboardResult is `kubectl trainjob dashboard`, run as its own process, opened in Debian's Chromium
// (chromedp): how long its page takes to show the server's data and the server's memory then.
type DashboardResult struct {
	// What is shown: the list of TrainJobs TrainJobs, or one TrainJob of Ranks pods.
	What      string `json:"what"`
	TrainJobs int    `json:"trainJobs,omitempty"`
	Ranks     int    `json:"ranks,omitempty"`
	// Seconds is the time from opening the URL the command printed until the page marks the view shown, after
	// the frame that draws it (the page's performance mark: the list's first paint, a TrainJob's page
	// interactive).
	Seconds float64 `json:"seconds"`
	// MaxRSSMiB is the server's peak resident memory (VmHWM) by then.
	MaxRSSMiB float64 `json:"maxRSSMiB"`
	// StartSeconds is the time from starting the command until it printed its URL: it prints it once its
	// watch of the TrainJobs has them.
	StartSeconds float64 `json:"startSeconds"`
}

// dashboardTimeout bounds the wait for a view of the dashboard: far above the targets, to report a miss.
const dashboardTimeout = 2 * time.Minute

// openDashboard runs `kubectl trainjob dashboard ARGS…` with the CLI's kubeconfig, opens its URL at fragment
// in a headless Chromium already started, waits until the page marks mark, measures it, and checks that the
// page shows want items, as the JavaScript expression shown counts them.
func (b *bench) openDashboard(ctx context.Context, res *DashboardResult, fragment, mark, shown, items string, want int, args ...string) error {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		return fmt.Errorf("the dashboard is measured in Debian's chromium, which `make tools` installs: %w", err)
	}
	common, err := b.cliFlags(ctx)
	if err != nil {
		return err
	}
	begin := time.Now()
	d, err := stack.StartDashboard(ctx, b.binary, os.Environ(), filepath.Join(b.out, "logs", "dashboard.log"), append(args, common...)...)
	if err != nil {
		return err
	}
	res.StartSeconds = time.Since(begin).Seconds()
	defer func() { _ = d.Stop() }()
	browser, stop := stack.Chromium(ctx, chromium)
	defer stop()
	// The browser starts before the clock does: a user's is running already.
	if err := chromedp.Do(browser, chromedp.Navigate("about:blank")); err != nil {
		return fmt.Errorf("start chromium: %w", err)
	}
	wctx, cancel := context.WithTimeout(browser, dashboardTimeout)
	defer cancel()
	if err := chromedp.Do(wctx, chromedp.Navigate(d.URL+fragment)); err != nil {
		return fmt.Errorf("open the dashboard: %w", err)
	}
	ms, err := pollMark(wctx, mark)
	if err != nil {
		return fmt.Errorf("the dashboard's %s (mark %s): %w (log: %s)", res.What, mark, err, d.LogPath)
	}
	got, err := chromedp.Run(wctx, chromedp.Evaluate[int](shown))
	if err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("the dashboard's %s shows %d %s, want %d", res.What, got, items, want)
	}
	peak, err := procStatusMiB(d.PID(), "VmHWM")
	if err != nil {
		return err
	}
	res.Seconds, res.MaxRSSMiB = ms/1000, peak[0]
	b.logf("  dashboard, %s: URL printed %.3fs after the start, shown %.3fs after it was opened; server's peak RSS %.1f MiB",
		res.What, res.StartSeconds, res.Seconds, res.MaxRSSMiB)
	return nil
}

// dashboardList opens the dashboard's list of every namespace with the n TrainJobs of the cluster.
func (b *bench) dashboardList(ctx context.Context, n int) error {
	res := DashboardResult{What: fmt.Sprintf("the list of %d TrainJobs", n), TrainJobs: n}
	// The list draws only the rows in view; it says how many it shows.
	if err := b.openDashboard(ctx, &res, "", "trainjobs-shown", `Number(document.getElementById("trainjobs").dataset.rows)`, "TrainJobs", n, "-A"); err != nil {
		return err
	}
	b.summary.Dashboard = append(b.summary.Dashboard, res)
	return nil
}

// dashboardBigJob opens the dashboard's page of the big TrainJob, of BigNodes ranks.
func (b *bench) dashboardBigJob(ctx context.Context) error {
	n := b.k.BigNodes
	res := DashboardResult{What: fmt.Sprintf("the page of a %d-rank TrainJob", n), Ranks: n}
	if err := b.openDashboard(ctx, &res, "#/trainjob/"+bigNamespace+"/"+bigName, "trainjob-shown", `document.querySelectorAll(".ranks .cell[data-pod]").length`, "ranks", n, "-n", bigNamespace); err != nil {
		return err
	}
	b.summary.Dashboard = append(b.summary.Dashboard, res)
	return nil
}

// pollMark waits until the page has set the performance mark and returns its time. chromedp's poll runs in the
// page's execution context as it finds it and does not survive a new one: right after the navigation (the
// token's redirect) it can find the context of a document being replaced, and fails with "Cannot find context
// with specified id" (two of five runs of a day, and one CI's bench smoke test); it is then run again in the
// new document, where the mark's time still counts from that document's start.
func pollMark(ctx context.Context, mark string) (float64, error) {
	for {
		ms, err := chromedp.Run(ctx, chromedp.Poll[float64](`performance.getEntriesByName("`+mark+`").length && performance.getEntriesByName("`+mark+`")[0].startTime`))
		if err == nil || !strings.Contains(err.Error(), "Cannot find context with specified id") || ctx.Err() != nil {
			return ms, err
		}
	}
}
