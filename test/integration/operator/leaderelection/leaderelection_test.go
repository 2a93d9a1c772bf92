// Package leaderelection_test runs operators that reconcile only (no
// webhooks) against one API server: two at once, `kubectl-trainjob
// operator` in a child process and one in the test process, of which only
// the leader reconciles until it is killed and the other takes over; and
// one restricted to a namespace.
package leaderelection_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	"sigs.k8s.io/yaml"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/config"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/integration/operator/internal/optest"
)

var env *optest.Env

func TestMain(m *testing.M) {
	if code, ran := optest.RunChild(); ran {
		os.Exit(code)
	}
	os.Exit(optest.Main(m, func(ctx context.Context, e *optest.Env) error {
		env = e
		return e.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: optest.Namespace}})
	}))
}

// withoutWebhooks is an in-process configuration of an operator that only
// reconciles: the webhooks are not what this test is about (and only one
// certificate rotator may run in a process).
func withoutWebhooks(t testing.TB) *config.Configuration {
	t.Helper()
	cfg, err := optest.NewConfig(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Webhook.Enable = ptr.To(false)
	return cfg
}

var leaseKey = client.ObjectKey{Namespace: optest.Namespace, Name: config.DefaultLeaderElectionID}

// leaseHolder is the identity holding the leader election Lease.
func leaseHolder(ctx context.Context) (string, error) {
	var lease coordinationv1.Lease
	if err := optest.Get(ctx, env.Client, leaseKey, &lease); err != nil {
		return "", err
	}
	if h := ptr.Deref(lease.Spec.HolderIdentity, ""); h != "" {
		return h, nil
	}
	return "", errors.New("the Lease has no holder")
}

func TestLeaderElection(t *testing.T) {
	// Operator A: the real command, in a child process that can be killed.
	cfgA := withoutWebhooks(t)
	data, err := yaml.Marshal(cfgA)
	if err != nil {
		t.Fatal(err)
	}
	configPath := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(configPath, data, 0o600); err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(filepath.Join(env.LogDir, "operator-a.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	a := exec.Command(os.Args[0], "operator", "--kubeconfig="+env.Cluster.KubeconfigPath, "--config="+configPath, "--zap-log-level=debug")
	a.Env = append(os.Environ(), optest.ChildEnv+"=1")
	a.Stdout, a.Stderr = logFile, logFile
	a.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- a.Wait() }()
	t.Cleanup(func() {
		_ = a.Process.Kill()
		<-exited
	})
	var holderA string
	optest.Eventually(t, "operator A leads", func(ctx context.Context) error {
		select {
		case err := <-exited:
			return fmt.Errorf("operator A exited: %v (see %s)", err, logFile.Name())
		default:
		}
		holderA, err = leaseHolder(ctx)
		return err
	})

	// Operator B, in the test process, waits.
	b, err := optest.StartOperator(t.Context(), env.Cluster.Config, withoutWebhooks(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Stop() })
	optest.Eventually(t, "operator B is ready", b.Ready)

	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	createRuntime(t, ns)
	reachesJobSet(t, ns, "before")
	optest.Consistently(t, "only operator A leads", func(ctx context.Context) error {
		select {
		case <-b.Elected():
			return errors.New("operator B leads too")
		default:
		}
		holder, err := leaseHolder(ctx)
		if err == nil && holder != holderA {
			err = fmt.Errorf("the Lease moved to %s", holder)
		}
		return err
	})

	// Kill A: no chance to release the Lease; B takes it once it expires.
	killed := time.Now()
	if err := a.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	le := cfgA.LeaderElection
	takeOver := le.LeaseDuration.Duration + le.RetryPeriod.Duration + optest.Timeout
	err = optest.Poll(t.Context(), takeOver, func(ctx context.Context) error {
		select {
		case <-b.Elected():
		default:
			return errors.New("operator B does not lead")
		}
		holder, err := leaseHolder(ctx)
		if err == nil && holder == holderA {
			err = errors.New("the Lease is still operator A's")
		}
		return err
	})
	if err != nil {
		t.Fatalf("operator B takes over: %v", err)
	}
	t.Logf("operator B took over %v after operator A was killed (lease duration %v)", time.Since(killed).Round(100*time.Millisecond), cfgA.LeaderElection.LeaseDuration.Duration)
	reachesJobSet(t, ns, "after")
}

// reachesJobSet creates a TrainJob and waits for its JobSet and
// ComponentsCreated.
func reachesJobSet(t *testing.T, ns, name string) {
	t.Helper()
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	tj.Spec.RuntimeRef = trainer.RuntimeRef{Name: "torch", Kind: ptr.To(trainer.TrainingRuntimeKind)}
	if err := env.Client.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	optest.Eventually(t, "TrainJob "+name+" reaches its JobSet", func(ctx context.Context) error {
		if err := optest.Get(ctx, env.Client, client.ObjectKeyFromObject(tj), &jobsetv1alpha2.JobSet{}); err != nil {
			return err
		}
		got := &trainer.TrainJob{}
		if err := optest.Get(ctx, env.Client, client.ObjectKeyFromObject(tj), got); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(got.Status.Conditions, trainer.TrainJobComponentsCreated) {
			return fmt.Errorf("conditions %+v", got.Status.Conditions)
		}
		return nil
	})
}

// createRuntime creates the TrainingRuntime torch in ns.
func createRuntime(t *testing.T, ns string) {
	t.Helper()
	rt := &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "torch"}}
	rt.Spec.MLPolicy = &trainer.MLPolicy{NumNodes: ptr.To[int32](1), MLPolicySource: trainer.MLPolicySource{Torch: &trainer.TorchMLPolicySource{}}}
	rt.Spec.Template.Spec.ReplicatedJobs = []jobsetv1alpha2.ReplicatedJob{{Name: trainer.Node, Replicas: 1}}
	rt.Spec.Template.Spec.ReplicatedJobs[0].Template.Labels = map[string]string{trainer.AncestorLabel: trainer.AncestorTrainer}
	rt.Spec.Template.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers = []corev1.Container{{Name: trainer.Node, Image: "node"}}
	if err := env.Client.Create(t.Context(), rt); err != nil {
		t.Fatal(err)
	}
}

