// Package certs_test runs two replicas of the operator, both serving
// webhooks and managing the webhook certificate, with the TrainJobStatus
// gate on, against an API server of their own, and checks what becomes of
// the certificate Secret's loss and of a new CA: the replicas start while
// the Secret is missing, a deleted Secret is created again, both replicas
// serve certificates of the one CA the Secret holds, and the CA every
// TrainJob's trainers trust (its -tls-config ConfigMap) follows it.
package certs_test

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/config"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator/controller"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/plugins/trainjobstatus"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/integration/operator/internal/optest"
)

var (
	env      *optest.Env
	replicas []*optest.Operator
)

// secretKey is the webhook certificate Secret.
var secretKey = client.ObjectKey{Namespace: optest.Namespace, Name: "kubectl-trainjob-webhook-cert"}

// TestMain installs the webhook configurations without the Secret and
// starts both replicas: each must start without it.
func TestMain(m *testing.M) {
	os.Exit(optest.Main(m, func(ctx context.Context, e *optest.Env) error {
		env = e
		var cfgs []*config.Configuration
		for range 2 {
			cfg, err := optest.NewConfig(e.LogDir)
			if err != nil {
				return err
			}
			cfg.FeatureGates = map[string]bool{config.FeatureTrainJobStatus: true}
			// A standby in the test process: warmed, its queue would count in optest.Settled's process-wide metrics.
			cfg.Controller.Warmup = ptr.To(false)
			cfgs = append(cfgs, cfg)
		}
		if err := optest.InstallWebhooks(ctx, e.Client, *cfgs[0].Webhook.Port); err != nil {
			return err
		}
		if err := e.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: secretKey.Namespace, Name: secretKey.Name}}); err != nil {
			return err
		}
		for _, cfg := range cfgs {
			op, err := optest.StartOperator(ctx, e.Cluster.Config, cfg)
			if err != nil {
				return err
			}
			replicas = append(replicas, op)
		}
		for _, op := range replicas {
			if err := optest.Poll(ctx, time.Minute, op.Ready); err != nil {
				return fmt.Errorf("a replica started without the certificate Secret is not ready: %w", err)
			}
		}
		return optest.Poll(ctx, time.Minute, func(ctx context.Context) error { return optest.WebhooksServed(ctx, e.Client) })
	}))
}

// secretCA is the CA the Secret holds now.
func secretCA(ctx context.Context) (*x509.Certificate, error) {
	s := &corev1.Secret{}
	if err := optest.Get(ctx, env.Client, secretKey, s); err != nil {
		return nil, err
	}
	certs, err := cluster.ParseCerts(s.Data["ca.crt"])
	if err != nil {
		return nil, fmt.Errorf("the Secret has no CA: %v: %q", err, s.Data["ca.crt"])
	}
	return certs[0], nil
}

// servesCA is nil once every replica's webhook and status servers serve a
// certificate of ca.
func servesCA(ctx context.Context, ca *x509.Certificate) error {
	for i, op := range replicas {
		for _, port := range []int32{*op.Config.Webhook.Port, *op.Config.StatusServer.Port} {
			addr := net.JoinHostPort(op.Config.Webhook.Host, strconv.Itoa(int(port)))
			if err := cluster.ServesCertOf(addr, ca); err != nil {
				return fmt.Errorf("replica %d does not serve a certificate of the Secret's CA on %s yet: %v", i, addr, err)
			}
		}
	}
	return nil
}

// trainersTrust is nil once the -tls-config ConfigMap of tj holds ca.
func trainersTrust(tj *trainer.TrainJob, ca *x509.Certificate) func(context.Context) error {
	return func(ctx context.Context) error {
		cm := &corev1.ConfigMap{}
		if err := optest.Get(ctx, env.Client, client.ObjectKey{Namespace: tj.Namespace, Name: tj.Name + trainjobstatus.TLSConfigMapSuffix}, cm); err != nil {
			return err
		}
		if certs, err := cluster.ParseCerts([]byte(cm.Data[trainjobstatus.CACertKey])); err == nil && slices.ContainsFunc(certs, ca.Equal) {
			return nil
		}
		return fmt.Errorf("the trainers of %s do not trust the Secret's CA %s yet", tj.Name, ca.SerialNumber)
	}
}

// newTrainJob creates a runtime with a trainer step and a suspended
// TrainJob on it in a namespace of its own, and waits for its JobSet.
func newTrainJob(t *testing.T) *trainer.TrainJob {
	t.Helper()
	tj := createTrainJob(t, cluster.NewNamespace(t, env.Client, "test-", nil))
	optest.Eventually(t, "the TrainJob is built", func(ctx context.Context) error {
		return optest.Get(ctx, env.Client, client.ObjectKeyFromObject(tj), &jobsetv1alpha2.JobSet{})
	})
	return tj
}

