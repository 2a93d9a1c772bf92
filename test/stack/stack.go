package stack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/scheme"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
)

// BinaryEnv names the environment variable that gives a kubectl-trainjob binary already built (`make test`,
// `make test-e2e` and `make test-chaos` set it to bin/kubectl-trainjob); without it, Binary builds one.
const BinaryEnv = "KUBECTL_TRAINJOB_BIN"

// operatorReadyTimeout bounds how long the operator may take to serve its webhooks after it starts.
const operatorReadyTimeout = 2 * time.Minute

// Options configure Up.
type Options struct {
	// Binary is the kubectl-trainjob binary the operator runs from.
	Binary string
	// Dir receives the operator's volumes (configuration, certificates) and its ServiceAccount's kubeconfig.
	Dir string
	// LogDir receives operator.log. Default: Dir.
	LogDir string
	// Logf reports progress and trouble with volumes. Default: nothing is reported.
	Logf func(format string, args ...any)
	// ExtraArgs are appended to the operator's command line (e.g. --pprof-bind-address=127.0.0.1:6060).
	ExtraArgs []string
	// Replicas is how many operator processes run, as the Deployment's replicas (default 1). With more than
	// one, the webhooks are reached through a stand-in for the webhook Service that spreads connections over
	// the ready replicas, and leader election picks the one that reconciles.
	Replicas int
}

// Stack is the product installed on a running local cluster.
type Stack struct {
	Cluster *cluster.Cluster
	// Client is a client of the cluster's administrator with the project's scheme.
	Client client.Client
	// Operator is the first replica; Replicas are all of them.
	Operator *Operator
	Replicas []*Operator

	// mu guards Replicas against the webhook Service's reads while a replica is run again.
	mu          sync.Mutex
	service     *service
	stopVolumes context.CancelFunc
}

// Up applies the manifests of config/default (all but the operator's Deployment) to c, runs the
// Deployment's container as a process of binary, binds claims to volumes, and returns once the operator is
// ready and the API server reaches its webhooks. On error, whatever it started is stopped.
func Up(ctx context.Context, c *cluster.Cluster, opts Options) (s *Stack, err error) {
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if opts.LogDir == "" {
		opts.LogDir = opts.Dir
	}
	root, err := cluster.RepoRoot()
	if err != nil {
		return nil, err
	}
	cl, err := client.New(c.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, err
	}
	s = &Stack{Cluster: c, Client: cl}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.Down())
			s = nil
		}
	}()

	objs, err := buildManifests(ctx, root)
	if err != nil {
		return s, err
	}
	pod, err := operatorDeployment(objs)
	if err != nil {
		return s, err
	}
	replicas := max(opts.Replicas, 1)
	ports := make([]operatorPorts, replicas)
	for i := range ports {
		if ports[i], err = freeOperatorPorts(); err != nil {
			return s, err
		}
	}
	webhookPort := ports[0].webhook
	if replicas > 1 {
		if s.service, err = startService(s.readyWebhooks); err != nil {
			return s, err
		}
		webhookPort = s.service.port()
	}
	var install []*unstructured.Unstructured
	for _, u := range objs {
		switch u.GetKind() {
		case "Deployment":
			continue // runs as a process
		case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
			if err := webhooksByURL(u, webhookPort); err != nil {
				return s, err
			}
		}
		install = append(install, u)
	}
	logf("applying %d objects of `kustomize build %s` (server-side; not the Deployment)", len(install), kustomizationDir)
	if err := applyObjects(ctx, cl, install); err != nil {
		return s, err
	}

	volumesCtx, stopVolumes := context.WithCancel(context.WithoutCancel(ctx))
	s.stopVolumes = stopVolumes
	if err := bindVolumes(volumesCtx, c.Clientset(), logf); err != nil {
		return s, err
	}

	kubeconfig := filepath.Join(opts.Dir, "operator", "kubeconfig")
	if err := os.MkdirAll(filepath.Dir(kubeconfig), 0o755); err != nil {
		return s, err
	}
	if err := serviceAccountKubeconfig(ctx, c.Config, pod, kubeconfig); err != nil {
		return s, err
	}
	if err := os.MkdirAll(opts.LogDir, 0o755); err != nil {
		return s, err
	}
	metricsToken, err := c.MetricsReaderToken(ctx)
	if err != nil {
		return s, err
	}
	for i := range replicas {
		// The first replica keeps the names a single operator has always had.
		name := "operator"
		if i > 0 {
			name = fmt.Sprintf("operator-%d", i)
		}
		lp, err := newLocalPod(filepath.Join(opts.Dir, name), pod, objs)
		if err != nil {
			return s, err
		}
		cfg, err := localConfig(lp, pod, ports[i])
		if err != nil {
			return s, err
		}
		o, err := startOperator(opts.Binary, pod, lp, kubeconfig, filepath.Join(opts.LogDir, name+".log"), cfg, opts.ExtraArgs)
		if o != nil {
			o.MetricsToken = metricsToken
			s.mu.Lock()
			s.Replicas = append(s.Replicas, o)
			s.mu.Unlock()
		}
		if err != nil {
			return s, err
		}
		logf("operator started: %v", o.Args)
	}
	s.Operator = s.Replicas[0]
	for i := range s.Replicas {
		if err := s.waitReplica(ctx, i); err != nil {
			return s, err
		}
	}
	return s, nil
}

