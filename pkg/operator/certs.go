package operator

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator/config"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator/webhook"
)

// Names of the in-process certificate authority.
const (
	caName         = "kubectl-trainjob-ca"
	caOrganization = "kubectl-trainjob"
)

// The files of a serving certificate, as the webhook server reads them.
const (
	certFile = "tls.crt"
	keyFile  = "tls.key"
)

// addCertRotation makes mgr generate and rotate the webhook serving
// certificate in the configured Secret, inject its CA into the webhook
// configurations, and write it into the webhook server's folder. ready is
// closed once the certificate is in the folder and the CA injected.
func addCertRotation(mgr manager.Manager, cfg *config.Configuration, ready chan struct{}) error {
	cm := cfg.CertManagement
	secret := types.NamespacedName{Namespace: cfg.Namespace, Name: cm.WebhookSecretName}
	dnsName := fmt.Sprintf("%s.%s.svc", cm.WebhookServiceName, cfg.Namespace)
	// Rotation reads only its own Secret and webhook configurations: the Role and ClusterRole name them.
	rotating := listedByName(mgr, namedCollections{
		"/namespaces/" + secret.Namespace + "/secrets": secret.Name,
		"/validatingwebhookconfigurations":             webhook.ValidatingConfigurationName,
		"/mutatingwebhookconfigurations":               webhook.MutatingConfigurationName,
	})
	err := rotator.AddRotator(rotating, &rotator.CertRotator{
		SecretKey:      secret,
		CertDir:        cfg.Webhook.CertDir,
		CAName:         caName,
		CAOrganization: caOrganization,
		DNSName:        dnsName,
		ExtraDNSNames:  append([]string{dnsName + ".cluster.local"}, cm.ExtraDNSNames...),
		IsReady:        ready,
		Webhooks: []rotator.WebhookInfo{
			{Name: webhook.ValidatingConfigurationName, Type: rotator.Validating},
			{Name: webhook.MutatingConfigurationName, Type: rotator.Mutating},
		},
		// Every replica serves webhooks, so every replica needs the
		// certificate; concurrent rotations are settled by the Secret's
		// resourceVersion.
		RequireLeaderElection: false,
		EnableReadinessCheck:  true,
	})
	if err != nil {
		return fmt.Errorf("certificate rotation: %w", err)
	}
	return mgr.Add(&certWriter{reader: mgr.GetAPIReader(), secret: secret, dir: cfg.Webhook.CertDir})
}

// certWriter copies the serving certificate from its Secret into the
// webhook server's folder, and again whenever it is rotated. Writing it
// ourselves, rather than mounting the Secret, makes the operator ready as
// soon as the certificate exists instead of after the kubelet's next sync,
// and works outside a pod (tests run the operator in-process).
type certWriter struct {
	reader client.Reader
	secret types.NamespacedName
	dir    string
}

// Poll intervals: quick until the first certificate is written, then
// slow (rotation renews certificates weeks before they expire).
const (
	certPollFast = 200 * time.Millisecond
	certPollSlow = time.Minute
)

// NeedLeaderElection is false: every replica serves webhooks.
func (w *certWriter) NeedLeaderElection() bool { return false }

// Start copies the certificate until ctx ends.
func (w *certWriter) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("cert-writer")
	interval := certPollFast
	for {
		written, err := w.sync(ctx)
		switch {
		case err != nil:
			logger.V(2).Info("Webhook certificate not copied yet", "secret", w.secret, "reason", err.Error())
		case written:
			logger.Info("Webhook certificate written", "dir", w.dir)
			interval = certPollSlow
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval):
		}
	}
}

// sync writes the Secret's certificate and key when they differ from the
// files; it reports whether it wrote them.
func (w *certWriter) sync(ctx context.Context) (bool, error) {
	var s corev1.Secret
	if err := w.reader.Get(ctx, w.secret, &s); err != nil {
		return false, err
	}
	crt, key := s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey]
	if len(crt) == 0 || len(key) == 0 {
		return false, fmt.Errorf("secret %s has no certificate yet", w.secret)
	}
	oldCrt, _ := os.ReadFile(filepath.Join(w.dir, certFile))
	oldKey, _ := os.ReadFile(filepath.Join(w.dir, keyFile))
	if bytes.Equal(crt, oldCrt) && bytes.Equal(key, oldKey) {
		return false, nil
	}
	if err := os.MkdirAll(w.dir, 0o700); err != nil {
		return false, err
	}
	// The key first: the server reloads on a change of the certificate.
	if err := writeFileAtomic(filepath.Join(w.dir, keyFile), key); err != nil {
		return false, err
	}
	return true, writeFileAtomic(filepath.Join(w.dir, certFile), crt)
}

// writeFileAtomic replaces a file by renaming a complete copy over it, so
// that a reader never sees half a certificate.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
