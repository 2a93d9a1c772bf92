// Package golden compares test output with checked-in golden files. Run the
// tests with -update to rewrite the files from what the code prints now;
// never edit them by hand.
package golden

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite golden files from the current output")

// Assert fails t when got differs from the file at path (relative to the
// test's package), or rewrites the file under -update.
func Assert(t testing.TB, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden file %s: %v (run the test with -update to create it)", path, err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("output differs from %s (-want +got); if the change is intended, run the test with -update:\n%s", path, diff)
	}
}

// ScreenHead is the `status` screen of a golden result (exit code, stdout, stderr) down to its Pipeline section,
// and an elision: what the TrainJob is, its stage and why, its first failure and its Queue section. The sections
// below hold times and counts that differ from run to run on a cluster whose pods really run.
func ScreenHead(result string) string {
	head, _, found := strings.Cut(result, "\nPipeline:\n")
	if !found {
		return result
	}
	_, stderr, _ := strings.Cut(result, "--- stderr\n")
	return head + "\n…\n--- stderr\n" + stderr
}
