package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/dashboard"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/images/sgd"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/stack"
)

// demoTimeout is the demo's deadline in the test: the demo's default, which a busy machine needs.
const demoTimeout = defaultTimeout

// TestNoWait runs the demo as `make demo DEMO_ARGS=--no-wait` does, on a cluster of its own: the sample
// TrainJob is followed through the stages Initializing, Training and Complete, in that order, as `status -w`
// prints them; then every command of the "try next" list that `make demo` prints is run against the same
// cluster, and everything stops.
func TestNoWait(t *testing.T) {
	realNode := cluster.RealNodeHere(t)
	dir := t.TempDir()
	binary, err := stack.Binary(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	chromium, skip, err := cluster.Chromium()
	if err != nil {
		t.Fatal(err)
	}
	if skip != "" {
		t.Logf("the dashboard is not opened in a browser: %s", skip)
	}
	out := &cluster.SyncBuffer{}
	var page *dashboardPage
	err = run(t.Context(), options{noWait: true, timeout: demoTimeout, binary: binary, dir: dir, out: out,
		dashboardStarted: func(dashboardURL string) {
			if chromium != "" {
				page = openDashboard(t.Context(), chromium, dashboardURL, trainJobName)
			}
		},
		then: func(ctx context.Context, env []string, dashboardURL string) error {
			if page != nil {
				if err := page.sawComplete(); err != nil {
					t.Error(err)
				}
			}
			if realNode {
				if err := realPods(ctx, env); err != nil {
					t.Error(err)
				}
			}
			if err := dashboardAnswers(ctx, out.String(), dashboardURL); err != nil {
				t.Error(err)
			}
			tryNext(t, ctx, binary, dir, env, dashboardURL)
			return nil
		}})
	t.Logf("demo output:\n%s", out)
	if err != nil {
		t.Fatal(err)
	}
	if err := stagesInOrder(out.String()); err != nil {
		t.Error(err)
	}
	if !strings.Contains(out.String(), "\nTrainJob default/demo is Complete, ") {
		t.Errorf("the demo's output does not say that the TrainJob is Complete")
	}
	if !realNode {
		if !strings.HasPrefix(out.String(), "Mode: process — no real node here (") {
			t.Errorf("the demo does not say that it runs in process mode, and why")
		}
		return
	}
	if !strings.Contains(out.String(), "Mode: real node — the operator runs as its Deployment's pods on "+cluster.RealNodeName) {
		t.Errorf("the demo does not say that it runs on the real node")
	}
	if !strings.Contains(out.String(), "\nTrainJob default/"+cpuTrainJobName+" is Complete: it trained for real on ") {
		t.Errorf("the demo does not say that its CPU TrainJob is Complete")
	}
	if err := sameLossesDown(out.String()); err != nil {
		t.Error(err)
	}
	if err := searchShown(out.String()); err != nil {
		t.Error(err)
	}
}

// dashboardAnswers checks that the demo printed the URL of its dashboard, and that the URL answers, with its
// token, the page and the list of TrainJobs, with the demo's.
func dashboardAnswers(ctx context.Context, out, dashboardURL string) error {
	if !strings.Contains(out, "    open "+dashboardURL+"\n") {
		return fmt.Errorf("the demo did not print its dashboard's URL %s", dashboardURL)
	}
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, Timeout: time.Minute}
	page, err := stack.Get(ctx, hc, dashboardURL)
	if err != nil || !strings.Contains(string(page), `<script src="/assets/app.js"`) {
		return fmt.Errorf("GET the dashboard's URL %s: %v\n%s", dashboardURL, err, page)
	}
	u, _ := url.Parse(dashboardURL)
	list, err := stack.Get(ctx, hc, u.Scheme+"://"+u.Host+"/api/trainjobs")
	if err != nil {
		return fmt.Errorf("GET the dashboard's /api/trainjobs with the token's cookie: %v\n%s", err, list)
	}
	var l dashboard.TrainJobs
	if err := json.Unmarshal(list, &l); err != nil {
		return fmt.Errorf("the dashboard's /api/trainjobs: %v\n%s", err, list)
	}
	rows, err := l.Cells()
	if err != nil {
		return fmt.Errorf("the dashboard's /api/trainjobs: %v\n%s", err, list)
	}
	for _, r := range rows {
		if r["name"] == trainJobName {
			return nil
		}
	}
	return fmt.Errorf("the dashboard's /api/trainjobs lacks TrainJob %s:\n%s", trainJobName, list)
}