// waitReplica polls until replica i is ready and the webhooks admit, failing at once if it exits.
func (s *Stack) waitReplica(ctx context.Context, i int) error {
	o := s.replica(i)
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, operatorReadyTimeout, true, func(ctx context.Context) (bool, error) {
		if err := o.Exited(); err != nil {
			// The exit is the news: the last probe's failure only says it was not ready yet.
			last = nil
			return false, err
		}
		if last = o.ready(ctx); last != nil {
			return false, nil
		}
		last = webhooksAdmit(ctx, s.Client)
		return last == nil, nil
	})
	if err != nil && last != nil {
		return fmt.Errorf("the operator is not ready after %v: %w (log: %s)", operatorReadyTimeout, last, o.LogPath)
	}
	return err
}

func (s *Stack) replica(i int) *Operator {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Replicas[i]
}

// RestartOperator stops the first replica as the kubelet would and runs it again with the same command line,
// its output appended to the same log, and returns once it is ready and its webhooks admit again.
func (s *Stack) RestartOperator(ctx context.Context) error {
	return s.rerunAfter(ctx, 0, (*Operator).Stop)
}

// KillOperator kills the first replica with SIGKILL (a crash: no graceful shutdown, no lease released), then
// runs it again as RestartOperator does.
func (s *Stack) KillOperator(ctx context.Context) error { return s.KillReplica(ctx, 0) }

// KillReplica kills replica i with SIGKILL and runs it again, as the kubelet restarts a crashed container.
func (s *Stack) KillReplica(ctx context.Context, i int) error {
	return s.rerunAfter(ctx, i, (*Operator).kill)
}

// CrashReplica kills replica i with SIGKILL and leaves it down, until RestartExited runs it again.
func (s *Stack) CrashReplica(i int) error { return s.replica(i).kill() }

