package logs

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestPositionResume replays what a stream re-opened with sinceTime gives (the API server rounds sinceTime down
// to the second, so earlier lines come again) and checks that each line is printed exactly once, even when
// lines share a timestamp.
func TestPositionResume(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	type line struct {
		ts  time.Time
		msg string
	}
	log := []line{{at(0), "a"}, {at(100), "b"}, {at(100), "c"}, {at(100), "d"}, {at(900), "e"}, {at(1500), "f"}}
	tests := []struct {
		name  string
		reads [][]int // each read: indexes of log lines the stream delivers before it is cut
	}{
		{name: "one read", reads: [][]int{{0, 1, 2, 3, 4, 5}}},
		{name: "cut between lines with the same timestamp", reads: [][]int{{0, 1, 2}, {0, 1, 2, 3, 4, 5}}},
		{name: "cut after the last line of a second", reads: [][]int{{0, 1, 2, 3, 4}, {0, 1, 2, 3, 4, 5}}},
		{name: "re-opened several times", reads: [][]int{{0}, {0, 1}, {0, 1, 2, 3}, {0, 1, 2, 3, 4, 5}, {0, 1, 2, 3, 4, 5}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var pos position
			var printed []string
			for _, read := range tc.reads {
				since := pos.sinceTime()
				r := pos.resume()
				for _, i := range read {
					l := log[i]
					if since != nil && l.ts.Before(since.Truncate(time.Second)) {
						continue // the server leaves out what is older than sinceTime
					}
					if r.printable(l.ts) {
						printed = append(printed, l.msg)
					}
				}
			}
			if diff := cmp.Diff([]string{"a", "b", "c", "d", "e", "f"}, printed); diff != "" {
				t.Errorf("printed (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSplitTimestamp(t *testing.T) {
	ts, msg, ok := splitTimestamp("2026-01-02T03:04:05.123456789Z epoch 1 loss 0.9")
	if !ok || msg != "epoch 1 loss 0.9" || ts.Nanosecond() != 123456789 {
		t.Errorf("got %v %q %v", ts, msg, ok)
	}
	if _, msg, ok := splitTimestamp("no timestamp here"); ok || msg != "no timestamp here" {
		t.Errorf("line without timestamp: %q %v", msg, ok)
	}
	if _, msg, ok := splitTimestamp("2026-01-02T03:04:05Z"); !ok || msg != "" {
		t.Errorf("empty line: %q %v", msg, ok)
	}
}

func TestPrinter(t *testing.T) {
	var b strings.Builder
	p := &printer{out: &b, timestamps: true}
	ts := time.Date(2026, 1, 2, 3, 4, 5, 600, time.UTC)
	p.line("[pod/node] ", ts, "hello")
	p.timestamps = false
	p.line("", ts, "world")
	want := fmt.Sprintf("[pod/node] %s hello\nworld\n", ts.Format(time.RFC3339Nano))
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
