package cluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Profile selects which components a cluster runs.
type Profile string

const (
	// ProfileAPI runs etcd and kube-apiserver with the CRDs installed.
	ProfileAPI Profile = "api"
	// ProfileFull adds kube-controller-manager, kube-scheduler, the JobSet controller and KWOK with fake nodes.
	ProfileFull Profile = "full"
)

// ToolsEnv names the environment variable that overrides where the component binaries are found.
const ToolsEnv = "TRAINJOB_TOOLS_BIN"

// modulePath identifies the repository root: the folder whose go.mod declares it.
const modulePath = "github.com/kubectl-trainjob/kubectl-trainjob"

// Options configure Start. The zero value starts the api profile with the default CRDs.
type Options struct {
	// Profile is ProfileAPI when empty.
	Profile Profile
	// CRDDirs are folders of CRD YAML to install. Default: test/crds and config/crd/bases of the repository.
	// A folder that does not exist is an error.
	CRDDirs []string
	// ToolsDir holds etcd, kube-apiserver, kube-controller-manager, kube-scheduler, jobset and kwok.
	// Default: $TRAINJOB_TOOLS_BIN, else bin/tools of the repository (where `make tools` links them).
	ToolsDir string
	// LogDir receives <component>.log of every component. Default: a folder inside the cluster's working folder,
	// removed by Stop (StartForTest keeps it when the test fails).
	LogDir string
	// APIServerFlags are more kube-apiserver flags, by name without the dashes (e.g. "audit-policy-file").
	APIServerFlags map[string]string
	// JobSet runs the JobSet controller and its webhooks in the api profile too (the full profile always does);
	// without kube-controller-manager its Jobs get no pods.
	JobSet bool

	// The rest applies to ProfileFull only.

	// GPUNodes is the number of GPU nodes gpu-node-0, gpu-node-1, …; 0 means 4, a negative number none.
	GPUNodes int
	// CPUNodes is the number of CPU-only nodes cpu-node-0, …; 0 means 2, a negative number none.
	CPUNodes int
	// GPUsPerNode is the nvidia.com/gpu capacity of each GPU node; 0 means 8.
	GPUsPerNode int
	// PodRunDuration is how long a simulated container runs before it exits; 0 means 1s. A pod may ask for
	// another time with the env var SIM_RUN_SECONDS.
	PodRunDuration time.Duration
	// RealNode adds the real node RealNodeName: a kubelet with containerd and runc that runs real containers
	// (README "The real node"). Start fails with RealNodeSupported's reason where the machine cannot run it.
	RealNode bool
	// RealNodeImages are image archives (images.WriteArchive, `make image`) the real node has from the start:
	// nothing is pulled, so every image a pod of the real node uses must be one of them.
	RealNodeImages []string
	// Kueue runs Kueue with its webhooks and the TrainJob and JobSet integrations, and creates the
	// ResourceFlavor KueueResourceFlavor of the GPU nodes and the ClusterQueue KueueClusterQueue with
	// KueueGPUQuota nvidia.com/gpu; CreateLocalQueue adds a LocalQueue to a namespace (README "Kueue").
	Kueue bool

	// multiKueueManager makes the cluster a MultiKueue management cluster (StartMultiKueue): Kueue in the api
	// profile, its ClusterQueue admitting through MultiKueue's admission check.
	multiKueueManager bool
}

// Cluster is a running local cluster. Stop it when done.
type Cluster struct {
	// Config is a client configuration of a cluster administrator (group system:masters).
	Config *rest.Config
	// KubeconfigPath is a kubeconfig file with Config in it, for kubectl and for processes.
	KubeconfigPath string
	// Dir is the cluster's working folder (etcd data, certificates, configuration, simulated pod logs);
	// Stop removes it.
	Dir string
	// LogDir holds <component>.log of every component.
	LogDir string
	// Profile is the profile the cluster runs.
	Profile Profile

	opts       Options
	kubeconfig []byte
	client     kubernetes.Interface
	env        *envtest.Environment
	webhooks   *envtest.WebhookInstallOptions
	// kueueWebhooks and kueueHealthPort are Kueue's, with Options.Kueue.
	kueueWebhooks   *envtest.WebhookInstallOptions
	kueueHealthPort int
	procs           []*process // started by this package, in start order
	node            *realNode  // with Options.RealNode
	components      []string   // names of the log files, in start order
	podLogsMu       sync.Mutex // serialises writes to the simulated pod log files
	stopOnce        sync.Once
	stopErr         error
}

