// Command build makes the krew release of kubectl-trainjob (`make krew`): for each platform a stripped,
// static binary with the version in it, packed with LICENSE and the kubectl_complete-trainjob shim
// (tar.gz; zip for Windows), the archives' sha256s, and the krew manifest rendered from the
// krew-release-bot template (krew/.krew.yaml) with the real URIs, hashes and version.
//
// It prints each binary's and archive's size. It runs `go build` and nothing else: no network, no git.
//
//	go run ./krew/build -version v0.1.0 -commit $(git rev-parse HEAD) -out dist
package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"time"

	"k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/yaml"
)

// defaultPlatforms are the os/arch pairs of a release.
const defaultPlatforms = "linux/amd64,linux/arm64,darwin/amd64,darwin/arm64,windows/amd64"

// versionPackage is where the binary's version and commit are set (-ldflags -X).
const versionPackage = "github.com/kubectl-trainjob/kubectl-trainjob/pkg/version"

// binName is the plugin's executable; kubectl finds `kubectl trainjob` by it.
const binName = "kubectl-trainjob"

type options struct {
	version, commit  string
	out              string
	baseURL          string
	template         string
	manifestName     string
	platforms        string
	pkg              string
	license          string
	completion       string
	goBuildExtraArgs string
	// partial drops from the manifest the template's platforms that were not built (tests build only
	// their own platform: cross-compiling all five costs a cold CI run ~20 minutes).
	partial bool
}

