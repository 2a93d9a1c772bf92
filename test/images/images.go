package images

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// NonRootUser is the user:group every image runs as (distroless's "nonroot").
const NonRootUser = "65532:65532"

// Spec describes an image of one static Linux binary.
type Spec struct {
	// Ref names the image, fully qualified (e.g. ghcr.io/kubectl-trainjob/kubectl-trainjob:v1.2.0): a short name
	// would be read as docker.io/library/… by some loaders and not by others.
	Ref string
	// Binary is the static Linux binary on this machine.
	Binary string
	// Path is where the binary is in the image; default /<base name of Binary>.
	Path string
	// Entrypoint is the image's entrypoint; default [Path].
	Entrypoint []string
	// Cmd is the image's default arguments.
	Cmd []string
	// User is the image's user; default NonRootUser.
	User string
	// Env is the image's environment (NAME=value).
	Env []string
	// Labels are the image's labels.
	Labels map[string]string
	// Arch is the binary's GOARCH; default this machine's.
	Arch string
	// Created is the image's and the file's time; the zero value means the Unix epoch, so that the same binary
	// gives the same image.
	Created time.Time
}

func (s Spec) withDefaults() Spec {
	if s.Path == "" {
		s.Path = "/" + path.Base(s.Binary)
	}
	if s.Entrypoint == nil {
		s.Entrypoint = []string{s.Path}
	}
	if s.User == "" {
		s.User = NonRootUser
	}
	if s.Arch == "" {
		s.Arch = runtime.GOARCH
	}
	if s.Created.IsZero() {
		s.Created = time.Unix(0, 0)
	}
	s.Created = s.Created.UTC()
	return s
}

// Image builds the image s describes.
func Image(s Spec) (v1.Image, error) {
	s = s.withDefaults()
	layer, err := binaryLayer(s)
	if err != nil {
		return nil, err
	}
	img, err := mutate.Append(empty.Image, mutate.Addendum{
		Layer:   layer,
		History: v1.History{Created: v1.Time{Time: s.Created}, CreatedBy: "COPY " + path.Base(s.Binary) + " " + s.Path},
	})
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", s.Arch
	cfg.Created = v1.Time{Time: s.Created}
	cfg.Config = v1.Config{
		Entrypoint: s.Entrypoint,
		Cmd:        s.Cmd,
		User:       s.User,
		Env:        s.Env,
		Labels:     s.Labels,
		WorkingDir: "/",
	}
	return mutate.ConfigFile(img, cfg)
}

// binaryLayer is a layer with s.Binary at s.Path, executable by everyone and owned by root (a non-root user
// cannot change it).
func binaryLayer(s Spec) (v1.Layer, error) {
	data, err := os.ReadFile(s.Binary)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if path.Dir(s.Path) != "/" {
		return nil, fmt.Errorf("image path %s: the binary must be at the root of the image", s.Path)
	}
	if err := tw.WriteHeader(&tar.Header{
		Name:     s.Path[1:],
		Typeflag: tar.TypeReg,
		Mode:     0o755,
		Size:     int64(len(data)),
		ModTime:  s.Created,
		Format:   tar.FormatPAX,
	}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(data); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layer := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layer)), nil })
}

// WriteArchive builds the image s describes and writes it to out as an image archive (`docker save` format)
// tagged s.Ref.
func WriteArchive(s Spec, out string) error {
	tag, err := name.NewTag(s.Ref, name.StrictValidation)
	if err != nil {
		return fmt.Errorf("image reference %q: %w", s.Ref, err)
	}
	img, err := Image(s)
	if err != nil {
		return fmt.Errorf("image %s: %w", s.Ref, err)
	}
	tmp := out + ".tmp"
	if err := tarball.WriteToFile(tmp, tag, img); err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	return os.Rename(tmp, out)
}

// Program builds the Go main package pkg of this repository (e.g. ./test/images/torchtrainer) as a static
// Linux binary in dir and writes its image, named ref, to dir/<base of pkg>.tar; it returns the archive.
func Program(ctx context.Context, repoRoot, pkg, ref, dir string) (string, error) {
	base := path.Base(pkg)
	binary := filepath.Join(dir, base)
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", binary, pkg)
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
	}
	archive := filepath.Join(dir, base+".tar")
	return archive, WriteArchive(Spec{Ref: ref, Binary: binary}, archive)
}
