package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/config"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/scheme"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/stack"
)

// bench is one run of the benchmark: a local cluster with the product on it.
type bench struct {
	k       Knobs
	out     string // absolute: the summary, logs and profiles
	w       io.Writer
	cluster *cluster.Cluster
	stack   *stack.Stack
	binary  string
	// admin sets up and cleans up, fast; driver makes the measured creates with the operator's QPS and burst.
	admin, driver client.Client
	// watcher watches TrainJobs, with the administrator's rates.
	watcher   client.WithWatch
	meta      metadata.Interface
	qps       float32
	burst     int
	audit     *auditLog
	pprofAddr string
	summary   *Summary
	// templates are what the operator wrote for a TrainJob of the first A round: B and C rounds copy them.
	templates *templates
	// floorWriter writes what the operator would in C rounds, as its ServiceAccount, with floorWorkers workers.
	floorWriter  client.Client
	floorWorkers int
	// cliReady: the CLI's ServiceAccount and kubeconfig exist (cliFlags).
	cliReady bool
}

// adminQPS is the client rate of the benchmark's set-up and clean-up, which are not measured.
const adminQPS = 1000

// run is make bench: the product on a fresh local cluster, measured, and everything torn down.
func run(ctx context.Context, k Knobs, w io.Writer) (*Summary, error) {
	s, begin := newSummary(k), time.Now()
	err := measure(ctx, k, w, s, "", apiProfile(), 1, func(ctx context.Context, b *bench) error {
		if err := b.idle(ctx); err != nil {
			return err
		}
		for _, step := range []func(context.Context) error{b.throughput, b.latency, b.loaded, b.micro} {
			if err := step(ctx); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil && k.FailoverN > 0 {
		err = runFailover(ctx, k, w, s)
	}
	if err != nil {
		return nil, err
	}
	s.Seconds = time.Since(begin).Seconds()
	s.evaluate()
	return s, nil
}

// apiProfile is the cluster of most measurements: the api profile with the JobSet controller and its webhooks
// (its Jobs get no pods).
func apiProfile() cluster.Options { return cluster.Options{Profile: cluster.ProfileAPI, JobSet: true} }

// measure brings the product up on a fresh local cluster of opts, whose logs, profiles and files go to the
// folder sub of the knobs' Out, with the operator's replicas, runs steps, which add to s, and tears everything
// down.
func measure(ctx context.Context, k Knobs, w io.Writer, s *Summary, sub string, opts cluster.Options, replicas int, steps func(context.Context, *bench) error) (err error) {
	out, err := filepath.Abs(filepath.Join(k.Out, sub))
	if err != nil {
		return err
	}
	logDir := filepath.Join(out, "logs")
	if err := os.RemoveAll(logDir); err != nil {
		return err
	}
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return err
	}
	// The benchmark's clients log nothing worth reading (a watch it stops is not an error).
	log.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard())
	b := &bench{k: k, out: out, w: w, summary: s}
	begin := time.Now()
	b.logf("building the operator (kubectl-trainjob)")
	if b.binary, err = stack.Binary(ctx, out); err != nil {
		return err
	}
	policy := filepath.Join(out, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
		return err
	}
	b.audit = &auditLog{path: filepath.Join(logDir, "audit.log")}
	b.logf("starting the local cluster: %s profile (JobSet: %t), audit log %s", cmp.Or(opts.Profile, cluster.ProfileAPI), opts.JobSet, b.audit.path)
	opts.LogDir = logDir
	opts.APIServerFlags = map[string]string{
		"audit-policy-file": policy,
		"audit-log-path":    b.audit.path,
		"audit-log-format":  "json",
		"audit-log-mode":    "blocking",
	}
	b.cluster, err = cluster.Start(ctx, opts)
	if err != nil {
		return err
	}
	defer func() {
		if b.stack != nil {
			err = errors.Join(err, b.stack.Down())
		}
		err = errors.Join(err, b.cluster.Stop())
		if err != nil {
			err = fmt.Errorf("%w\n(logs in %s)", err, logDir)
		}
	}()
	var extraArgs []string
	if replicas == 1 {
		// Two replicas would both bind the one address.
		if b.pprofAddr, err = freeAddr(); err != nil {
			return err
		}
		extraArgs = []string{"--pprof-bind-address=" + b.pprofAddr}
	}
	b.logf("starting the operator's %d replica(s) as its Deployment says, with %v", replicas, extraArgs)
	b.stack, err = stack.Up(ctx, b.cluster, stack.Options{Binary: b.binary, Dir: filepath.Join(out, "stack"), LogDir: logDir,
		ExtraArgs: extraArgs, Replicas: replicas})
	if err != nil {
		return err
	}
	if err := b.clients(); err != nil {
		return err
	}
	b.logf("cluster and operator up in %v", time.Since(begin).Round(time.Millisecond))

	return steps(ctx, b)
}

// clients makes the benchmark's clients. The operator's user and client rates come from its configuration.
func (b *bench) clients() error {
	cc := b.stack.Operator.Config.ClientConnection
	b.qps = ptr.Deref(cc.QPS, config.DefaultQPS)
	b.burst = int(ptr.Deref(cc.Burst, config.DefaultBurst))
	b.summary.Throughput.QPS, b.summary.Throughput.Burst = b.qps, b.burst

	admin := rest.CopyConfig(b.cluster.Config)
	admin.QPS, admin.Burst = adminQPS, 2*adminQPS
	driver := rest.CopyConfig(b.cluster.Config)
	driver.QPS, driver.Burst = b.qps, b.burst
	var err error
	if b.admin, err = client.New(admin, client.Options{Scheme: scheme.New()}); err != nil {
		return err
	}
	if b.driver, err = client.New(driver, client.Options{Scheme: scheme.New()}); err != nil {
		return err
	}
	if b.watcher, err = client.NewWithWatch(admin, client.Options{Scheme: scheme.New()}); err != nil {
		return err
	}
	b.meta, err = metadata.NewForConfig(admin)
	return err
}

func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(b.w, "%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// isOperator reports whether a user is the operator's: the only ServiceAccount user besides the CLI's (the
// benchmark and the JobSet controller use the administrator's certificate).
func (b *bench) isOperator(user string) bool {
	return strings.HasPrefix(user, serviceAccountUserPrefix) && !strings.HasPrefix(user, serviceAccountUserPrefix+cliNamespace+":")
}

// serviceAccountUserPrefix begins the user name of every ServiceAccount.
const serviceAccountUserPrefix = "system:serviceaccount:"

// createNamespace creates a namespace for one measurement.
func (b *bench) createNamespace(ctx context.Context, name string) error {
	err := b.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("namespace %s exists: each measurement needs a fresh one", name)
	}
	return err
}

// poll checks cond every interval until it holds or timeout passes.
func poll(ctx context.Context, what string, interval, timeout time.Duration, cond func(context.Context) (bool, error)) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, interval, timeout, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		last = err
		return ok, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %s: %w (last error: %v)", what, err, last)
	}
	return nil
}

// freeAddr is a loopback address with a port free now and reserved for this process (cluster.FreePort).
func freeAddr() (string, error) {
	port, err := cluster.FreePort()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), nil
}