// Start starts a cluster and returns once every component is ready: the CRDs are established, and in the full
// profile the nodes are Ready and schedulable and the JobSet webhooks answer. On error everything started is
// stopped again, and the error ends with the tail of every component's log.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	removeAbandonedNodes()
	removeAbandonedDirs()
	dir, err := os.MkdirTemp("", workDirPrefix)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	logDir := opts.LogDir
	if logDir == "" {
		logDir = filepath.Join(dir, "logs")
	}
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	c := &Cluster{Dir: dir, LogDir: logDir, Profile: opts.Profile, opts: opts}
	if err := c.start(ctx); err != nil {
		var tails strings.Builder
		c.DumpLogs(&tails, 30)
		return nil, errors.Join(fmt.Errorf("start local cluster (%s profile): %w\n%s", opts.Profile, err, tails.String()), c.Stop())
	}
	return c, nil
}

func (c *Cluster) start(ctx context.Context) error {
	if err := c.startAPIServer(ctx); err != nil {
		return err
	}
	if c.Profile == ProfileFull {
		return c.startFull(ctx)
	}
	if c.opts.JobSet {
		if err := c.startJobSetAlone(ctx); err != nil {
			return err
		}
	}
	if c.opts.Kueue {
		return c.startKueueAlone(ctx)
	}
	return nil
}

// A working folder is os.TempDir()/<workDirPrefix>*, and ownerFile in it holds the pid of the process that
// started the cluster.
const (
	workDirPrefix = "trainjob-cluster-"
	ownerFile     = "owner.pid"
)

// removeAbandonedDirs removes the working folders of clusters whose process died without stopping them (a
// test binary killed on timeout); their components died with it.
func removeAbandonedDirs() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), workDirPrefix+"*"))
	for _, dir := range dirs {
		data, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue // not a working folder, or one being created
		}
		pid, err := strconv.Atoi(string(data))
		if err != nil || pid <= 0 {
			continue
		}
		if !alive(pid) {
			_ = os.RemoveAll(dir)
		}
	}
}

// alive reports whether process pid exists and is not a zombie.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true // cannot tell: keep the folder
	}
	// The state follows the command name, which is in parentheses and may contain spaces.
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

// Stop stops every component (controllers first, then kube-apiserver and etcd) and removes Dir, and LogDir
// unless it was given in Options. It is safe to call more than once.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		var errs []error
		// The real node first: its kubelet must not see the control plane go, and its containers must be
		// killed by a running containerd.
		if c.node != nil {
			errs = append(errs, c.node.stop())
		}
		var wg sync.WaitGroup
		errCh := make(chan error, len(c.procs))
		for _, p := range c.procs {
			wg.Go(func() { errCh <- p.stop() })
		}
		wg.Wait()
		close(errCh)
		for err := range errCh {
			errs = append(errs, err)
		}
		for _, w := range []*envtest.WebhookInstallOptions{c.webhooks, c.kueueWebhooks} {
			if w != nil {
				errs = append(errs, w.Cleanup())
			}
		}
		if c.env != nil {
			errs = append(errs, c.env.Stop())
		}
		errs = append(errs, os.RemoveAll(c.Dir))
		c.stopErr = errors.Join(errs...)
	})
	return c.stopErr
}

// WriteKubeconfig writes a kubeconfig for the cluster administrator to path, creating its folder.
func (c *Cluster) WriteKubeconfig(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, c.kubeconfig, 0o600)
}

// Clientset returns a client of the cluster administrator.
func (c *Cluster) Clientset() kubernetes.Interface { return c.client }

// DumpLogs writes the last n lines of every component's log to w, in the order the components started.
func (c *Cluster) DumpLogs(w io.Writer, n int) {
	for _, name := range c.components {
		path := filepath.Join(c.LogDir, name+".log")
		fmt.Fprintf(w, "==> %s (last %d lines) <==\n", path, n)
		lines, err := tail(path, n)
		if err != nil {
			fmt.Fprintf(w, "%v\n", err)
			continue
		}
		for _, l := range lines {
			fmt.Fprintln(w, l)
		}
	}
}

