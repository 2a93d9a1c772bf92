// Package optest runs the operator in-process against the local cluster's
// API server (test/cluster, api profile) for the operator's integration
// tests: one API server per test package (Main), operators started and
// stopped at will (StartOperator), its webhooks reachable from the API
// server by URL (InstallWebhooks), and deadline-bound polling (Eventually,
// Consistently). There is no JobSet controller: tests write JobSet status
// themselves, as upstream's integration tests do.
package optest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/config"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/scheme"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
)

// Namespace is the operator's namespace in the tests, as in config/default.
const Namespace = config.DefaultNamespace

// Polling bounds. The machine running the tests may be busy; waits are
// generous, and Consistently checks a bounded window.
const (
	Timeout         = 30 * time.Second
	Interval        = 100 * time.Millisecond
	ConsistentlyFor = 2 * time.Second
)

// Env is one test package's cluster.
type Env struct {
	Cluster   *cluster.Cluster
	Client    client.Client
	Clientset kubernetes.Interface
	// LogDir holds the components' logs and operator.log; it is kept when a
	// test fails.
	LogDir string
}

// Main starts an API server, runs setup, then the tests, and stops
// everything; it returns the exit code for os.Exit. The logs are kept (and
// their folder printed) when the tests fail.
func Main(m *testing.M, setup func(ctx context.Context, env *Env) error) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logDir, err := os.MkdirTemp("", "trainjob-operator-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := setLogger(filepath.Join(logDir, "operator.log")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	begin := time.Now()
	c, err := cluster.Start(ctx, cluster.Options{Profile: cluster.ProfileAPI, LogDir: logDir})
	if err != nil {
		fmt.Fprintf(os.Stderr, "%v\nlogs in %s\n", err, logDir)
		return 1
	}
	fmt.Fprintf(os.Stderr, "API server started in %v; logs in %s\n", time.Since(begin).Round(time.Millisecond), logDir)
	cl, err := client.New(c.Config, client.Options{Scheme: scheme.New()})
	if err == nil {
		metricsToken, err = c.MetricsReaderToken(ctx)
	}
	code := 1
	if err == nil {
		env := &Env{Cluster: c, Client: cl, Clientset: c.Clientset(), LogDir: logDir}
		if err = setup(ctx, env); err == nil {
			code = m.Run()
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "setup: %v\n", err)
	}
	cancel()
	stopAll()
	if err := c.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stop the API server: %v\n", err)
	}
	if code == 0 {
		_ = os.RemoveAll(logDir)
	} else {
		fmt.Fprintf(os.Stderr, "logs kept in %s\n", logDir)
	}
	return code
}

// metricsToken is a bearer token that may scrape the operators' /metrics.
var metricsToken string

var loggerOnce sync.Once

// setLogger sends every operator's logs (controller-runtime and klog) to
// path, once per process.
func setLogger(path string) error {
	var err error
	loggerOnce.Do(func() {
		var f *os.File
		if f, err = os.Create(path); err != nil {
			return
		}
		logger := zap.New(zap.WriteTo(f), zap.UseDevMode(true))
		log.SetLogger(logger)
		klog.SetLogger(logger)
	})
	return err
}

// OutOfTree are the plugins the operator runs with beyond the in-tree ones:
// the probe that records what the Build phase ran on (Builds).
func OutOfTree() pipeline.Registry {
	return pipeline.Registry{{Name: ProbeName, Factory: newProbe}}
}

// NewConfig is the configuration of an in-process operator (see InProcess).
func NewConfig(dir string) (*config.Configuration, error) {
	cfg := &config.Configuration{Namespace: Namespace}
	return cfg, InProcess(cfg, dir)
}

// InProcess adapts a configuration to an operator running in the test
// process: every server on 127.0.0.1 on a free port, its own certificate
// folder below dir, a certificate also valid for "localhost" (the API
// server reaches the webhooks by URL), and a fast client. It defaults and
// validates the result. The leases are the defaults, as in production: a
// leader that cannot renew within the renew deadline stops, and with
// short leases a machine busy with every test package at once made a
// leader miss it. A stopped operator releases its Lease, so only a killed
// one keeps the next waiting for the lease duration.
func InProcess(cfg *config.Configuration, dir string) error {
	if err := pickPorts(cfg); err != nil {
		return err
	}
	cfg.Webhook.CertDir = filepath.Join(dir, "certs-"+strconv.Itoa(int(*cfg.Webhook.Port)))
	cfg.CertManagement.ExtraDNSNames = append(cfg.CertManagement.ExtraDNSNames, "localhost")
	cfg.ClientConnection = config.ClientConnection{QPS: ptr.To[float32](200), Burst: ptr.To[int32](400)}
	cfg.Default()
	return cfg.Validate()
}

// pickPorts gives every server of cfg a port of cluster.FreePorts: free on 127.0.0.1, below the ephemeral range.
func pickPorts(cfg *config.Configuration) error {
	ports, err := cluster.FreePorts(4)
	if err != nil {
		return err
	}
	cfg.Metrics.BindAddress = "127.0.0.1:" + strconv.Itoa(ports[0])
	cfg.Health.HealthProbeBindAddress = "127.0.0.1:" + strconv.Itoa(ports[1])
	cfg.Webhook.Host, cfg.Webhook.Port = "127.0.0.1", ptr.To(int32(ports[2]))
	cfg.StatusServer.Port = ptr.To(int32(ports[3]))
	return nil
}

