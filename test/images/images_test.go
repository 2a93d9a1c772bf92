package images

import (
	"archive/tar"
	"bufio"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// dockerfileStage is what the last stage of a Dockerfile says about the image it makes.
type dockerfileStage struct {
	Path       string // destination of the COPY of the binary
	User       string
	Entrypoint []string
	Labels     map[string]string // ${VAR} references left as they are
}

// readDockerfile reads the last stage of the Dockerfile at path: continuation lines joined, comments dropped.
func readDockerfile(t *testing.T, path string) dockerfileStage {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var instructions []string
	var cur strings.Builder
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if more, ok := strings.CutSuffix(line, `\`); ok {
			cur.WriteString(more)
			continue
		}
		cur.WriteString(line)
		instructions = append(instructions, cur.String())
		cur.Reset()
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	var st dockerfileStage
	for _, in := range instructions {
		op, rest, _ := strings.Cut(in, " ")
		rest = strings.TrimSpace(rest)
		switch strings.ToUpper(op) {
		case "FROM":
			st = dockerfileStage{Labels: map[string]string{}}
		case "COPY":
			f := strings.Fields(rest)
			st.Path = f[len(f)-1]
		case "USER":
			st.User = rest
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(rest), &st.Entrypoint); err != nil {
				t.Fatalf("ENTRYPOINT %s: want the exec (JSON) form: %v", rest, err)
			}
		case "LABEL":
			for _, kv := range splitLabels(t, rest) {
				k, v, _ := strings.Cut(kv, "=")
				st.Labels[k] = strings.Trim(v, `"`)
			}
		}
	}
	return st
}

// splitLabels splits `a="x y" b="z"` into its key=value pairs.
func splitLabels(t *testing.T, s string) []string {
	t.Helper()
	var out []string
	var cur strings.Builder
	quoted := false
	for _, r := range s {
		switch {
		case r == '"':
			quoted = !quoted
			cur.WriteRune(r)
		case r == ' ' && !quoted:
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
		}
	}
	if quoted {
		t.Fatalf("LABEL %s: unbalanced quotes", s)
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

// The Dockerfile and `make image` must make the same image: same binary path, user, entrypoint and labels.
func TestDockerfileMatchesOperatorImage(t *testing.T) {
	got := readDockerfile(t, filepath.Join("..", "..", "Dockerfile"))
	spec := Operator("kubectl-trainjob", "ghcr.io/kubectl-trainjob/kubectl-trainjob:dev", "${VERSION}", "${GIT_COMMIT}")
	want := dockerfileStage{Path: spec.Path, User: spec.User, Entrypoint: spec.Entrypoint, Labels: spec.Labels}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the Dockerfile's last stage differs from the image make image builds (-test/images +Dockerfile):\n%s", diff)
	}
}

func TestWriteArchive(t *testing.T) {
	dir := t.TempDir()
	binary := filepath.Join(dir, "trainer")
	program := []byte("#!not really a program\n")
	if err := os.WriteFile(binary, program, 0o700); err != nil {
		t.Fatal(err)
	}
	created := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	spec := Spec{
		Ref:     "trainjob.local/trainer:v1",
		Binary:  binary,
		Cmd:     []string{"--steps", "3"},
		Env:     []string{"A=b"},
		Labels:  map[string]string{"l": "v"},
		Arch:    "arm64",
		Created: created,
	}
	archive := filepath.Join(dir, "trainer.tar")
	if err := WriteArchive(spec, archive); err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(spec.Ref)
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(archive, &tag)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	wantConfig := v1.Config{
		Entrypoint: []string{"/trainer"},
		Cmd:        []string{"--steps", "3"},
		User:       NonRootUser,
		Env:        []string{"A=b"},
		Labels:     map[string]string{"l": "v"},
		WorkingDir: "/",
	}
	if diff := cmp.Diff(wantConfig, cfg.Config); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
	if cfg.OS != "linux" || cfg.Architecture != "arm64" || !cfg.Created.Time.Equal(created) {
		t.Errorf("platform and time: got %s/%s %v, want linux/arm64 %v", cfg.OS, cfg.Architecture, cfg.Created.Time, created)
	}

	// One file: the binary, executable by everyone, owned by root.
	type entry struct {
		Name     string
		Mode     int64
		UID, GID int
		Content  string
	}
	var entries []entry
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, entry{h.Name, h.Mode, h.Uid, h.Gid, string(data)})
	}
	if diff := cmp.Diff([]entry{{"trainer", 0o755, 0, 0, string(program)}}, entries); diff != "" {
		t.Errorf("files of the image (-want +got):\n%s", diff)
	}

	// The same binary and spec give the same archive, byte for byte.
	again := filepath.Join(dir, "again.tar")
	if err := WriteArchive(spec, again); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(archive)
	b, _ := os.ReadFile(again)
	if string(a) != string(b) {
		t.Error("two archives of the same spec differ")
	}
}

func TestWriteArchiveRejects(t *testing.T) {
	binary := filepath.Join(t.TempDir(), "p")
	if err := os.WriteFile(binary, []byte("x"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		spec Spec
		want string
	}{
		{"a short name, which loaders expand differently", Spec{Ref: "pause:1", Binary: binary}, "image reference"},
		{"a reference without a tag", Spec{Ref: "trainjob.local/pause", Binary: binary}, "image reference"},
		{"a binary below the root", Spec{Ref: "trainjob.local/pause:1", Binary: binary, Path: "/bin/p"}, "root of the image"},
		{"a missing binary", Spec{Ref: "trainjob.local/pause:1", Binary: binary + ".missing"}, "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := WriteArchive(tc.spec, filepath.Join(t.TempDir(), "a.tar"))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
