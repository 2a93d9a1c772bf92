package stack_test

import (
	"os"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/stack"
)

// TestChromiumLeavesNothing: a browser that loaded a page and was stopped leaves nothing in the temporary folder
// of the process that started it (it left an org.chromium.Chromium.* folder each run, dozens a day in /tmp).
func TestChromiumLeavesNothing(t *testing.T) {
	path, skip, err := cluster.Chromium()
	if err != nil {
		t.Fatal(err)
	}
	if skip != "" {
		t.Skip(skip)
	}
	// Not t.TempDir: the browser's socket paths under TMPDIR must stay within the 108 bytes of a socket's name.
	tmp, err := os.MkdirTemp("", "leak-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(tmp) })
	t.Setenv("TMPDIR", tmp)
	tab, stop := stack.Chromium(t.Context(), path)
	err = chromedp.Do(tab, chromedp.Navigate("data:text/html,<title>ok</title><p>a page"))
	var title string
	if err == nil {
		title, err = chromedp.Run(tab, chromedp.Title())
	}
	stop()
	if err != nil || title != "ok" {
		t.Fatalf("load a page: title %q, %v", title, err)
	}
	entries, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if len(left) > 0 {
		t.Errorf("the stopped browser left %v in TMPDIR %s", left, tmp)
	}
}
