package cluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Containerd is a containerd of the cluster's own: its root, state, socket and every mount it makes are in
// its folder, so it neither sees nor touches another containerd on the machine. It runs Debian's containerd
// and runc (`make tools` installs them on Linux when run as root).
type Containerd struct {
	// Socket is containerd's gRPC socket (`ctr -a`, the kubelet's container runtime endpoint).
	Socket string
	dir    string
	proc   *process
}

// containerdConfig is what differs between the containerd of a test and that of a real node.
type containerdConfig struct {
	// cri runs the CRI plugin (what a kubelet talks to); without it containerd only imports and runs images.
	cri bool
	// sandboxImage is the pause image of pod sandboxes (CRI only).
	sandboxImage string
	// cniBinDir and cniConfDir hold the CNI plugins and the network configuration (CRI only).
	cniBinDir, cniConfDir string
	// netns is a network namespace (a path) to run containerd in; empty: this process's.
	netns string
}

// containerdStartTimeout bounds how long containerd may take to answer on its socket.
const containerdStartTimeout = 30 * time.Second

// StartContainerd starts a containerd without the CRI plugin (enough to import and run images) in dir,
// writing its log to logPath. Stop it when done; dir is left for the caller to remove.
func StartContainerd(ctx context.Context, dir, logPath string) (*Containerd, error) {
	out, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	return startContainerd(ctx, dir, out, containerdConfig{})
}

// startContainerd writes containerd's configuration into dir, starts it with its output to out (which it
// closes) and waits until it answers.
func startContainerd(ctx context.Context, dir string, out *os.File, cfg containerdConfig) (*Containerd, error) {
	if err := RealContainersSupported(); err != nil {
		out.Close()
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o711); err != nil {
		out.Close()
		return nil, err
	}
	d := &Containerd{Socket: filepath.Join(dir, "containerd.sock"), dir: dir}
	configPath := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(configPath, containerdTOML(dir, d.Socket, cfg), 0o644); err != nil {
		out.Close()
		return nil, err
	}
	binary, args := inNetns(cfg.netns, "containerd", "--config", configPath)
	p, err := startLogged(out, "containerd", binary, args, nil)
	if err != nil {
		return nil, err
	}
	d.proc = p
	err = waitUntil(ctx, containerdStartTimeout, "containerd at "+d.Socket, []*process{p}, func(ctx context.Context) (bool, error) {
		if _, err := d.Ctr(ctx, "version"); err != nil {
			return false, err
		}
		return true, nil
	})
	if err != nil {
		return nil, errors.Join(err, d.Stop())
	}
	return d, nil
}

