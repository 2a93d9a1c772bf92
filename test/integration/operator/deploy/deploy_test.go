// Package deploy_test applies `kustomize build config/default` to a real
// API server, then runs the operator in-process with nothing but the
// permissions config/rbac grants its ServiceAccount (it impersonates it),
// and shows it takes TrainJobs through the shipped runtimes to JobSets.
package deploy_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/config"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/scheme"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/snapshot"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/integration/operator/internal/optest"
)

// serviceAccount is the operator's identity in config/rbac.
const serviceAccount = "system:serviceaccount:kubectl-trainjob-system:kubectl-trainjob-operator"

var env *optest.Env

func TestMain(m *testing.M) {
	os.Exit(optest.Main(m, func(_ context.Context, e *optest.Env) error {
		env = e
		return nil
	}))
}

// TestDeploy is one scenario: each step needs the ones before.
func TestDeploy(t *testing.T) {
	objs, err := optest.Build("default")
	if err != nil {
		t.Fatal(err)
	}
	if err := optest.ApplyAll(t.Context(), env.Client, objs); err != nil {
		t.Fatalf("server-side apply of config/default: %v", err)
	}
	var applied []string
	for _, u := range objs {
		applied = append(applied, u.GetKind()+"/"+u.GetName())
	}
	t.Logf("applied %d objects: %v", len(objs), applied)

	// Nothing runs the Deployment here; the test stands in for its pod and
	// for the Service in front of it: the webhooks are reached by URL.
	cfg := shippedConfiguration(t)
	if err := optest.InProcess(cfg, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	pointWebhooksAt(t, *cfg.Webhook.Port)

	asOperator := rest.CopyConfig(env.Cluster.Config)
	asOperator.Impersonate = rest.ImpersonationConfig{UserName: serviceAccount}
	// The impersonation holds: the ServiceAccount may not read pods.
	operatorClient, err := client.New(asOperator, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	if err := operatorClient.List(t.Context(), &corev1.PodList{}); !apierrors.IsForbidden(err) {
		t.Fatalf("listing pods as %s: %v, want Forbidden", serviceAccount, err)
	}
	op, err := optest.StartOperator(t.Context(), asOperator, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = op.Stop() })
	optest.Eventually(t, "the operator is ready", op.Ready)
	optest.Eventually(t, "the webhooks are served", func(ctx context.Context) error { return optest.WebhooksServed(ctx, env.Client) })

	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	t.Run("torch-distributed", func(t *testing.T) {
		tj := trainJob(ns, "torch", "torch-distributed")
		tj.Spec.Trainer = &trainer.Trainer{NumNodes: ptr.To[int32](2)}
		reachesJobSet(t, tj)
		optest.Eventually(t, "its events are recorded", func(ctx context.Context) error {
			var list eventsv1.EventList
			if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
				return err
			}
			if !slices.ContainsFunc(list.Items, func(e eventsv1.Event) bool {
				return e.Regarding.Name == tj.Name && e.Reason == trainer.TrainJobJobsCreatedReason
			}) {
				return errors.New("no JobsCreated event")
			}
			return nil
		})
	})
	t.Run("deepspeed-distributed", func(t *testing.T) {
		tj := trainJob(ns, "deepspeed", "deepspeed-distributed")
		reachesJobSet(t, tj)
		optest.Eventually(t, "the MPI Secret and hostfile exist", func(ctx context.Context) error {
			if err := optest.Get(ctx, env.Client, client.ObjectKey{Namespace: ns, Name: "deepspeed-mpi-ssh-auth"}, &corev1.Secret{}); err != nil {
				return err
			}
			return optest.Get(ctx, env.Client, client.ObjectKey{Namespace: ns, Name: "deepspeed-mpi-hostfile"}, &corev1.ConfigMap{})
		})
	})
	t.Run("past its deadline", func(t *testing.T) {
		tj := trainJob(ns, "deadline", "torch-distributed")
		tj.Spec.ActiveDeadlineSeconds = 1
		create(t, tj)
		optest.Eventually(t, "the TrainJob fails and its JobSet is deleted", func(ctx context.Context) error {
			got := &trainer.TrainJob{}
			if err := optest.Get(ctx, env.Client, client.ObjectKeyFromObject(tj), got); err != nil {
				return err
			}
			if c := meta.FindStatusCondition(got.Status.Conditions, trainer.TrainJobFailed); c == nil || c.Reason != trainer.TrainJobDeadlineExceededReason {
				return fmt.Errorf("conditions %+v", got.Status.Conditions)
			}
			return optest.Absent(ctx, env.Client, client.ObjectKeyFromObject(tj), &jobsetv1alpha2.JobSet{})
		})
	})
	t.Run("metrics need authorization", func(t *testing.T) { metricsNeedAuthorization(t, op, ns) })
	t.Run("legacy runtime finalizer", func(t *testing.T) {
		rt := &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "legacy", Finalizers: []string{trainer.ResourceInUseFinalizer}}}
		rt.Spec.MLPolicy = &trainer.MLPolicy{NumNodes: ptr.To[int32](1)}
		rt.Spec.Template.Spec.ReplicatedJobs = []jobsetv1alpha2.ReplicatedJob{{Name: "node", Replicas: 1}}
		rt.Spec.Template.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers = []corev1.Container{{Name: "node", Image: "node"}}
		create(t, rt)
		optest.Eventually(t, "the finalizer is removed", func(ctx context.Context) error {
			if err := optest.Get(ctx, env.Client, client.ObjectKeyFromObject(rt), rt); err != nil {
				return err
			}
			if len(rt.Finalizers) > 0 {
				return fmt.Errorf("finalizers %v", rt.Finalizers)
			}
			return nil
		})
	})
	select {
	case <-op.Done():
		t.Fatalf("the operator stopped: %v", op.Stop())
	default:
	}
}