// createTrainJob creates a runtime with a trainer step and a suspended
// TrainJob alpha on it in ns.
func createTrainJob(t *testing.T, ns string) *trainer.TrainJob {
	t.Helper()
	rt := &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "torch"}}
	rt.Spec.MLPolicy = &trainer.MLPolicy{NumNodes: ptr.To[int32](1), MLPolicySource: trainer.MLPolicySource{Torch: &trainer.TorchMLPolicySource{}}}
	rj := jobsetv1alpha2.ReplicatedJob{Name: trainer.Node, Replicas: 1}
	rj.Template.Labels = map[string]string{trainer.AncestorLabel: trainer.AncestorTrainer}
	rj.Template.Spec.Template.Spec.Containers = []corev1.Container{{Name: trainer.Node, Image: "torch"}}
	rt.Spec.Template.Spec.ReplicatedJobs = []jobsetv1alpha2.ReplicatedJob{rj}
	if err := env.Client.Create(t.Context(), rt); err != nil {
		t.Fatal(err)
	}
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alpha"}, Spec: trainer.TrainJobSpec{
		RuntimeRef: trainer.RuntimeRef{Name: rt.Name, APIGroup: ptr.To(trainer.GroupVersion.Group), Kind: ptr.To(trainer.TrainingRuntimeKind)},
		Suspend:    ptr.To(true),
	}}
	if err := env.Client.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	return tj
}

// TestNotControlledTLSConfig (issue 36, item 5): a user's ConfigMap that
// holds the name of a TrainJob's -tls-config ConfigMap, with no controller,
// is neither taken over nor written: the TrainJob reports it
// (ComponentsCreated=False, ComponentNotControlled) and gets no JobSet,
// whose trainers would trust the user's CA.
func TestNotControlledTLSConfig(t *testing.T) {
	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	users := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alpha" + trainjobstatus.TLSConfigMapSuffix},
		Data:       map[string]string{trainjobstatus.CACertKey: "a CA of someone else"},
	}
	if err := env.Client.Create(t.Context(), users); err != nil {
		t.Fatal(err)
	}
	tj := createTrainJob(t, ns)
	want := fmt.Sprintf(`ConfigMap %s/alpha%s exists and is not controlled by TrainJob "alpha": it has no controller`, ns, trainjobstatus.TLSConfigMapSuffix)
	optest.Eventually(t, "ComponentsCreated=False "+controller.ComponentNotControlledReason, func(ctx context.Context) error {
		got := &trainer.TrainJob{}
		if err := optest.Get(ctx, env.Client, client.ObjectKeyFromObject(tj), got); err != nil {
			return err
		}
		c := meta.FindStatusCondition(got.Status.Conditions, trainer.TrainJobComponentsCreated)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != controller.ComponentNotControlledReason || !strings.HasPrefix(c.Message, want) {
			return fmt.Errorf("ComponentsCreated %+v, want False %s starting %q", c, controller.ComponentNotControlledReason, want)
		}
		return nil
	})
	if err := optest.Absent(t.Context(), env.Client, client.ObjectKeyFromObject(tj), &jobsetv1alpha2.JobSet{}); err != nil {
		t.Errorf("the JobSet was built trusting someone else's CA: %v", err)
	}
	got := &corev1.ConfigMap{}
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(users), got); err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion != users.ResourceVersion {
		t.Errorf("the user's ConfigMap was written: resourceVersion %s → %s, owners %v, data %v", users.ResourceVersion, got.ResourceVersion, got.OwnerReferences, got.Data)
	}
}

// TestStartWithoutSecret: both replicas, started while the Secret was
// missing (TestMain), are ready and serve certificates of the one CA of
// the Secret one of them created; a TrainJob's trainers trust it.
func TestStartWithoutSecret(t *testing.T) {
	ca, err := secretCA(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	optest.Eventually(t, "both replicas serve the Secret's CA", func(ctx context.Context) error { return servesCA(ctx, ca) })
	tj := newTrainJob(t)
	optest.Eventually(t, "the trainers trust the Secret's CA", trainersTrust(tj, ca))
}

// TestSecretLost: a deleted Secret is created again with a new CA, which
// both replicas serve and the running TrainJob's trainers trust; so does a
// Secret whose CA was replaced; and a TrainJob created while the Secret is
// gone is built all the same (the CA comes from the operator's memory).
func TestSecretLost(t *testing.T) {
	faults := []struct {
		name  string
		fault func(t *testing.T)
	}{
		{name: "Secret deleted", fault: func(t *testing.T) {
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: secretKey.Namespace, Name: secretKey.Name}}
			if err := env.Client.Delete(t.Context(), s); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "CA replaced", fault: func(t *testing.T) {
			if err := optest.BreakCA(t.Context(), env.Client, secretKey); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			running := newTrainJob(t)
			old, err := secretCA(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			f.fault(t)
			built := newTrainJob(t)
			var ca *x509.Certificate
			optest.Eventually(t, "the Secret holds a new CA", func(ctx context.Context) error {
				if ca, err = secretCA(ctx); err != nil {
					return err
				}
				if ca.Equal(old) {
					return errors.New("the Secret holds the old CA")
				}
				return nil
			})
			optest.Eventually(t, "both replicas serve the new CA", func(ctx context.Context) error { return servesCA(ctx, ca) })
			optest.Eventually(t, "the running TrainJob's trainers trust the new CA", trainersTrust(running, ca))
			optest.Eventually(t, "the trainers of the TrainJob built meanwhile trust the new CA", trainersTrust(built, ca))
		})
	}
}
