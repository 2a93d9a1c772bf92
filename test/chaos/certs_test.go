package chaos_test

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
)

// TestWebhookSecretLost (issue 36, items 3 and 6), with the operator as its Deployment's two replicas: the
// webhook certificate Secret deleted while both run is created again, and both serve a certificate of its
// new CA, admitting writes all along; with the Deployment scaled to zero, a foreground delete of a TrainJob
// and of a runtime completes (a finalizer taken off a deleted object, as the garbage collector does, needs
// no webhook), and the Secret is deleted again: both replicas start without it and serve the CA one of them
// creates.
func TestWebhookSecretLost(t *testing.T) {
	ctx := t.Context()
	ns := cluster.NewNamespace(t, env.client, "chaos-", nil)
	before := webhookCA(t)

	deleteWebhookSecret(t)
	running := webhookCAChanged(t, before)
	if err := env.client.Create(ctx, trainJob(ns, "after-loss", true)); err != nil {
		t.Fatalf("a create after the Secret's loss: %v", err)
	}

	const hold = "test.kubectl-trainjob.io/hold"
	tj := trainJob(ns, "deleted-while-down", true)
	tj.Finalizers = []string{hold}
	rt := labelledRuntime(ns, "deleted-while-down")
	rt.Finalizers = []string{hold}
	for _, obj := range []client.Object{tj, rt} {
		if err := env.client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	condition(t, ns, tj.Name, trainer.TrainJobSuspended, metav1.ConditionTrue, "")
	if err := env.stack.StopReplicas(); err != nil {
		t.Fatalf("scale to zero: %v", err)
	}
	for _, obj := range []client.Object{tj, rt} {
		if err := env.client.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
			t.Fatalf("delete %s in the foreground with no replica: %v", obj.GetName(), err)
		}
		// This cluster runs no garbage collector: the test takes off the foreground finalizer, as it would.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := env.client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
				return err
			}
			obj.SetFinalizers(nil)
			return env.client.Update(ctx, obj)
		})
		if err != nil {
			t.Fatalf("take the finalizers off %s with no replica: %v", obj.GetName(), err)
		}
		cluster.Eventually(t, obj.GetName()+" is gone", waitTimeout, func(ctx context.Context) error {
			if err := env.client.Get(ctx, client.ObjectKeyFromObject(obj), obj); !apierrors.IsNotFound(err) {
				return fmt.Errorf("still there (%v), finalizers %v", err, obj.GetFinalizers())
			}
			return nil
		})
	}
	deleteWebhookSecret(t)
	if n, err := env.stack.RestartExited(ctx); err != nil || n != replicas {
		t.Fatalf("start both replicas without the Secret: %d started, %v", n, err)
	}
	webhookCAChanged(t, running)
}

// webhookSecret is the webhook certificate Secret of the operator's configuration, in the namespace of the
// Deployment (the pods' POD_NAMESPACE, which the configuration does not name).
func webhookSecret(ctx context.Context) (*corev1.Secret, error) {
	var list corev1.SecretList
	name := env.stack.Operator.Config.CertManagement.WebhookSecretName
	if err := env.client.List(ctx, &list, client.MatchingFields{"metadata.name": name}); err != nil {
		return nil, err
	}
	if len(list.Items) != 1 {
		return nil, fmt.Errorf("%d Secrets named %s, want 1", len(list.Items), name)
	}
	return &list.Items[0], nil
}

func deleteWebhookSecret(t *testing.T) {
	t.Helper()
	s, err := webhookSecret(t.Context())
	if err == nil {
		err = env.client.Delete(t.Context(), s)
	}
	if err != nil {
		t.Fatalf("delete the webhook Secret: %v", err)
	}
}

// webhookCA is the CA the webhook Secret holds now.
func webhookCA(t *testing.T) *x509.Certificate {
	t.Helper()
	var ca *x509.Certificate
	cluster.Eventually(t, "the webhook Secret holds a CA", waitTimeout, func(ctx context.Context) error {
		var err error
		ca, err = secretCA(ctx)
		return err
	})
	return ca
}

func secretCA(ctx context.Context) (*x509.Certificate, error) {
	s, err := webhookSecret(ctx)
	if err != nil {
		return nil, err
	}
	certs, err := cluster.ParseCerts(s.Data["ca.crt"])
	if err != nil {
		return nil, fmt.Errorf("the webhook Secret has no CA: %v: %q", err, s.Data["ca.crt"])
	}
	return certs[0], nil
}

// webhookCAChanged waits until the webhook Secret holds a CA other than old and every replica's webhook
// server serves a certificate of it, and returns it.
func webhookCAChanged(t *testing.T, old *x509.Certificate) *x509.Certificate {
	t.Helper()
	var ca *x509.Certificate
	cluster.Eventually(t, "the webhook Secret is created again with a new CA that both replicas serve", waitTimeout, func(ctx context.Context) error {
		var err error
		if ca, err = secretCA(ctx); err != nil {
			return err
		}
		if ca.Equal(old) {
			return errors.New("the webhook Secret holds the old CA")
		}
		return servedBy(ca)
	})
	return ca
}

// servedBy is nil when every replica's webhook server serves a certificate of ca.
func servedBy(ca *x509.Certificate) error {
	for i, o := range env.stack.Replicas {
		addr := net.JoinHostPort(o.Config.Webhook.Host, strconv.Itoa(int(*o.Config.Webhook.Port)))
		if err := cluster.ServesCertOf(addr, ca); err != nil {
			return fmt.Errorf("replica %d does not serve a certificate of the Secret's CA: %w", i, err)
		}
	}
	return nil
}
