package logs

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"

	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
)

// TestRankColor: a rank's colour depends on its stage and rank only, so it is the same in every run and for
// every pod that runs the rank; neighbouring ranks differ, and so does each stage's rank 0.
func TestRankColor(t *testing.T) {
	first := map[int]int{}
	for rank := range 64 {
		first[rank] = rankColor("trainer", rank)
	}
	for rank := range 64 {
		if got := rankColor("trainer", rank); got != first[rank] {
			t.Errorf("rank %d: colour %d, then %d", rank, first[rank], got)
		}
		if rank > 0 && first[rank] == first[rank-1] {
			t.Errorf("ranks %d and %d have the same colour %d", rank-1, rank, first[rank])
		}
	}
	zeros := map[int]string{}
	for _, st := range stageNames() {
		c := rankColor(st, 0)
		if other, ok := zeros[c]; ok {
			t.Errorf("rank 0 of %s and of %s have the same colour %d", other, st, c)
		}
		zeros[c] = st
	}
	// The colour is by rank, not by pod: the replacement of rank 1's pod keeps it.
	var o LogsOptions
	o.color = true
	old := podTarget{step: &planStep{step: step{name: "trainer"}}, rank: 1, pod: &corev1.Pod{}}
	old.pod.Name = "llama-node-0-1-abcde"
	replacement := old
	replacement.pod = &corev1.Pod{}
	replacement.pod.Name = "llama-node-0-1-zyxwv"
	prefixColor := regexp.MustCompile(`^\x1b\[(\d+)m\[`)
	a, b := prefixColor.FindStringSubmatch(o.prefix(true, old, "node")), prefixColor.FindStringSubmatch(o.prefix(true, replacement, "node"))
	if a == nil || b == nil || a[1] != b[1] {
		t.Errorf("prefixes %q and %q: want the same colour", o.prefix(true, old, "node"), o.prefix(true, replacement, "node"))
	}
	o.color = false
	if got := o.prefix(true, old, "node"); got != "[llama-node-0-1-abcde/node] " {
		t.Errorf("prefix without colour = %q", got)
	}
}