// tail returns the last n lines of the file at path.
func tail(path string, n int) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var lines []string
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 64*1024), 1024*1024)
	for s.Scan() {
		lines = append(lines, s.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return lines, s.Err()
}

// withDefaults fills in the defaults and checks that the binaries and CRD folders exist.
func (o Options) withDefaults() (Options, error) {
	if o.Profile == "" {
		o.Profile = ProfileAPI
	}
	if o.Profile != ProfileAPI && o.Profile != ProfileFull {
		return o, fmt.Errorf("unknown profile %q (want %q or %q)", o.Profile, ProfileAPI, ProfileFull)
	}
	var root string
	if o.ToolsDir == "" || o.CRDDirs == nil {
		var err error
		if root, err = RepoRoot(); err != nil {
			return o, err
		}
	}
	if o.ToolsDir == "" {
		o.ToolsDir = os.Getenv(ToolsEnv)
	}
	if o.ToolsDir == "" {
		o.ToolsDir = filepath.Join(root, "bin", "tools")
	}
	binaries := o.Profile.binaries()
	if o.JobSet && o.Profile == ProfileAPI {
		binaries = append(binaries, "jobset")
	}
	if o.RealNode {
		if o.Profile != ProfileFull {
			return o, fmt.Errorf("the real node needs the %s profile", ProfileFull)
		}
		binaries = append(binaries, "kubelet", "kube-proxy", "pause", "cni/bridge", "cni/host-local", "cni/loopback")
	}
	if o.Kueue {
		if o.Profile != ProfileFull && !o.multiKueueManager {
			return o, fmt.Errorf("Kueue needs the %s profile (or StartMultiKueue's management cluster)", ProfileFull)
		}
		binaries = append(binaries, "kueue", "kueue-manifests/webhooks.yaml", "kueue-manifests/crd")
	}
	for _, name := range binaries {
		if _, err := os.Stat(filepath.Join(o.ToolsDir, name)); err != nil {
			return o, fmt.Errorf("%s not found in %s: run `make tools` to build the local cluster's binaries (or set %s)", name, o.ToolsDir, ToolsEnv)
		}
	}
	if o.CRDDirs == nil {
		o.CRDDirs = []string{filepath.Join(root, "test", "crds"), filepath.Join(root, "config", "crd", "bases")}
	}
	if o.Kueue {
		o.CRDDirs = append(slices.Clip(o.CRDDirs), filepath.Join(kueueManifests(o.ToolsDir), "crd"))
	}
	for _, dir := range o.CRDDirs {
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return o, fmt.Errorf("CRD folder %s does not exist (Options.CRDDirs; `make generate` writes config/crd/bases)", dir)
		}
	}
	if o.GPUNodes == 0 {
		o.GPUNodes = 4
	}
	if o.CPUNodes == 0 {
		o.CPUNodes = 2
	}
	if o.GPUsPerNode == 0 {
		o.GPUsPerNode = 8
	}
	if o.PodRunDuration == 0 {
		o.PodRunDuration = time.Second
	}
	return o, nil
}

// binaries lists the programs a profile runs.
func (p Profile) binaries() []string {
	api := []string{"etcd", "kube-apiserver"}
	if p == ProfileAPI {
		return api
	}
	return append(api, "kube-controller-manager", "kube-scheduler", "jobset", "kwok")
}

// RepoRoot returns the root folder of this repository: the nearest folder above this package's source, or else
// above the working directory, whose go.mod declares the project's module.
func RepoRoot() (string, error) {
	var starts []string
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		starts = append(starts, filepath.Dir(file))
	}
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	for _, dir := range starts {
		for {
			if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && declaresModule(data, modulePath) {
				return dir, nil
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	return "", fmt.Errorf("cannot find the repository root (a go.mod of module %s) above %s", modulePath, strings.Join(starts, " or "))
}

func declaresModule(gomod []byte, module string) bool {
	for line := range bytes.Lines(gomod) {
		if f := strings.Fields(string(line)); len(f) == 2 && f[0] == "module" && strings.Trim(f[1], `"`) == module {
			return true
		}
	}
	return false
}