func main() {
	var o options
	flag.StringVar(&o.version, "version", "", "release version (a tag like v0.1.0); anything else, e.g. a commit, becomes v0.0.0-dev+<it>")
	flag.StringVar(&o.commit, "commit", "unknown", "git commit written into the binaries")
	flag.StringVar(&o.out, "out", "dist", "output folder")
	flag.StringVar(&o.baseURL, "base-url", "", "release download URL, <base-url>/<version>/<archive> (default: the URLs written in the template)")
	flag.StringVar(&o.template, "template", "krew/.krew.yaml", "krew-release-bot template of the manifest")
	flag.StringVar(&o.manifestName, "manifest", "trainjob.yaml", "file name of the rendered manifest in -out (krew: <plugin name>.yaml)")
	flag.StringVar(&o.platforms, "platforms", defaultPlatforms, "comma-separated os/arch pairs to build")
	flag.StringVar(&o.pkg, "package", "./cmd/kubectl-trainjob", "main package to build")
	flag.StringVar(&o.license, "license", "LICENSE", "license file packed into each archive")
	flag.StringVar(&o.completion, "completion", "krew/kubectl_complete-trainjob", "completion shim packed into each archive")
	flag.StringVar(&o.goBuildExtraArgs, "gobuild-args", "", "extra `go build` arguments, space-separated (e.g. -tags=x)")
	flag.BoolVar(&o.partial, "partial", false, "render the manifest with only the -platforms built (for tests; a release needs every platform)")
	flag.Parse()
	if err := run(o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// platform is one os/arch pair of the release.
type platform struct{ os, arch string }

func (p platform) String() string { return p.os + "/" + p.arch }

func (p platform) binary() string {
	if p.os == "windows" {
		return binName + ".exe"
	}
	return binName
}

// archive is the release asset's name: what the template's URLs end with.
func (p platform) archive() string {
	ext := ".tar.gz"
	if p.os == "windows" {
		ext = ".zip"
	}
	return fmt.Sprintf("%s_%s_%s%s", binName, p.os, p.arch, ext)
}

func parsePlatforms(s string) ([]platform, error) {
	var ps []platform
	for _, f := range strings.Split(s, ",") {
		goos, goarch, ok := strings.Cut(strings.TrimSpace(f), "/")
		if !ok || goos == "" || goarch == "" {
			return nil, fmt.Errorf("invalid platform %q: want os/arch", f)
		}
		ps = append(ps, platform{goos, goarch})
	}
	return ps, nil
}

// ReleaseVersion is the version krew and the binary carry: a v-prefixed semantic version, as krew requires
// (its installation/semver parses with k8s.io/apimachinery's ParseSemantic after checking the "v"). Anything
// else — `git describe --always` of an untagged commit, say — becomes the build metadata of v0.0.0-dev.
func ReleaseVersion(v string) string {
	if strings.HasPrefix(v, "v") {
		if _, err := version.ParseSemantic(v); err == nil {
			return v
		}
	}
	meta := regexp.MustCompile(`[^0-9A-Za-z-]+`).ReplaceAllString(v, "-")
	if meta = strings.Trim(meta, "-"); meta == "" {
		return "v0.0.0-dev"
	}
	return "v0.0.0-dev+" + meta
}

// built is one platform's result.
type built struct {
	platform
	binSize, archiveSize int64
	sha256               string
}

func run(o options, stdout io.Writer) error {
	if o.version == "" {
		return errors.New("-version is required")
	}
	platforms, err := parsePlatforms(o.platforms)
	if err != nil {
		return err
	}
	tmpl, err := os.ReadFile(o.template)
	if err != nil {
		return err
	}
	license, err := os.ReadFile(o.license)
	if err != nil {
		return fmt.Errorf("the archives need a license file: %w", err)
	}
	shim, err := os.ReadFile(o.completion)
	if err != nil {
		return fmt.Errorf("the archives need the completion shim: %w", err)
	}
	mtime := time.Now()
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		sec, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("SOURCE_DATE_EPOCH=%q: %w", s, err)
		}
		mtime = time.Unix(sec, 0)
	}
	ver := ReleaseVersion(o.version)
	if ver != o.version {
		fmt.Fprintf(stdout, "version %q is not a v-prefixed semantic version (krew needs one): releasing it as %s\n", o.version, ver)
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "kubectl-trainjob-krew-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

	ldflags := fmt.Sprintf("-s -w -X %s.Version=%s -X %s.GitCommit=%s", versionPackage, ver, versionPackage, o.commit)
	var results []built
	for _, p := range platforms {
		bin := filepath.Join(work, p.os+"_"+p.arch, p.binary())
		args := []string{"build", "-trimpath", "-ldflags", ldflags, "-o", bin}
		args = append(args, strings.Fields(o.goBuildExtraArgs)...)
		cmd := exec.Command("go", append(args, o.pkg)...)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.os, "GOARCH="+p.arch)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		start := time.Now()
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("go build for %s: %w", p, err)
		}
		exe, err := os.ReadFile(bin)
		if err != nil {
			return err
		}
		files := []archiveFile{
			{name: p.binary(), data: exe, mode: 0o755},
			{name: "LICENSE", data: license, mode: 0o644},
			{name: filepath.Base(o.completion), data: shim, mode: 0o755},
		}
		var buf bytes.Buffer
		if p.os == "windows" {
			err = writeZip(&buf, files, mtime)
		} else {
			err = writeTarGz(&buf, files, mtime)
		}
		if err != nil {
			return fmt.Errorf("pack %s: %w", p.archive(), err)
		}
		if err := os.WriteFile(filepath.Join(o.out, p.archive()), buf.Bytes(), 0o644); err != nil {
			return err
		}
		sum := sha256.Sum256(buf.Bytes())
		b := built{platform: p, binSize: int64(len(exe)), archiveSize: int64(buf.Len()), sha256: hex.EncodeToString(sum[:])}
		results = append(results, b)
		fmt.Fprintf(stdout, "%-14s binary %s  %-40s %s  (built in %v)\n", p, size(b.binSize), p.archive(), size(b.archiveSize), time.Since(start).Round(time.Second))
	}

	var sums strings.Builder
	for _, b := range results {
		fmt.Fprintf(&sums, "%s  %s\n", b.sha256, b.archive())
	}
	if err := os.WriteFile(filepath.Join(o.out, "checksums.txt"), []byte(sums.String()), 0o644); err != nil {
		return err
	}
	render := renderManifest
	if o.partial {
		render = renderPartialManifest
	}
	manifest, err := render(string(tmpl), ver, o.baseURL, results)
	if err != nil {
		return fmt.Errorf("render %s: %w", o.template, err)
	}
	manifestPath := filepath.Join(o.out, o.manifestName)
	if err := os.WriteFile(manifestPath, manifest, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s and %s (version %s)\n", manifestPath, filepath.Join(o.out, "checksums.txt"), ver)
	return nil
}

