package operator_test

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator/webhook"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/integration/operator/internal/optest"
)

// rotationDeadline bounds the convergence after a rotation: the new CA in
// the Secret, in both webhook configurations, and served.
const rotationDeadline = 2 * time.Minute

// webhookSecret is the operator's certificate Secret.
var webhookSecret = client.ObjectKey{Namespace: optest.Namespace, Name: "kubectl-trainjob-webhook-cert"}

// firstCA is the first PEM block of a CA bundle.
func firstCA(bundle []byte) (*x509.Certificate, error) {
	certs, err := cluster.ParseCerts(bundle)
	if err != nil {
		return nil, fmt.Errorf("no CA certificate in %q: %v", bundle, err)
	}
	return certs[0], nil
}

// secretCA is the CA the Secret holds now.
func secretCA(ctx context.Context) (*x509.Certificate, error) {
	s := &corev1.Secret{}
	if err := optest.Get(ctx, env.Client, webhookSecret, s); err != nil {
		return nil, err
	}
	return firstCA(s.Data["ca.crt"])
}

// rotated is nil once the Secret's CA is not old, both webhook
// configurations trust it, and the webhook server serves a certificate it
// signed.
func rotated(old *x509.Certificate) func(context.Context) error {
	return func(ctx context.Context) error {
		ca, err := secretCA(ctx)
		if err != nil {
			return err
		}
		if ca.Equal(old) {
			return errors.New("the Secret still holds the old CA")
		}
		v := &admissionv1.ValidatingWebhookConfiguration{}
		if err := optest.Get(ctx, env.Client, client.ObjectKey{Name: webhook.ValidatingConfigurationName}, v); err != nil {
			return err
		}
		m := &admissionv1.MutatingWebhookConfiguration{}
		if err := optest.Get(ctx, env.Client, client.ObjectKey{Name: webhook.MutatingConfigurationName}, m); err != nil {
			return err
		}
		bundles := map[string][]byte{}
		for _, w := range v.Webhooks {
			bundles["validating "+w.Name] = w.ClientConfig.CABundle
		}
		for _, w := range m.Webhooks {
			bundles["mutating "+w.Name] = w.ClientConfig.CABundle
		}
		for name, bundle := range bundles {
			certs, err := cluster.ParseCerts(bundle)
			if err != nil {
				return fmt.Errorf("webhook %s: %v", name, err)
			}
			if !slices.ContainsFunc(certs, ca.Equal) {
				return fmt.Errorf("webhook %s does not trust the new CA yet", name)
			}
		}
		addr := net.JoinHostPort(op.Config.Webhook.Host, strconv.Itoa(int(*op.Config.Webhook.Port)))
		if err := cluster.ServesCertOf(addr, ca); err != nil {
			return fmt.Errorf("the webhook server does not serve a certificate of the new CA yet: %v", err)
		}
		return nil
	}
}

// writeLoad creates and updates TrainJobs through the webhooks until
// stopped, and keeps every refused write.
type writeLoad struct {
	mu      sync.Mutex
	ok      int
	refused []error
	stop    chan struct{}
	done    chan struct{}
}

func startWrites(t *testing.T, ns string) *writeLoad {
	t.Helper()
	w := &writeLoad{stop: make(chan struct{}), done: make(chan struct{})}
	cfg := rest.CopyConfig(env.Cluster.Config)
	cfg.QPS, cfg.Burst = 100, 200
	c, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	go func() {
		defer close(w.done)
		var jobs []*trainer.TrainJob
		for i := 0; ; i++ {
			select {
			case <-w.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			var err error
			if len(jobs) < 20 {
				tj := newTrainJob(ns, "w-"+strconv.Itoa(i), trainer.TrainingRuntimeKind, "torch")
				tj.Spec.Suspend = ptr.To(true)
				if err = c.Create(ctx, tj); err == nil {
					jobs = append(jobs, tj)
				}
			} else {
				tj := &trainer.TrainJob{}
				if err = c.Get(ctx, key(jobs[i%len(jobs)]), tj); err == nil {
					metav1.SetMetaDataAnnotation(&tj.ObjectMeta, "test/touched", strconv.Itoa(i))
					// A conflict with the operator's status write is
					// not a refusal: the next write tries again.
					if err = c.Update(ctx, tj); apierrors.IsConflict(err) {
						continue
					}
				}
			}
			w.mu.Lock()
			if err != nil {
				w.refused = append(w.refused, err)
			} else {
				w.ok++
			}
			w.mu.Unlock()
		}
	}()
	return w
}

// succeeded is the number of writes admitted so far.
func (w *writeLoad) succeeded() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ok
}

// waitFor waits until n more writes than now have been admitted.
func (w *writeLoad) waitFor(t *testing.T, n int) {
	t.Helper()
	want := w.succeeded() + n
	optest.Eventually(t, fmt.Sprintf("%d writes admitted", n), func(context.Context) error {
		if got := w.succeeded(); got < want {
			return fmt.Errorf("%d admitted, want %d", got, want)
		}
		return nil
	})
}

func (w *writeLoad) finish(t *testing.T) {
	t.Helper()
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.refused) > 0 {
		t.Errorf("%d of %d TrainJob writes refused during the rotation, the first: %v", len(w.refused), len(w.refused)+w.ok, w.refused[0])
	} else {
		t.Logf("%d TrainJob writes admitted during the rotation, none refused", w.ok)
	}
}

// TestCertificateRotationWithoutOutage (issue 17, item 6): while TrainJobs
// are created and updated through the webhooks without pause, the
// certificate Secret is deleted (and created again empty, as `kubectl
// apply` of the manifests does), or its CA rotated: not one write is
// refused, and the webhook server converges on the new CA.
func TestCertificateRotationWithoutOutage(t *testing.T) {
	faults := []struct {
		name  string
		fault func(t *testing.T)
	}{
		{
			name: "Secret deleted and created again",
			fault: func(t *testing.T) {
				s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: webhookSecret.Namespace, Name: webhookSecret.Name}}
				if err := env.Client.Delete(t.Context(), s); err != nil {
					t.Fatal(err)
				}
				optest.Eventually(t, "the Secret is gone", func(ctx context.Context) error {
					return optest.Absent(ctx, env.Client, webhookSecret, &corev1.Secret{})
				})
				create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: webhookSecret.Namespace, Name: webhookSecret.Name}})
			},
		},
		{
			name: "CA rotated",
			fault: func(t *testing.T) {
				if err := optest.BreakCA(t.Context(), env.Client, webhookSecret); err != nil {
					t.Fatal(err)
				}
			},
		},
	}
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			ns := cluster.NewNamespace(t, env.Client, "test-", nil)
			createTrainingRuntime(t, ns, "torch", torchSpec())
			old, err := secretCA(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			load := startWrites(t, ns)
			defer func() {
				select {
				case <-load.stop:
				default:
					close(load.stop)
					<-load.done
				}
			}()
			load.waitFor(t, 10)
			f.fault(t)
			if err := optest.Poll(t.Context(), rotationDeadline, rotated(old)); err != nil {
				t.Fatalf("no rotation within %v: %v", rotationDeadline, err)
			}
			load.waitFor(t, 10)
			load.finish(t)
		})
	}
}
