package images_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
)

// `make image` writes an archive that containerd imports under the image's name and runs as the image's
// non-root user: the operator binary answers `version --client` with the version make stamped in.
func TestMakeImageRunsInContainerd(t *testing.T) {
	cluster.RequireRealContainers(t)
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	const ref, version = "trainjob.local/kubectl-trainjob:image-test", "v0.0.0-image-test"
	archive := filepath.Join(dir, "operator.tar")
	make := exec.CommandContext(t.Context(), "make", "--no-print-directory", "image", "IMAGE="+ref, "VERSION="+version, "IMAGE_ARCHIVE="+archive)
	make.Dir = root
	out, err := make.CombinedOutput()
	if err != nil {
		t.Fatalf("make image: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "ctr -n k8s.io images import "+archive) {
		t.Errorf("make image does not say how to load the archive:\n%s", out)
	}

	ctrd, err := cluster.StartContainerd(t.Context(), filepath.Join(dir, "containerd"), filepath.Join(dir, "containerd.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ctrd.Stop(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			log, _ := os.ReadFile(filepath.Join(dir, "containerd.log"))
			t.Logf("containerd log:\n%s", log)
		}
	})
	if err := ctrd.Import(t.Context(), archive); err != nil {
		t.Fatal(err)
	}
	images, err := ctrd.Ctr(t.Context(), "--namespace", "k8s.io", "images", "list", "--quiet")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(images), ref) {
		t.Fatalf("containerd's images after import: %q, want %s", images, ref)
	}
	run, err := ctrd.Ctr(t.Context(), "--namespace", "k8s.io", "run", "--rm", ref, "image-test", "/kubectl-trainjob", "version", "--client")
	if err != nil {
		t.Fatalf("run %s: %v\n%s", ref, err, run)
	}
	if !strings.Contains(string(run), version) {
		t.Errorf("`version --client` in the image printed %q, want the version %s", run, version)
	}
}