// RestartExited runs again every replica whose process has ended (killed, or exited by itself: an operator
// that loses its leader election exits), as the kubelet restarts the Deployment's containers
// (restartPolicy Always), and waits until they are ready. It returns how many it ran again.
func (s *Stack) RestartExited(ctx context.Context) (int, error) {
	n := 0
	for i := range s.Replicas {
		if s.replica(i).Exited() == nil {
			continue
		}
		if err := s.rerunAfter(ctx, i, func(*Operator) error { return nil }); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// rerunAfter ends replica i with end, runs its command line again and waits until it is ready.
func (s *Stack) rerunAfter(ctx context.Context, i int, end func(*Operator) error) error {
	old := s.replica(i)
	if err := end(old); err != nil {
		return err
	}
	o, err := old.rerun()
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.Replicas[i] = o
	if i == 0 {
		s.Operator = o
	}
	s.mu.Unlock()
	return s.waitReplica(ctx, i)
}

// Leader is the index of the replica that holds the leader election, from each replica's own metric.
func (s *Stack) Leader(ctx context.Context) (int, error) {
	leader := -1
	for i := range s.Replicas {
		o := s.replica(i)
		if o.Exited() != nil {
			continue
		}
		leads, err := o.Leads(ctx)
		if err != nil {
			return -1, err
		}
		if leads {
			if leader >= 0 {
				return -1, fmt.Errorf("replicas %d and %d both lead", leader, i)
			}
			leader = i
		}
	}
	if leader < 0 {
		return -1, errors.New("no replica leads")
	}
	return leader, nil
}

// readyWebhooks are the webhook addresses of the replicas that run and pass their readiness probe: the
// endpoints of the webhook Service.
func (s *Stack) readyWebhooks(ctx context.Context) []string {
	s.mu.Lock()
	replicas := slices.Clone(s.Replicas)
	s.mu.Unlock()
	var addrs []string
	for _, o := range replicas {
		if o.Exited() == nil && o.ready(ctx) == nil {
			addrs = append(addrs, net.JoinHostPort(o.Config.Webhook.Host, strconv.Itoa(int(*o.Config.Webhook.Port))))
		}
	}
	return addrs
}

// StopReplicas stops every replica as the kubelet would (SIGTERM), as when the Deployment is scaled to zero,
// and leaves them down until RestartExited runs them again.
func (s *Stack) StopReplicas() error {
	var errs []error
	for i := range s.Replicas {
		errs = append(errs, s.replica(i).Stop())
	}
	return errors.Join(errs...)
}

// Down stops the operator and the volume binder; the cluster is the caller's to stop.
func (s *Stack) Down() error {
	errs := []error{s.StopReplicas()}
	if s.service != nil {
		s.service.close()
	}
	if s.stopVolumes != nil {
		s.stopVolumes()
	}
	return errors.Join(errs...)
}

// Binary returns the kubectl-trainjob binary to run: $KUBECTL_TRAINJOB_BIN, else one built from the
// repository's cmd/kubectl-trainjob into dir. It refuses a $KUBECTL_TRAINJOB_BIN older than a source it
// is built from: a variable left in a shell would otherwise test an old binary instead of the code.
func Binary(ctx context.Context, dir string) (string, error) {
	root, err := cluster.RepoRoot()
	if err != nil {
		return "", err
	}
	if bin := os.Getenv(BinaryEnv); bin != "" {
		info, err := os.Stat(bin)
		if err != nil {
			return "", fmt.Errorf("%s: %w", BinaryEnv, err)
		}
		newer, err := newestSource(ctx, root)
		if err != nil {
			return "", err
		}
		if newer.ModTime().After(info.ModTime()) {
			return "", fmt.Errorf("%s=%s is older than %s: run `make build`, or unset %s to have the tests build it",
				BinaryEnv, bin, newer.Name(), BinaryEnv)
		}
		return bin, nil
	}
	bin := filepath.Join(dir, "kubectl-trainjob")
	// make build's settings (static, -trimpath), so that both share Go's build cache.
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, "./cmd/kubectl-trainjob")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/kubectl-trainjob: %w\n%s", err, out)
	}
	return bin, nil
}

// newestSource is the most recently changed of the files cmd/kubectl-trainjob is built from in this module:
// the Go files and embedded files of every package it imports from here, go.mod and go.sum. Its Name is the
// path from the repository's root.
func newestSource(ctx context.Context, root string) (os.FileInfo, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-deps", "-f",
		`{{if .Module}}{{if .Module.Main}}{{range .GoFiles}}{{$.Dir}}/{{.}}{{"\n"}}{{end}}{{range .EmbedFiles}}{{$.Dir}}/{{.}}{{"\n"}}{{end}}{{end}}{{end}}`,
		"./cmd/kubectl-trainjob")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list ./cmd/kubectl-trainjob: %w\n%s", err, stderr.Bytes())
	}
	files := append(strings.Fields(string(out)), filepath.Join(root, "go.mod"), filepath.Join(root, "go.sum"))
	var newest os.FileInfo
	var newestPath string
	for _, f := range files {
		info, err := os.Stat(f)
		if err != nil {
			return nil, err
		}
		if newest == nil || info.ModTime().After(newest.ModTime()) {
			newest, newestPath = info, f
		}
	}
	rel, err := filepath.Rel(root, newestPath)
	if err != nil {
		rel = newestPath
	}
	return namedInfo{FileInfo: newest, name: rel}, nil
}

// namedInfo is a FileInfo named by its path.
type namedInfo struct {
	os.FileInfo
	name string
}

func (n namedInfo) Name() string { return n.name }