// renderManifest executes the krew-release-bot template as the bot does: {{ .TagName }} is the version and
// {{ addURIAndSha URL TAG }} becomes the `uri:` and `sha256:` lines of the archive URL names — here from the
// archives just built, with the URL moved under baseURL when one is given. Every built archive must be named
// by the template, and every archive the template names must have been built.
func renderManifest(tmpl, ver, baseURL string, results []built) ([]byte, error) {
	byName := map[string]built{}
	for _, b := range results {
		byName[b.archive()] = b
	}
	used := map[string]bool{}
	funcs := template.FuncMap{
		"addURIAndSha": func(url, tag string) (string, error) {
			t, err := template.New("url").Parse(url)
			if err != nil {
				return "", err
			}
			var u strings.Builder
			if err := t.Execute(&u, struct{ TagName string }{tag}); err != nil {
				return "", err
			}
			uri := u.String()
			asset := path.Base(uri)
			b, ok := byName[asset]
			if !ok {
				return "", fmt.Errorf("the template names %s, which was not built (built: %s)", asset, strings.Join(sortedKeys(byName), ", "))
			}
			used[asset] = true
			if baseURL != "" {
				uri = strings.TrimSuffix(baseURL, "/") + "/" + tag + "/" + asset
			}
			// The bot's own output, indentation included: the template puts the call under a platform item.
			return fmt.Sprintf("uri: %s\n    sha256: %s", uri, b.sha256), nil
		},
	}
	t, err := template.New("krew").Funcs(funcs).Parse(tmpl)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := t.Execute(&out, struct{ TagName string }{ver}); err != nil {
		return nil, err
	}
	for name := range byName {
		if !used[name] {
			return nil, fmt.Errorf("%s was built but the template has no platform for it", name)
		}
	}
	return out.Bytes(), nil
}

// unbuilt is the sha256 renderPartialManifest gives the template's platforms that were not built.
const unbuilt = "unbuilt"

// renderPartialManifest renders the template with only the platforms in results: the others are rendered
// with a placeholder archive, then removed from spec.platforms.
func renderPartialManifest(tmpl, ver, baseURL string, results []built) ([]byte, error) {
	all := slices.Clone(results)
	have := map[string]bool{}
	for _, b := range results {
		have[b.archive()] = true
	}
	defaults, err := parsePlatforms(defaultPlatforms)
	if err != nil {
		return nil, err
	}
	for _, p := range defaults {
		if !have[p.archive()] {
			all = append(all, built{platform: p, sha256: unbuilt})
		}
	}
	out, err := renderManifest(tmpl, ver, baseURL, all)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := yaml.Unmarshal(out, &m); err != nil {
		return nil, err
	}
	spec, _ := m["spec"].(map[string]any)
	items, _ := spec["platforms"].([]any)
	kept := items[:0]
	for _, it := range items {
		if p, _ := it.(map[string]any); p["sha256"] != unbuilt {
			kept = append(kept, it)
		}
	}
	spec["platforms"] = kept
	return yaml.Marshal(m)
}

func sortedKeys(m map[string]built) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// archiveFile is one file at the root of an archive.
type archiveFile struct {
	name string
	data []byte
	mode int64
}

// writeTarGz packs files with fixed owner and time, so the same inputs give the same archive.
func writeTarGz(w io.Writer, files []archiveFile, mtime time.Time) error {
	gz := gzip.NewWriter(w)
	gz.ModTime = mtime
	tw := tar.NewWriter(gz)
	for _, f := range files {
		hdr := &tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: mtime, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

func writeZip(w io.Writer, files []archiveFile, mtime time.Time) error {
	zw := zip.NewWriter(w)
	for _, f := range files {
		hdr := &zip.FileHeader{Name: f.name, Method: zip.Deflate, Modified: mtime.UTC()}
		hdr.SetMode(os.FileMode(f.mode))
		fw, err := zw.CreateHeader(hdr)
		if err != nil {
			return err
		}
		if _, err := fw.Write(f.data); err != nil {
			return err
		}
	}
	return zw.Close()
}

// size prints n bytes in MiB, and the exact count.
func size(n int64) string {
	return fmt.Sprintf("%5.1f MiB (%d bytes)", float64(n)/(1<<20), n)
}
