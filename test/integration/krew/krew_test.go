// Package krew tests the krew release end to end and offline: it builds the archives and the manifest with
// the builder `make krew` runs (krew/build), validates the manifest with krew's own validate-krew-manifest,
// installs the archive of every platform built (this machine's, or all five with TRAINJOB_KREW_PLATFORMS=all
// as `make test-krew` sets) from a loopback server the way krew-index CI does, installs this
// machine's archive with the real krew into a temporary KREW_ROOT, and runs what krew installed.
//
// krew and validate-krew-manifest v0.4.3 come from `make tools` (test/tools/build.sh, module test/tools/krew).
package krew

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
)

const (
	version    = "v0.1.0"
	commit     = "krew-test"
	releaseURL = "https://github.com/kubectl-trainjob/kubectl-trainjob/releases/download"
	// offline is a proxy nobody listens on: krew reaching for the network fails at once instead of
	// succeeding quietly.
	offline = "http://127.0.0.1:9"
)

func TestKrewRelease(t *testing.T) {
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	tools := os.Getenv(cluster.ToolsEnv)
	if tools == "" {
		tools = filepath.Join(root, "bin", "tools")
	}
	// kubectl too: `kubectl trainjob` must be run through kubectl's own plugin lookup, whatever the PATH of
	// the machine holds.
	krew, validate, kubectl := filepath.Join(tools, "krew"), filepath.Join(tools, "validate-krew-manifest"), filepath.Join(tools, "kubectl")
	for _, bin := range []string{krew, validate, kubectl} {
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("%s not found: run `make tools` (or set %s)", bin, cluster.ToolsEnv)
		}
	}

	// Cross-compiling the four other platforms costs a cold CI run ~20 minutes, so by default the release
	// is built for this machine only (-partial drops the other platforms from the manifest);
	// TRAINJOB_KREW_PLATFORMS=all (`make test-krew`) builds and installs all five.
	platforms := []string{runtime.GOOS + "/" + runtime.GOARCH}
	build := []string{"run", "./krew/build", "-version", version, "-commit", commit, "-platforms", platforms[0], "-partial"}
	if os.Getenv("TRAINJOB_KREW_PLATFORMS") == "all" {
		platforms = []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64", "windows/amd64"}
		build = []string{"run", "./krew/build", "-version", version, "-commit", commit}
	}
	dist := t.TempDir()
	out := runOK(t, root, []string{"SOURCE_DATE_EPOCH=1700000000"}, "go", append(build, "-out", dist)...)
	for _, p := range platforms {
		if !strings.Contains(out, p+" ") {
			t.Errorf("the builder printed no size for %s", p)
		}
	}
	manifest := filepath.Join(dist, "trainjob.yaml")

	t.Run("validate-krew-manifest", func(t *testing.T) {
		runOK(t, dist, nil, validate, "-manifest", manifest, "-skip-install")
	})

	// validate-krew-manifest without -skip-install runs `kubectl krew install --manifest` for every
	// platform (KREW_OS/KREW_ARCH) and checks that LICENSE is extracted; the archives come from a loopback
	// server standing in for the release page.
	t.Run("validate-krew-manifest installs every platform built", func(t *testing.T) {
		var mu sync.Mutex
		served := map[string]int{}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			served[filepath.Base(r.URL.Path)]++
			mu.Unlock()
			http.ServeFile(w, r, filepath.Join(dist, filepath.Base(r.URL.Path)))
		}))
		defer srv.Close()
		data, err := os.ReadFile(manifest)
		if err != nil {
			t.Fatal(err)
		}
		loopback := filepath.Join(t.TempDir(), "trainjob.yaml")
		if err := os.WriteFile(loopback, bytes.ReplaceAll(data, []byte(releaseURL), []byte(srv.URL)), 0o644); err != nil {
			t.Fatal(err)
		}
		// validate-krew-manifest runs `kubectl krew …`: a kubectl that is only that.
		bin := t.TempDir()
		shim := "#!/bin/sh\n[ \"$1\" = krew ] || { echo \"test kubectl: only krew\" >&2; exit 1; }\nshift\nexec " + krew + " \"$@\"\n"
		if err := os.WriteFile(filepath.Join(bin, "kubectl"), []byte(shim), 0o755); err != nil {
			t.Fatal(err)
		}
		out := runOK(t, dist, []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH")}, validate, "-manifest", loopback)
		if want := fmt.Sprintf("all %d spec.platforms installed fine", len(platforms)); !strings.Contains(out, want) {
			t.Errorf("validate-krew-manifest did not say %q", want)
		}
		for _, p := range platforms {
			goos, goarch, _ := strings.Cut(p, "/")
			a := "kubectl-trainjob_" + goos + "_" + goarch + ".tar.gz"
			if goos == "windows" {
				a = strings.TrimSuffix(a, ".tar.gz") + ".zip"
			}
			if served[a] != 1 {
				t.Errorf("%s was downloaded %d times, want 1 (served: %v)", a, served[a], served)
			}
		}
		if len(served) != len(platforms) {
			t.Errorf("served %v, want exactly the archives of %v", served, platforms)
		}
	})

	t.Run("krew install from the archive, and run it", func(t *testing.T) {
		home := t.TempDir()
		krewRoot := filepath.Join(home, ".krew")
		krewBin := filepath.Join(krewRoot, "bin")
		env := []string{
			"HOME=" + home, "KREW_ROOT=" + krewRoot, "KREW_NO_UPGRADE_CHECK=1",
			"HTTP_PROXY=" + offline, "HTTPS_PROXY=" + offline, "NO_PROXY=",
			"PATH=" + krewBin + string(os.PathListSeparator) + os.Getenv("PATH"),
		}
		archive := filepath.Join(dist, "kubectl-trainjob_"+runtime.GOOS+"_"+runtime.GOARCH+".tar.gz")
		out := runOK(t, home, env, krew, "install", "--manifest="+manifest, "--archive="+archive)
		if !strings.Contains(out, "Installed plugin: trainjob") {
			t.Errorf("krew did not say it installed trainjob")
		}
		if !strings.Contains(out, "kubectl_complete-trainjob") {
			t.Errorf("krew did not show the caveats")
		}
		// (krew list and krew uninstall want the plugin index, which an offline krew never has.)
		if _, err := os.Stat(filepath.Join(krewRoot, "receipts", "trainjob.yaml")); err != nil {
			t.Errorf("krew wrote no receipt for trainjob: %v", err)
		}

		got := runOK(t, home, env, filepath.Join(krewBin, "kubectl-trainjob"), "version", "--client")
		want := "Client Version: " + version + " (commit " + commit + ")\n"
		if got != want {
			t.Errorf("the installed kubectl-trainjob printed %q, want %q", got, want)
		}
		// The shim sits in the store, next to the binary; krew links only the binary.
		store := filepath.Join(krewRoot, "store", "trainjob", version)
		for _, f := range []string{"LICENSE", "kubectl_complete-trainjob"} {
			if _, err := os.Stat(filepath.Join(store, f)); err != nil {
				t.Errorf("%s is not installed: %v", f, err)
			}
		}
		if got := runOK(t, home, env, filepath.Join(store, "kubectl_complete-trainjob"), ""); !strings.Contains(got, "install\t") || !strings.Contains(got, "\n:4\n") {
			t.Errorf("the completion shim did not complete the subcommands:\n%s", got)
		}
		// The PATH of env starts with krew's bin: kubectl finds the plugin krew linked there.
		if got := runOK(t, home, env, kubectl, "trainjob", "version", "--client"); got != want {
			t.Errorf("kubectl trainjob version --client printed %q, want %q", got, want)
		}
	})
}

// runOK runs name in dir with env added and fails the test unless it succeeds; it returns stdout and
// stderr together and logs them.
func runOK(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	// No deadline of its own: building five platforms cold takes long on a busy machine; go test's
	// -timeout bounds it.
	cmd := exec.CommandContext(t.Context(), name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	begin := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("$ %s %s  (%v)\n%s", filepath.Base(name), strings.Join(args, " "), time.Since(begin).Round(time.Millisecond), out)
	if err != nil {
		t.Fatalf("%s: %v", filepath.Base(name), err)
	}
	return string(out)
}