func TestLineFilter(t *testing.T) {
	lines := []string{"epoch 1 loss 2.31", "epoch 2 loss nan", "saving checkpoint", "epoch 3 loss NaN"}
	for _, tc := range []struct {
		name   string
		filter lineFilter
		want   []string
	}{
		{"no --grep keeps every line", lineFilter{}, lines},
		{"--grep keeps the lines that match", lineFilter{grep: regexp.MustCompile(`(?i)\bnan\b`)}, []string{"epoch 2 loss nan", "epoch 3 loss NaN"}},
		{"--invert keeps the others", lineFilter{grep: regexp.MustCompile(`^epoch`), invert: true}, []string{"saving checkpoint"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			p := &printer{out: &b, filter: tc.filter}
			for _, l := range lines {
				p.line("[pod/node] ", time.Time{}, l)
			}
			var want strings.Builder
			for _, l := range tc.want {
				want.WriteString("[pod/node] " + l + "\n")
			}
			if diff := cmp.Diff(want.String(), b.String()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	// The prefix is not matched: a --grep for the pod's name keeps nothing.
	var b strings.Builder
	p := &printer{out: &b, filter: lineFilter{grep: regexp.MustCompile(`pod`)}}
	p.line("[pod/node] ", time.Time{}, "epoch 1")
	if b.Len() != 0 {
		t.Errorf("--grep matched the prefix: %q", b.String())
	}
}

// TestOrdered: streams that finish in any order come out whole and in their order, the head's lines as they
// come; no more than the window of streams starts ahead of the head.
func TestOrdered(t *testing.T) {
	var out bytes.Buffer
	o := newOrdered(&out, 2)
	ctx := context.Background()
	if !o.wait(ctx, 0) || !o.wait(ctx, 1) {
		t.Fatal("streams 0 and 1 may start")
	}
	started := make(chan struct{})
	go func() {
		o.wait(ctx, 2) // waits until stream 0 is printed
		close(started)
	}()
	fmt.Fprint(o.writer(1), "1a\n")
	fmt.Fprint(o.writer(0), "0a\n")
	if got := out.String(); got != "0a\n" {
		t.Errorf("before any stream finished: %q, want the head's line only", got)
	}
	select {
	case <-started:
		t.Fatal("stream 2 started while streams 0 and 1 run")
	case <-time.After(50 * time.Millisecond):
	}
	o.finish(1)
	fmt.Fprint(o.writer(0), "0b\n")
	o.finish(0)
	<-started
	fmt.Fprint(o.writer(2), "2a\n")
	o.finish(2)
	if diff := cmp.Diff("0a\n0b\n1a\n2a\n", out.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestOrderedConcurrent writes many streams at once, each line by line, with a small window.
func TestOrderedConcurrent(t *testing.T) {
	var out bytes.Buffer
	o := newOrdered(&out, 3)
	var want strings.Builder
	var wg sync.WaitGroup
	for i := range 40 {
		for l := range 5 {
			fmt.Fprintf(&want, "stream %d line %d\n", i, l)
		}
		if !o.wait(context.Background(), i) {
			t.Fatal("wait ended")
		}
		wg.Go(func() {
			defer o.finish(i)
			for l := range 5 {
				fmt.Fprintf(o.writer(i), "stream %d line %d\n", i, l)
			}
		})
	}
	wg.Wait()
	if diff := cmp.Diff(want.String(), out.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		err  string
	}{
		{"--since and --since-time", []string{"--since", "5m", "--since-time", "2026-05-01T12:00:00Z"}, "--since and --since-time cannot be used together: use one of them"},
		{"--since-time not RFC3339", []string{"--since-time", "yesterday"}, `invalid --since-time "yesterday": use an RFC3339 time like 2026-05-01T12:00:00Z`},
		{"--grep that does not compile", []string{"--grep", "loss ("}, "invalid --grep \"loss (\": error parsing regexp: missing closing ): `loss (`"},
		{"--invert alone", []string{"--invert"}, "--invert needs --grep: it prints the lines that do not match it"},
		{"--previous with -f", []string{"--previous", "-f"}, "--previous reads containers that restarted, up to their restart: it cannot be followed; drop -f"},
		{"--all-containers with -c", []string{"--all-containers", "-c", "node"}, "--all-containers and -c cannot be used together: drop one"},
		{"--failed with --rank", []string{"--failed", "--rank", "1"}, "--failed picks the pod and container itself: drop --rank"},
		{"--failed with -f", []string{"--failed", "-f"}, "--failed picks the pod and container itself: drop --follow"},
		{"--max-log-requests 0", []string{"--max-log-requests", "0"}, "invalid --max-log-requests 0: use 1 or more"},
		{"every flag that goes together", []string{"--rank", "all", "--since-time", "2026-05-01T12:00:00+02:00", "--grep", "loss", "--invert", "--all-containers"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := NewLogsOptions(cmdutil.Streams{})
			cmd := NewCmdLogsWithOptions(nil, o)
			if err := cmd.ParseFlags(tc.args); err != nil {
				t.Fatal(err)
			}
			o.sel.rankSet, o.given = cmd.Flags().Changed("rank"), givenFlags(cmd)
			err := o.Validate()
			if got := errString(err); got != tc.err {
				t.Errorf("Validate() = %q, want %q", got, tc.err)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestLogsClientsetHasNoRateLimit: the clientset that reads logs is bounded by --max-log-requests alone, not by the
// factory's token bucket as well, and making it leaves the factory's config as it was.
func TestLogsClientsetHasNoRateLimit(t *testing.T) {
	cfg := &rest.Config{Host: "https://example.invalid", QPS: 50, Burst: 100}
	cs, err := logsClientset(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rc, ok := cs.CoreV1().RESTClient().(*rest.RESTClient)
	if !ok {
		t.Fatalf("the clientset's REST client is a %T", cs.CoreV1().RESTClient())
	}
	if limiter := rc.GetRateLimiter(); limiter != nil {
		t.Errorf("the logs clientset has a rate limiter (%T): reading many ranks would wait on it", limiter)
	}
	if cfg.QPS != 50 || cfg.Burst != 100 {
		t.Errorf("the factory's config changed to QPS %v, burst %d", cfg.QPS, cfg.Burst)
	}
}