// containerdTOML is containerd's configuration: everything it keeps is in dir. The CRI settings are the
// ones a kubelet on this kind of machine needs (test/cluster/README.md, "The real node").
func containerdTOML(dir, socket string, cfg containerdConfig) []byte {
	var b bytes.Buffer
	disabled := ""
	if !cfg.cri {
		disabled = "disabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n"
	}
	fmt.Fprintf(&b, `version = 2
root = %q
state = %q
plugin_dir = %q
%s[grpc]
  address = %q
[plugins."io.containerd.internal.v1.opt"]
  path = %q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), filepath.Join(dir, "plugins"), disabled, socket, filepath.Join(dir, "opt"))
	if !cfg.cri {
		return b.Bytes()
	}
	// restrict_oom_score_adj: runc may not lower a container's oom_score_adj below containerd's own here,
	// and without it every sandbox fails. netns_mounts_under_state_dir keeps the pods' network namespaces in
	// dir rather than in the machine's /var/run/netns.
	fmt.Fprintf(&b, `[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    snapshotter = "overlayfs"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
`, cfg.sandboxImage, cfg.cniBinDir, cfg.cniConfDir)
	return b.Bytes()
}

// Ctr runs `ctr` against this containerd and returns its output.
func (d *Containerd) Ctr(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "ctr", append([]string{"--address", d.Socket}, args...)...)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return out.Bytes(), nil
}

// Import loads an image archive into the namespace the kubelet uses (k8s.io).
func (d *Containerd) Import(ctx context.Context, archive string) error {
	_, err := d.Ctr(ctx, "--namespace", criNamespace, "images", "import", archive)
	return err
}

// criNamespace is the containerd namespace of the CRI plugin's images and containers.
const criNamespace = "k8s.io"

// Stop kills every container, stops containerd and unmounts whatever it left mounted in its folder. Killing
// the containers has a minute: on a loaded machine each force-killed task's shim takes seconds to exit, and the
// processes' stopTimeout was spent by a few of them.
func (d *Containerd) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), containersStopTimeout)
	defer cancel()
	var errs []error
	if d.proc.exited() == nil {
		errs = append(errs, d.removeContainers(ctx))
	}
	errs = append(errs, d.proc.stop(), unmountUnder(d.dir))
	return errors.Join(errs...)
}

// containersStopTimeout bounds the removal of every container at Stop.
const containersStopTimeout = time.Minute

// removeContainers kills and deletes every task and container of every namespace, one ctr for each kind of a
// namespace (ctr goes on past an id it fails on); a container's shim exits with it.
func (d *Containerd) removeContainers(ctx context.Context) error {
	out, err := d.Ctr(ctx, "namespaces", "list", "--quiet")
	if err != nil {
		return err
	}
	var errs []error
	for _, ns := range strings.Fields(string(out)) {
		for _, kind := range []string{"tasks", "containers"} {
			list, err := d.Ctr(ctx, "--namespace", ns, kind, "list", "--quiet")
			if err != nil {
				errs = append(errs, err)
				continue
			}
			ids := strings.Fields(string(list))
			if len(ids) == 0 {
				continue
			}
			args := []string{"--namespace", ns, kind, "delete"}
			if kind == "tasks" {
				args = append(args, "--force")
			}
			if _, err := d.Ctr(ctx, append(args, ids...)...); err != nil {
				if left := d.left(ctx, ns, kind, ids); len(left) > 0 {
					errs = append(errs, fmt.Errorf("%w (still there: %s)", err, strings.Join(left, " ")))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// left are those of ids that ctr still lists among the tasks or containers (kind) of ns, or all of them when it
// cannot tell: a delete that failed ("not found" when the kubelet deleted it first, "ttrpc: closed" when the
// task's shim exits under the delete) failed only for what is still there.
func (d *Containerd) left(ctx context.Context, ns, kind string, ids []string) []string {
	out, err := d.Ctr(ctx, "--namespace", ns, kind, "list", "--quiet")
	if err != nil {
		return ids
	}
	listed := strings.Fields(string(out))
	return slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return !slices.Contains(listed, id) })
}

// inNetns returns the command line that runs name with args in the network namespace netns (a path), or
// in this process's when netns is empty. nsenter enters only the network namespace and then execs, so the
// program keeps the mounts every other component sees, and the parent-death signal.
func inNetns(netns, name string, args ...string) (string, []string) {
	if netns == "" {
		return name, args
	}
	return "nsenter", append([]string{"--net=" + netns, "--", name}, args...)
}

// unmountUnder unmounts every mount point at or below dir, deepest first.
func unmountUnder(dir string) error {
	points, err := mountPointsUnder(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range points {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// mountPointsUnder lists the mount points at or below dir, deepest first.
func mountPointsUnder(dir string) ([]string, error) {
	if runtime.GOOS != "linux" {
		return nil, nil
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dir = filepath.Clean(dir)
	var points []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 5 {
			continue
		}
		p := unescapeMountinfo(fields[4])
		if p == dir || strings.HasPrefix(p, dir+"/") {
			points = append(points, p)
		}
	}
	slices.SortFunc(points, func(a, b string) int { return len(b) - len(a) })
	return slices.Compact(points), s.Err()
}

// unescapeMountinfo undoes the octal escapes (\040 for a space) of a /proc/self/mountinfo field.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var c byte
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &c); err == nil {
				b.WriteByte(c)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// RealContainersSupported returns nil when this machine can run real containers (Linux, root, containerd,
// runc and ctr on the PATH), and otherwise one line saying why not.
func RealContainersSupported() error {
	if runtime.GOOS != "linux" {
		return fmt.Errorf("real containers need Linux (this is %s)", runtime.GOOS)
	}
	if os.Geteuid() != 0 {
		return errors.New("real containers need root (containerd, runc, network namespaces)")
	}
	var missing []string
	for _, p := range []string{"containerd", "containerd-shim-runc-v2", "runc", "ctr", "nsenter"} {
		if _, err := exec.LookPath(p); err != nil {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("real containers need %s on the PATH: run `make tools` (it installs Debian's containerd and runc when run as root)", strings.Join(missing, ", "))
	}
	return nil
}