// TestWatchNamespace: an operator told to watch one namespace reconciles
// the TrainJobs there and no others.
func TestWatchNamespace(t *testing.T) {
	watched, other := cluster.NewNamespace(t, env.Client, "test-", nil), cluster.NewNamespace(t, env.Client, "test-", nil)
	createRuntime(t, watched)
	createRuntime(t, other)
	cfg := withoutWebhooks(t)
	cfg.LeaderElection.LeaderElect = ptr.To(false)
	cfg.Controller.WatchNamespace = watched
	op, err := optest.StartOperator(t.Context(), env.Cluster.Config, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = op.Stop() })
	optest.Eventually(t, "the operator is ready", op.Ready)

	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "unwatched"}}
	tj.Spec.RuntimeRef = trainer.RuntimeRef{Name: "torch", Kind: ptr.To(trainer.TrainingRuntimeKind)}
	if err := env.Client.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	// The barrier: a TrainJob of the watched namespace, created after the
	// other, is built. An operator that watched every namespace would have
	// received both through one informer, the other first.
	reachesJobSet(t, watched, "watched")

	// The operator cannot see the other namespace at all: its cache has no
	// informer there, and refuses the read (a cluster-wide cache would
	// answer it).
	err = op.Cache().Get(t.Context(), client.ObjectKeyFromObject(tj), &trainer.TrainJob{})
	if err == nil || apierrors.IsNotFound(err) {
		t.Errorf("the operator's cache reads TrainJob %s/%s of an unwatched namespace: %v; want a refusal", other, tj.Name, err)
	}
	if got := optest.Builds(client.ObjectKeyFromObject(tj)); len(got) > 0 {
		t.Errorf("the Build phase ran on the TrainJob of an unwatched namespace at resourceVersions %v", got)
	}
	got := &trainer.TrainJob{}
	if err := optest.Get(t.Context(), env.Client, client.ObjectKeyFromObject(tj), got); err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Conditions) > 0 {
		t.Errorf("the TrainJob of an unwatched namespace is reconciled: %+v", got.Status.Conditions)
	}
	if err := optest.Absent(t.Context(), env.Client, client.ObjectKeyFromObject(tj), &jobsetv1alpha2.JobSet{}); err != nil {
		t.Error(err)
	}
}