// shippedConfiguration is config/manager/config.yaml, as the Deployment
// mounts it.
func shippedConfiguration(t testing.TB) *config.Configuration {
	t.Helper()
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "config", "manager", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Namespace = optest.Namespace
	return cfg
}

// pointWebhooksAt replaces the Service of every applied webhook with the
// URL of the in-process webhook server: what the Service would route to.
func pointWebhooksAt(t testing.TB, port int32) {
	t.Helper()
	optest.Eventually(t, "point the webhooks at the test process", func(ctx context.Context) error {
		var mutating admissionv1.MutatingWebhookConfiguration
		if err := optest.Get(ctx, env.Client, client.ObjectKey{Name: "defaulter.trainer.kubeflow.org"}, &mutating); err != nil {
			return err
		}
		for k := range mutating.Webhooks {
			optest.ByURL(&mutating.Webhooks[k].ClientConfig, port)
		}
		if err := env.Client.Update(ctx, &mutating); err != nil {
			return err
		}
		var validating admissionv1.ValidatingWebhookConfiguration
		if err := optest.Get(ctx, env.Client, client.ObjectKey{Name: "validator.trainer.kubeflow.org"}, &validating); err != nil {
			return err
		}
		for k := range validating.Webhooks {
			optest.ByURL(&validating.Webhooks[k].ClientConfig, port)
		}
		return env.Client.Update(ctx, &validating)
	})
}

func trainJob(ns, name, runtime string) *trainer.TrainJob {
	return &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: runtime}},
	}
}

func create(t testing.TB, obj client.Object) {
	t.Helper()
	// Through a client of the test (the administrator), with the webhooks
	// of the operator in the way.
	c, err := client.New(env.Cluster.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(t.Context(), obj); err != nil {
		t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
}

// reachesJobSet creates a TrainJob and waits for its JobSet, its snapshot
// and ComponentsCreated.
func reachesJobSet(t *testing.T, tj *trainer.TrainJob) {
	t.Helper()
	create(t, tj)
	key := client.ObjectKeyFromObject(tj)
	optest.Eventually(t, "the JobSet exists", func(ctx context.Context) error {
		return optest.Get(ctx, env.Client, key, &jobsetv1alpha2.JobSet{})
	})
	optest.Eventually(t, "the snapshot exists", func(ctx context.Context) error {
		return optest.Get(ctx, env.Client, client.ObjectKey{Namespace: tj.Namespace, Name: tj.Name + snapshot.Suffix}, &corev1.ConfigMap{})
	})
	optest.Eventually(t, "ComponentsCreated", func(ctx context.Context) error {
		got := &trainer.TrainJob{}
		if err := optest.Get(ctx, env.Client, key, got); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(got.Status.Conditions, trainer.TrainJobComponentsCreated); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("conditions %+v", got.Status.Conditions)
		}
		return nil
	})
}