// Operator is an operator running in the test process.
type Operator struct {
	Config *config.Configuration
	op     *operator.Operator
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

var (
	runningMu sync.Mutex
	running   []*Operator
)

// StartOperator starts an operator that talks to the API server as
// restConfig says, and returns once it is ready; it fails when the operator
// stopped, or was not ready within Timeout (and is then stopped). Its ports were free when InProcess picked them, but another
// process (go test runs packages side by side) may have taken one since:
// the operator then stops at once, and it is started again on other ports.
func StartOperator(ctx context.Context, restConfig *rest.Config, cfg *config.Configuration) (*Operator, error) {
	for attempt := 1; ; attempt++ {
		o, err := startOperator(ctx, restConfig, cfg)
		if err == nil {
			err = o.readyOrStopped(ctx)
		}
		if err == nil || attempt == 3 || !errors.Is(err, syscall.EADDRINUSE) {
			return o, err
		}
		if err := pickPorts(cfg); err != nil {
			return nil, err
		}
	}
}

func startOperator(ctx context.Context, restConfig *rest.Config, cfg *config.Configuration) (*Operator, error) {
	op, err := operator.New(ctx, operator.Options{Config: cfg, RESTConfig: restConfig, OutOfTree: OutOfTree()})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	o := &Operator{Config: cfg, op: op, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(o.done)
		o.err = op.Start(ctx)
	}()
	runningMu.Lock()
	running = append(running, o)
	runningMu.Unlock()
	return o, nil
}

// readyOrStopped waits until the operator is ready and serves its metrics
// (readiness does not cover them), and returns nil, or has stopped, and
// returns why. After Timeout it returns what was still missing: a test
// must not go on with an operator that never became ready.
func (o *Operator) readyOrStopped(ctx context.Context) error {
	err := Poll(ctx, Timeout, func(ctx context.Context) error {
		select {
		case <-o.done:
			return stopped{o.err}
		default:
		}
		if err := o.Ready(ctx); err != nil {
			return err
		}
		// Briefly: what holds a taken port may accept and never answer.
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err := o.Scrape(ctx)
		return err
	})
	var s stopped
	if errors.As(err, &s) {
		return fmt.Errorf("the operator stopped as it started: %w", s.err)
	}
	if err != nil {
		_ = o.Stop()
		return fmt.Errorf("the operator is not ready and serving its metrics: %w", err)
	}
	return nil
}

// stopped is the error of an operator that has stopped.
type stopped struct{ err error }

func (s stopped) Error() string { return fmt.Sprintf("stopped: %v", s.err) }
func (s stopped) Unwrap() error { return s.err }

// Stop stops the operator and returns what Start returned.
func (o *Operator) Stop() error {
	o.cancel()
	<-o.done
	return o.err
}

// Elected is closed once the operator leads.
func (o *Operator) Elected() <-chan struct{} { return o.op.Manager().Elected() }

// Cache is the operator's cache, where its controllers read.
func (o *Operator) Cache() client.Reader { return o.op.Manager().GetCache() }

// Done is closed when the operator has stopped.
func (o *Operator) Done() <-chan struct{} { return o.done }

// ProbeURL is the URL of a health endpoint (healthz, readyz).
func (o *Operator) ProbeURL(endpoint string) string {
	return "http://" + o.Config.Health.HealthProbeBindAddress + "/" + endpoint
}

// MetricsURL is the URL of /metrics.
func (o *Operator) MetricsURL() string { return "https://" + o.Config.Metrics.BindAddress + "/metrics" }

func stopAll() {
	runningMu.Lock()
	defer runningMu.Unlock()
	for _, o := range running {
		_ = o.Stop()
	}
	running = nil
}

// Eventually is cluster.Eventually with Timeout.
func Eventually(t testing.TB, what string, cond func(ctx context.Context) error) {
	t.Helper()
	cluster.Eventually(t, what, Timeout, cond)
}

// Poll polls cond until it returns nil or timeout passes; then it returns
// cond's last error.
func Poll(ctx context.Context, timeout time.Duration, cond func(ctx context.Context) error) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, Interval, timeout, true, func(ctx context.Context) (bool, error) {
		err := cond(ctx)
		if last == nil || !cluster.EndOfWait(ctx, err) {
			last = err
		}
		return err == nil, nil
	})
	if err != nil && last != nil {
		return fmt.Errorf("not true after %v: %w", timeout, last)
	}
	return err
}

// Consistently checks cond every Interval for ConsistentlyFor and fails
// the test the first time it returns an error.
func Consistently(t testing.TB, what string, cond func(ctx context.Context) error) {
	t.Helper()
	ticker := time.NewTicker(Interval)
	defer ticker.Stop()
	end := time.After(ConsistentlyFor)
	for {
		if err := cond(t.Context()); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		select {
		case <-end:
			return
		case <-t.Context().Done():
			t.Fatalf("%s: %v", what, t.Context().Err())
		case <-ticker.C:
		}
	}
}

// Get reads an object, for use in Eventually.
func Get(ctx context.Context, c client.Reader, key client.ObjectKey, obj client.Object) error {
	if err := c.Get(ctx, key, obj); err != nil {
		return fmt.Errorf("get %T %s: %w", obj, key, err)
	}
	return nil
}

// Absent is nil when the object does not exist.
func Absent(ctx context.Context, c client.Reader, key client.ObjectKey, obj client.Object) error {
	err := c.Get(ctx, key, obj)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	}
	return fmt.Errorf("%T %s exists", obj, key)
}

// ErrNotReady is returned by readiness checks before the operator is ready.
var ErrNotReady = errors.New("not ready")
