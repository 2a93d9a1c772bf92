package printers

import (
	"bytes"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestTableEscapesCells(t *testing.T) {
	var b bytes.Buffer
	tbl := NewTable(&b, "  ", "NAME", "MESSAGE")
	tbl.Row("a", "line one\nline two \x1b[31mred")
	tbl.Row("bb", "")
	if err := tbl.Flush(); err != nil {
		t.Fatal(err)
	}
	want := "  NAME   MESSAGE\n  a      line one line two ^[[31mred\n  bb     -\n"
	if b.String() != want {
		t.Errorf("table =\n%q\nwant\n%q", b.String(), want)
	}
}

func TestDurations(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct{ name, got, want string }{
		{"age", Age(metav1.NewTime(now.Add(-90*time.Second)), now), "90s"},
		{"age unset", Age(metav1.Time{}, now), "-"},
		{"delta", Delta(2*time.Minute + 30*time.Second), "+2m30s"},
		{"negative delta", Delta(-time.Second), "-"},
		{"duration", Duration(26 * time.Hour), "26h"},
	}
	for _, tc := range cases {
		if tc.got != tc.want {
			t.Errorf("%s = %q, want %q", tc.name, tc.got, tc.want)
		}
	}
}

func TestWriteTransition(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 1, 1, 12, 0, 30, 0, time.Local))
	for _, tc := range []struct {
		name  string
		tr    Transition
		color bool
		want  string
	}{
		{"plain", Transition{Time: at, Since: 30 * time.Second, Subject: "Training", Text: "running node"}, false, "12:00:30  +30s      Training  running node\n"},
		{"no text", Transition{Time: at, Subject: "Created"}, false, "12:00:30  +0s       Created\n"},
		{"coloured stage", Transition{Time: at, Subject: "Failed=True", Text: "x\x1b"}, true, "12:00:30  +0s       \x1b[31mFailed\x1b[0m=True  x^[\n"},
	} {
		var b bytes.Buffer
		if err := WriteTransition(&b, tc.tr, tc.color); err != nil {
			t.Fatal(err)
		}
		if b.String() != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, b.String(), tc.want)
		}
	}
}