// searchTrialLine is a trial of the demo's search as the demo prints it when the trial ends: its name, the
// learning rate of its parameters and the last loss it reported.
var searchTrialLine = regexp.MustCompile(`(?m)^    (` + searchName + `-\d+)  lr=(\S+)  loss=(\S+)  Complete$`)

// searchStatusBest is the best trial as `kubectl trainjob status` of the search names it (status.result), with
// its loss and learning rate.
var searchStatusBest = regexp.MustCompile(`(?m)^Best: +(\S+): loss (\S+), lr=(\S+)$`)

// searchShown checks that the demo's output shows its search: every trial Complete with its learning rate and
// loss, then `status` of the search, whose best trial is the one of the lowest loss, with its learning rate.
func searchShown(out string) error {
	type trial struct{ lr, loss string }
	trials := map[string]trial{}
	best := ""
	for _, m := range searchTrialLine.FindAllStringSubmatch(out, -1) {
		if _, ok := trials[m[1]]; ok {
			return fmt.Errorf("the demo shows trial %s twice", m[1])
		}
		trials[m[1]] = trial{m[2], m[3]}
		loss, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			return fmt.Errorf("trial %s: loss %q: %w", m[1], m[3], err)
		}
		if bestLoss, _ := strconv.ParseFloat(trials[best].loss, 64); best == "" || loss < bestLoss {
			best = m[1]
		}
	}
	if len(trials) != searchTrials {
		return fmt.Errorf("the demo shows %d trials of %s Complete, want %d", len(trials), searchName, searchTrials)
	}
	m := searchStatusBest.FindStringSubmatch(out)
	if m == nil {
		return fmt.Errorf("the demo does not show kubectl trainjob status %s's best trial", searchName)
	}
	if want := trials[best]; m[1] != best || m[2] != want.loss || m[3] != want.lr {
		return fmt.Errorf("status %s's best trial is %s, loss %s, lr=%s; the trial of the lowest loss is %s, loss %s, lr=%s", searchName, m[1], m[2], m[3], best, want.loss, want.lr)
	}
	return nil
}

