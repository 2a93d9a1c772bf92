package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

func TestReleaseVersion(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"v0.1.0", "v0.1.0"},
		{"v1.2.3-rc.1", "v1.2.3-rc.1"},
		{"v1.2.3-4-gabc1234-dirty", "v1.2.3-4-gabc1234-dirty"}, // git describe after a tag
		{"c8ddb35-dirty", "v0.0.0-dev+c8ddb35-dirty"},          // git describe --always, no tag
		{"1.2.3", "v0.0.0-dev+1-2-3"},                          // krew wants the v
		{"", "v0.0.0-dev"},
	} {
		if got := ReleaseVersion(tc.in); got != tc.want {
			t.Errorf("ReleaseVersion(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestRenderManifest renders the real template as krew-release-bot would, from made-up archives.
func TestRenderManifest(t *testing.T) {
	tmpl, err := os.ReadFile("../.krew.yaml")
	if err != nil {
		t.Fatal(err)
	}
	platforms, err := parsePlatforms(defaultPlatforms)
	if err != nil {
		t.Fatal(err)
	}
	var results []built
	for i, p := range platforms {
		results = append(results, built{platform: p, sha256: strings.Repeat(string(rune('a'+i)), 64)})
	}
	out, err := renderManifest(string(tmpl), "v1.2.3", "", results)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"  version: v1.2.3\n",
		"    uri: https://github.com/kubectl-trainjob/kubectl-trainjob/releases/download/v1.2.3/kubectl-trainjob_linux_amd64.tar.gz\n    sha256: " + strings.Repeat("a", 64) + "\n    bin: kubectl-trainjob\n",
		"    uri: https://github.com/kubectl-trainjob/kubectl-trainjob/releases/download/v1.2.3/kubectl-trainjob_windows_amd64.zip\n    sha256: " + strings.Repeat("e", 64) + "\n    bin: kubectl-trainjob.exe\n",
		"store/trainjob/v1.2.3/kubectl_complete-trainjob",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("no %q in the manifest:\n%s", want, out)
		}
	}
	out, err = renderManifest(string(tmpl), "v1.2.3", "http://127.0.0.1:8080/r/", results)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "uri: http://127.0.0.1:8080/r/v1.2.3/kubectl-trainjob_darwin_arm64.tar.gz\n") {
		t.Errorf("-base-url is not used:\n%s", out)
	}
	if _, err := renderManifest(string(tmpl), "v1.2.3", "", results[:4]); err == nil || !strings.Contains(err.Error(), "kubectl-trainjob_windows_amd64.zip, which was not built") {
		t.Errorf("an archive the template names but was not built: err = %v", err)
	}
	extra := append(results, built{platform: platform{"linux", "riscv64"}})
	if _, err := renderManifest(string(tmpl), "v1.2.3", "", extra); err == nil || !strings.Contains(err.Error(), "riscv64.tar.gz was built but the template has no platform") {
		t.Errorf("an archive built but not in the template: err = %v", err)
	}
}

// TestRenderPartialManifest renders the template for one platform: the others are gone from the manifest.
func TestRenderPartialManifest(t *testing.T) {
	tmpl, err := os.ReadFile("../.krew.yaml")
	if err != nil {
		t.Fatal(err)
	}
	results := []built{{platform: platform{"linux", "arm64"}, sha256: strings.Repeat("b", 64)}}
	out, err := renderPartialManifest(string(tmpl), "v1.2.3", "", results)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Spec struct {
			Version   string
			Platforms []struct {
				URI, Sha256, Bin string
				Selector         struct{ MatchLabels map[string]string }
			}
		}
	}
	if err := yaml.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	type platformSummary struct{ URI, Sha256, Bin, OS, Arch string }
	var got []platformSummary
	for _, p := range m.Spec.Platforms {
		got = append(got, platformSummary{p.URI, p.Sha256, p.Bin, p.Selector.MatchLabels["os"], p.Selector.MatchLabels["arch"]})
	}
	want := []platformSummary{{
		URI:    "https://github.com/kubectl-trainjob/kubectl-trainjob/releases/download/v1.2.3/kubectl-trainjob_linux_arm64.tar.gz",
		Sha256: strings.Repeat("b", 64), Bin: "kubectl-trainjob", OS: "linux", Arch: "arm64",
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("platforms (-want +got):\n%s", diff)
	}
	if m.Spec.Version != "v1.2.3" || !strings.Contains(string(out), "store/trainjob/v1.2.3/kubectl_complete-trainjob") {
		t.Errorf("the rest of the manifest is lost:\n%s", out)
	}
}

// TestArchives packs the same files twice and reads them back: same bytes, names, modes.
func TestArchives(t *testing.T) {
	files := []archiveFile{{"kubectl-trainjob", []byte("binary"), 0o755}, {"LICENSE", []byte("license"), 0o644}}
	mtime := time.Unix(1700000000, 0)
	for _, tc := range []struct {
		name  string
		write func(io.Writer, []archiveFile, time.Time) error
		read  func(*testing.T, []byte) []archiveFile
	}{
		{"tar.gz", writeTarGz, readTarGz},
		{"zip", writeZip, readZip},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var a, b bytes.Buffer
			if err := tc.write(&a, files, mtime); err != nil {
				t.Fatal(err)
			}
			if err := tc.write(&b, files, mtime); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(a.Bytes(), b.Bytes()) {
				t.Error("the same files packed twice differ")
			}
			if diff := cmp.Diff(files, tc.read(t, a.Bytes()), cmp.AllowUnexported(archiveFile{})); diff != "" {
				t.Errorf("read back (-want +got):\n%s", diff)
			}
		})
	}
}

func readTarGz(t *testing.T, data []byte) []archiveFile {
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var out []archiveFile
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, archiveFile{hdr.Name, body, hdr.Mode})
	}
}

func readZip(t *testing.T, data []byte) []archiveFile {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	var out []archiveFile
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(rc)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, archiveFile{f.Name, body, int64(f.Mode().Perm())})
	}
	return out
}
