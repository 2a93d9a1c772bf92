package main

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/kubectl-trainjob/kubectl-trainjob"

// TestPkgDoesNotImportPlugin keeps the dependency direction of the design: the operator and the pipeline
// (pkg/) never depend on the kubectl commands (plugin/), directly or through another package.
func TestPkgDoesNotImportPlugin(t *testing.T) {
	// -test: test files of pkg/ must not reach into the commands either.
	out, err := exec.Command("go", "list", "-deps", "-test", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", module+"/pkg/...").Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr(err))
	}
	var pkgs, offending []string
	for _, p := range strings.Fields(string(out)) {
		switch {
		case strings.HasPrefix(p, module+"/pkg/"):
			pkgs = append(pkgs, p)
		case p == module+"/plugin" || strings.HasPrefix(p, module+"/plugin/"):
			offending = append(offending, p)
		}
	}
	if len(pkgs) == 0 {
		t.Fatalf("go list found no package under pkg/:\n%s", out)
	}
	if len(offending) > 0 {
		t.Errorf("packages under pkg/ depend on the CLI: %s (see `go list -deps -test ./pkg/...`)", strings.Join(offending, ", "))
	}
}

func stderr(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}