// TestSearchShown: the demo test's search check fails on what it must fail on.
func TestSearchShown(t *testing.T) {
	trials := "    lr-search-0  lr=0.002  loss=9.5  Complete\n" +
		"    lr-search-1  lr=0.08  loss=1.25  Complete\n" +
		"    lr-search-2  lr=0.01  loss=7.75  Complete\n" +
		"    lr-search-3  lr=0.03  loss=4.5  Complete\n"
	for _, tc := range []struct {
		name, out string
		ok        bool
	}{
		{"the best is the lowest loss", trials + "Best:       lr-search-1: loss 1.25, lr=0.08\n", true},
		{"the best is not the lowest loss", trials + "Best:       lr-search-3: loss 4.5, lr=0.03\n", false},
		{"the best's rate is another's", trials + "Best:       lr-search-1: loss 1.25, lr=0.03\n", false},
		{"a trial missing", trials[strings.Index(trials, "    lr-search-1"):] + "Best:       lr-search-1: loss 1.25, lr=0.08\n", false},
		{"no best", trials, false},
	} {
		if err := searchShown(tc.out); (err == nil) != tc.ok {
			t.Errorf("%s: searchShown = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

// rankStep is a `step N loss X` line of the CPU TrainJob as `logs --rank all` prints it.
var rankStep = regexp.MustCompile(`(?m)^\[(` + cpuTrainJobName + `-node-0-\d-[^/\]]+)/node\] (step \d+ loss \S+)$`)

// sameLossesDown checks that the demo's output shows the logs of the CPU TrainJob's ranks, each with every
// step's loss, the same on every rank, and going down.
func sameLossesDown(out string) error {
	byPod := map[string][]string{}
	for _, m := range rankStep.FindAllStringSubmatch(out, -1) {
		byPod[m[1]] = append(byPod[m[1]], m[2])
	}
	if len(byPod) != cpuRanks {
		return fmt.Errorf("the demo shows the steps of %d ranks of %s, want %d", len(byPod), cpuTrainJobName, cpuRanks)
	}
	var want []string
	for pod, steps := range byPod {
		if len(steps) != cpuSteps {
			return fmt.Errorf("rank pod %s shows %d steps, want %d: %v", pod, len(steps), cpuSteps, steps)
		}
		if want == nil {
			want = steps
		} else if diff := cmp.Diff(want, steps); diff != "" {
			return fmt.Errorf("rank pod %s's losses differ from another rank's (-other +%s):\n%s", pod, pod, diff)
		}
	}
	first, _ := sgd.Loss(want[0])
	last, _ := sgd.Loss(want[len(want)-1])
	if !(last < first/10) {
		return fmt.Errorf("the loss went from %v to %v, want it to fall tenfold", first, last)
	}
	return nil
}

// realPods checks, in the demo's cluster, that the operator and the CPU TrainJob ran as real pods: on the
// real node, in containers of containerd.
func realPods(ctx context.Context, env []string) error {
	var kubeconfig string
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "KUBECONFIG="); ok {
			kubeconfig = v
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	var errs []error
	for _, sel := range []struct{ namespace, labels string }{
		{"kubectl-trainjob-system", "app.kubernetes.io/component=operator"},
		{namespace, jobsetv1alpha2.JobSetNameKey + "=" + cpuTrainJobName},
	} {
		pods, err := cs.CoreV1().Pods(sel.namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.labels})
		if err != nil {
			return err
		}
		if len(pods.Items) == 0 {
			errs = append(errs, fmt.Errorf("no pods %s in %s", sel.labels, sel.namespace))
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName != cluster.RealNodeName {
				errs = append(errs, fmt.Errorf("pod %s/%s on %s, want %s", p.Namespace, p.Name, p.Spec.NodeName, cluster.RealNodeName))
			}
			for _, c := range p.Status.ContainerStatuses {
				if !strings.HasPrefix(c.ContainerID, "containerd://") {
					errs = append(errs, fmt.Errorf("pod %s/%s container %s has ID %q, want a containerd container", p.Namespace, p.Name, c.Name, c.ContainerID))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// stageLine is a line `status -w` prints off a terminal for a change of stage (`16:23:26  +7s  Training
// running node (4/4 pods running)`) or a condition (`… Complete=True  AllJobsCompleted: …`): time, time since
// creation, then what changed. The demo's own progress lines (`==> [3] Applying the TrainingRuntime …`) are not.
var stageLine = regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d  \+\S+ +(\S+)  `)

// stagesInOrder checks that the demo's output has stage lines for Initializing, Training and Complete=True,
// each first seen after the one before.
func stagesInOrder(out string) error {
	first := map[string]int{}
	for i, m := range stageLine.FindAllStringSubmatch(out, -1) {
		if _, ok := first[m[1]]; !ok {
			first[m[1]] = i
		}
	}
	prev := ""
	for _, want := range []string{"Initializing", "Training", "Complete=True"} {
		i, ok := first[want]
		switch {
		case !ok:
			return fmt.Errorf("status -w printed no %s line (stage lines: %v)", want, stageLine.FindAllString(out, -1))
		case prev != "" && i < first[prev]:
			return fmt.Errorf("status -w printed %s before %s (stage lines: %v)", want, prev, stageLine.FindAllString(out, -1))
		}
		prev = want
	}
	return nil
}

// TestStagesInOrder: the demo test's stage check fails on what it must fail on.
func TestStagesInOrder(t *testing.T) {
	const (
		progress     = "==> [3] Applying the TrainingRuntime test/demo/runtime.yaml: Initializing, Training\n"
		initializing = "16:23:21  +2s       Initializing  running dataset-initializer (1/1 pods running)\n"
		training     = "16:23:26  +7s       Training  running node (4/4 pods running)\n"
		complete     = "16:23:34  +15s      Complete=True  AllJobsCompleted: jobset completed successfully\n"
	)
	for _, tc := range []struct {
		name, out string
		ok        bool
	}{
		{"every stage in order", progress + initializing + training + complete, true},
		{"stage names in progress lines only", progress + initializing + complete, false},
		{"Training after Complete", progress + initializing + complete + training, false},
		{"no Complete", progress + initializing + training, false},
	} {
		if err := stagesInOrder(tc.out); (err == nil) != tc.ok {
			t.Errorf("%s: stagesInOrder = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

// tryNextChecks says, for each command of the "try next" list, what shows that it did what its comment
// promises. A command it does not list fails the test: each one added to the list must say what it shows.
var tryNextChecks = map[string]func(stdout string) error{
	"kubectl-trainjob list":                                  matches(`(?m)^demo +Complete `),
	"kubectl-trainjob status demo":                           contains("Stage:       Complete", "Pipeline:", "Timeline:"),
	"kubectl-trainjob logs demo --rank all":                  contains("[rank 0] torchrun", "[rank 3] torchrun"),
	"kubectl-trainjob logs demo --stage dataset-initializer": contains("Downloading dataset hf://tatsu-lab/alpaca"),
	"kubectl-trainjob describe-pipeline demo":                contains("EnforceMLPolicy", "Torch"),
	"kubectl-trainjob create llama --runtime torch-distributed --nodes 2 --gpus-per-node 8 -- torchrun train.py": contains(
		"trainjob.trainer.kubeflow.org/llama created"),
	"kubectl-trainjob wait llama --for=Complete": contains("trainjob.trainer.kubeflow.org/llama Complete"),
	"kubectl-trainjob status llama":              matches(`Stage: +Complete`, `llama-node-0-0-\S+ +node +0 +gpu-node-\d`, `llama-node-0-1-\S+ +node +1 +gpu-node-\d`),
	"kubectl-trainjob create too-big --runtime torch-distributed --nodes 2 --gpus-per-node 16": contains(
		"trainjob.trainer.kubeflow.org/too-big created"),
	// The scheduler says why once it has tried: the command is run until it does. With the real node, the
	// simulated CPU nodes are refused for their taint before their GPUs are counted.
	"kubectl-trainjob status too-big": matches(`Stage: +Pending: 2 pods unschedulable: 0/\d+ nodes are available: .*\d+ Insufficient nvidia\.com/gpu`),
	"kubectl-trainjob delete too-big": contains(`trainjobs.trainer.kubeflow.org "too-big" deleted`),
}

// untilOK are the commands of the list whose output depends on when they run: they are run again until
// their check passes.
var untilOK = map[string]bool{"kubectl-trainjob status too-big": true}

// tryNext runs every command of the "try next" list that `make demo` prints, as printed, with the
// environment it tells the user to export, and checks what each prints. `delete` asks before it deletes:
// it gets a terminal, and the answer y.
func tryNext(t *testing.T, ctx context.Context, binary, dir string, env []string, dashboardURL string) {
	t.Helper()
	var list bytes.Buffer
	printNext(&list, binary, filepath.Join(dir, "kubeconfig"), filepath.Join(dir, "logs"), dashboardURL)
	ran := 0
	for _, line := range strings.Split(list.String(), "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "kubectl-trainjob ") {
			continue
		}
		command, _, _ := strings.Cut(line, "  #")
		command = strings.TrimSpace(command)
		check, ok := tryNextChecks[command]
		if !ok {
			t.Errorf("the try-next command %q has no check in tryNextChecks", command)
			continue
		}
		ran++
		var stdout string
		var checkErr error
		err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
			var err error
			if stdout, err = runCommand(ctx, binary, env, strings.Fields(command)[1:]); err != nil {
				return false, err
			}
			checkErr = check(stdout)
			return checkErr == nil || !untilOK[command], nil
		})
		switch {
		case err != nil:
			t.Errorf("%s: %v\n%s", command, err, stdout)
		case checkErr != nil:
			t.Errorf("%s: %v\n%s", command, checkErr, stdout)
		default:
			t.Logf("$ %s\n%s", command, stdout)
		}
	}
	if ran == 0 {
		t.Errorf("found no command in the try-next list:\n%s", list.String())
	}
}

// runCommand runs the binary with args, its stdin a terminal on which the user has answered y.
func runCommand(ctx context.Context, binary string, env, args []string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(env, "NO_COLOR=1")
	closeTerminal, err := stack.AnswerOnTerminal(cmd, "y\n")
	if err != nil {
		return "", err
	}
	defer closeTerminal()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%w; stderr:\n%s", err, stderr.String())
	}
	return stdout.String(), nil
}

func contains(parts ...string) func(string) error {
	return func(out string) error {
		for _, p := range parts {
			if !strings.Contains(out, p) {
				return fmt.Errorf("the output lacks %q", p)
			}
		}
		return nil
	}
}

func matches(patterns ...string) func(string) error {
	return func(out string) error {
		for _, p := range patterns {
			if !regexp.MustCompile(p).MatchString(out) {
				return fmt.Errorf("the output does not match %s", p)
			}
		}
		return nil
	}
}

// TestContributingShowsTryNext: CONTRIBUTING.md shows the "try next" list as the demo prints it, so the
// commands that TestNoWait runs are the ones it shows.
func TestContributingShowsTryNext(t *testing.T) {
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "CONTRIBUTING.md"))
	if err != nil {
		t.Fatal(err)
	}
	const intro = "Without `DEMO_ARGS=--no-wait` it then prints (and waits for Ctrl-C):\n\n```text\n"
	_, shown, ok := strings.Cut(string(doc), intro)
	if shown, _, ok = strings.Cut(shown, "```"); !ok {
		t.Fatalf("CONTRIBUTING.md has no block after %q", intro)
	}
	const clone = "/path/to/clone"
	var printed bytes.Buffer
	printNext(&printed, clone+"/bin/kubectl-trainjob", clone+"/bin/demo/kubeconfig", clone+"/bin/demo/logs", "http://127.0.0.1:PORT/?token=TOKEN")
	// CONTRIBUTING.md shows the lines from the exports to the last command.
	lines := strings.Split(printed.String(), "\n")
	first := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "  export ") })
	last := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "  kubectl-trainjob ") {
			last = i
		}
	}
	if first < 0 || last < first {
		t.Fatalf("the demo's try-next list has no exports or commands:\n%s", printed.String())
	}
	if diff := cmp.Diff(strings.Join(lines[first:last+1], "\n")+"\n", shown); diff != "" {
		t.Errorf("CONTRIBUTING.md's try-next list differs from what the demo prints (-demo +CONTRIBUTING.md):\n%s", diff)
	}
}

// TestModeLine: the demo's first line says which mode it runs in and, in process mode, why.
func TestModeLine(t *testing.T) {
	var out bytes.Buffer
	err := options{process: true, out: &out}.realNode()
	if want := "Mode: process — no real node here (-process was given): the operator runs as a process and every pod is simulated.\n"; err == nil || out.String() != want {
		t.Errorf("with -process: %v, printed %q, want %q", err, out.String(), want)
	}
	out.Reset()
	supported := cluster.RealNodeSupported()
	err = options{out: &out}.realNode()
	switch {
	case supported == nil && (err != nil || !strings.HasPrefix(out.String(), "Mode: real node — ")):
		t.Errorf("on a machine that runs the real node: %v, printed %q", err, out.String())
	case supported != nil && (err == nil || !strings.Contains(out.String(), supported.Error())):
		t.Errorf("on a machine that cannot run the real node (%v): %v, printed %q", supported, err, out.String())
	}
}

// dashboardPage is the demo's dashboard, open in a headless Chromium from the moment it serves: it watches the
// TrainJob's row until its stage is Complete (issue 32: the demo TrainJob seen going to Complete without a
// reload).
type dashboardPage struct {
	cancel context.CancelFunc
	done   chan error
}

// openDashboard opens dashboardURL in chromium and watches TrainJob name's row, until the row is Complete or
// sawComplete stops it.
func openDashboard(ctx context.Context, chromium, dashboardURL, name string) *dashboardPage {
	ctx, cancel := context.WithCancel(ctx)
	p := &dashboardPage{cancel: cancel, done: make(chan error, 1)}
	go func() { p.done <- watchToComplete(ctx, chromium, dashboardURL, name) }()
	return p
}

// sawComplete waits, within a minute (the TrainJob is Complete already), for the page to show the TrainJob
// Complete without having been reloaded.
func (p *dashboardPage) sawComplete() error {
	defer p.cancel()
	select {
	case err := <-p.done:
		return err
	case <-time.After(time.Minute):
		p.cancel()
		return fmt.Errorf("the dashboard did not show the TrainJob Complete within a minute of its being Complete: %v", <-p.done)
	}
}

func watchToComplete(ctx context.Context, chromium, dashboardURL, name string) error {
	browser, stop := stack.Chromium(ctx, chromium)
	defer stop()
	row := `#trainjobs tr[data-name="` + name + `"]`
	if err := chromedp.Do(browser, chromedp.Navigate(dashboardURL), chromedp.WaitVisible(chromedp.CSS(`#live.live-ok`))); err != nil {
		return fmt.Errorf("open the demo's dashboard %s in chromium: %w", dashboardURL, err)
	}
	// A mark on the document, which a reload would lose; and the row's stage when the page was opened.
	first, err := chromedp.Run(browser, chromedp.Evaluate[string](`document.body.dataset.mark = "not reloaded";
		(document.querySelector('`+row+` .stage') || {dataset: {}}).dataset.stage || "none"`))
	if err != nil {
		return err
	}
	if first == "Complete" {
		return fmt.Errorf("TrainJob %s was Complete already when the dashboard was opened: nothing seen live", name)
	}
	if err := chromedp.Do(browser, chromedp.WaitVisible(chromedp.CSS(row+` .stage[data-stage="Complete"]`))); err != nil {
		html, _ := chromedp.Run(browser, chromedp.OuterHTML(chromedp.CSS("#trainjobs")))
		return fmt.Errorf("the dashboard, opened while TrainJob %s was %s, never showed it Complete: %w\n%s", name, first, err, html)
	}
	mark, err := chromedp.Run(browser, chromedp.Evaluate[string](`document.body.dataset.mark || ""`))
	if err != nil {
		return err
	}
	if mark != "not reloaded" {
		return fmt.Errorf("the dashboard was reloaded to show TrainJob %s Complete (mark %q)", name, mark)
	}
	return nil
}
