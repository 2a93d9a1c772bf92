package operator

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/config"
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
//
// cert-controller generates and renews the certificate; its own injection
// is not used, because it replaces the trusted CA at once: after a new CA
// (a deleted Secret created again, an invalid CA replaced) the API server
// would trust only the new CA while the webhook server still serves the
// certificate of the old one, and refuse every TrainJob write until the
// server has the new one. certSync injects and serves in the safe order
// instead (see there).
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
		// Every replica serves webhooks, so every replica needs the
		// certificate; concurrent rotations are settled by the Secret's
		// resourceVersion.
		RequireLeaderElection: false,
		EnableReadinessCheck:  true,
	})
	if err != nil {
		return fmt.Errorf("certificate rotation: %w", err)
	}
	certs, err := cache.New(rotating.GetConfig(), cache.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		DefaultNamespaces: map[string]cache.Config{secret.Namespace: {}},
	})
	if err != nil {
		return fmt.Errorf("certificate cache: %w", err)
	}
	// Added as a cache, it starts on every replica with the manager's own
	// caches; a bare cache.Cache would be taken for a leader's runnable and
	// never start on a replica that does not lead, which would then never
	// serve its webhooks.
	if err := mgr.Add(everyReplicaCache{certs}); err != nil {
		return err
	}
	return mgr.Add(&certSync{reader: certs, writer: mgr.GetClient(), secret: secret, dir: cfg.Webhook.CertDir, now: time.Now})
}

// everyReplicaCache is a cache the manager starts, and waits for, with its
// own (the manager recognises a cache by GetCache).
type everyReplicaCache struct{ cache.Cache }

func (c everyReplicaCache) GetCache() cache.Cache { return c.Cache }

// certSync keeps, on every replica, the CA the API server trusts and the
// certificate the webhook server serves in step, so that no TrainJob write
// is refused across a rotation:
//  1. the webhook configurations trust the Secret's CA and, for
//     previousCATrust after it changed, the CA they trusted before;
//  2. only once they have trusted the new CA for trustSettle (the API
//     server's own view of them follows its watch) is the new certificate
//     written into the webhook server's folder.
//
// Whatever the moment, the API server trusts the CA of the certificate
// served. Writing the certificate ourselves, rather than mounting the
// Secret, also makes the operator ready as soon as the certificate exists
// instead of after the kubelet's next sync, and works outside a pod (tests
// run the operator in-process).
type certSync struct {
	reader client.Reader
	writer client.Writer
	secret types.NamespacedName
	dir    string
	now    func() time.Time

	// ca is the Secret's CA last seen, since when; trusted since when
	// both webhook configurations trust it.
	ca           []byte
	caSince      time.Time
	trustedSince time.Time
}

// Timing of a rotation.
const (
	// certPoll is how often the cached Secret and webhook configurations
	// are looked at: a read of a local cache, not a request.
	certPoll = 200 * time.Millisecond
	// trustSettle is how long the webhook configurations trust a new CA
	// before the webhook server serves its certificate.
	trustSettle = 2 * time.Second
	// previousCATrust is how long the CA trusted before a rotation stays
	// trusted after it: every replica serves the new certificate well
	// before.
	previousCATrust = 5 * time.Minute
)

// NeedLeaderElection is false: every replica serves webhooks.
func (w *certSync) NeedLeaderElection() bool { return false }

// Start keeps the CA and the certificate in step until ctx ends.
func (w *certSync) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("cert-sync")
	for {
		if err := w.sync(ctx, logger); err != nil {
			logger.V(2).Info("Webhook certificate not in step yet", "secret", w.secret, "reason", err.Error())
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(certPoll):
		}
	}
}

// sync is one step: inject, then write the certificate when it is safe.
func (w *certSync) sync(ctx context.Context, logger logr.Logger) error {
	var s corev1.Secret
	if err := w.reader.Get(ctx, w.secret, &s); err != nil {
		return err
	}
	ca, crt, key := firstPEM(s.Data["ca.crt"]), s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey]
	if ca == nil || len(crt) == 0 || len(key) == 0 {
		return fmt.Errorf("secret %s has no certificate yet", w.secret)
	}
	now := w.now()
	if !bytes.Equal(ca, w.ca) {
		w.ca, w.caSince, w.trustedSince = ca, now, time.Time{}
	}
	trusted, err := w.inject(ctx, ca, now.Sub(w.caSince) < previousCATrust)
	if err != nil {
		return err
	}
	if !trusted {
		w.trustedSince = time.Time{}
		return errors.New("the webhook configurations do not trust the Secret's CA yet")
	}
	if w.trustedSince.IsZero() {
		w.trustedSince = now
	}
	oldCrt, errCrt := os.ReadFile(filepath.Join(w.dir, certFile))
	oldKey, _ := os.ReadFile(filepath.Join(w.dir, keyFile))
	if bytes.Equal(crt, oldCrt) && bytes.Equal(key, oldKey) {
		return nil
	}
	// The first certificate is written at once: nothing is served yet.
	if errCrt == nil && now.Sub(w.trustedSince) < trustSettle {
		return nil
	}
	if err := os.MkdirAll(w.dir, 0o700); err != nil {
		return err
	}
	// The key first: the server reloads on a change of the certificate.
	if err := writeFileAtomic(filepath.Join(w.dir, keyFile), key); err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(w.dir, certFile), crt); err != nil {
		return err
	}
	logger.Info("Webhook certificate written", "dir", w.dir)
	return nil
}

// inject makes every webhook of the operator's two configurations trust
// ca, and the other CAs it trusts now as long as keepPrevious; it reports
// whether all of them trusted ca already (as the cache saw them).
func (w *certSync) inject(ctx context.Context, ca []byte, keepPrevious bool) (bool, error) {
	trusted := true
	for _, cfg := range []client.Object{
		&admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: webhook.ValidatingConfigurationName}},
		&admissionv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: webhook.MutatingConfigurationName}},
	} {
		if err := w.reader.Get(ctx, client.ObjectKeyFromObject(cfg), cfg); err != nil {
			return false, err
		}
		changed := false
		for _, cc := range clientConfigs(cfg) {
			want := caBundle(ca, cc.CABundle, keepPrevious)
			if !pemContains(cc.CABundle, ca) {
				trusted = false
			}
			if !bytes.Equal(want, cc.CABundle) {
				cc.CABundle, changed = want, true
			}
		}
		if changed {
			if err := w.writer.Update(ctx, cfg); err != nil {
				return false, err
			}
		}
	}
	return trusted, nil
}

func clientConfigs(cfg client.Object) []*admissionv1.WebhookClientConfig {
	var out []*admissionv1.WebhookClientConfig
	switch c := cfg.(type) {
	case *admissionv1.ValidatingWebhookConfiguration:
		for i := range c.Webhooks {
			out = append(out, &c.Webhooks[i].ClientConfig)
		}
	case *admissionv1.MutatingWebhookConfiguration:
		for i := range c.Webhooks {
			out = append(out, &c.Webhooks[i].ClientConfig)
		}
	}
	return out
}

// caBundle is ca, then, when keepPrevious, the unexpired certificates of
// current that are not ca: at most maxTrustedCAs in all.
func caBundle(ca, current []byte, keepPrevious bool) []byte {
	out := slices.Clone(ca)
	if !keepPrevious {
		return out
	}
	n := 1
	for rest := current; n < maxTrustedCAs; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil || time.Now().After(c.NotAfter) {
			continue
		}
		if encoded := pem.EncodeToMemory(block); !bytes.Equal(encoded, ca) {
			out, n = append(out, encoded...), n+1
		}
	}
	return out
}

// maxTrustedCAs bounds the bundle: the Secret's CA and the one before.
const maxTrustedCAs = 2

// firstPEM is the first PEM block of data, re-encoded; nil if none.
func firstPEM(data []byte) []byte {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil
	}
	return pem.EncodeToMemory(block)
}

// pemContains reports whether the bundle holds the PEM block one.
func pemContains(bundle, one []byte) bool {
	for rest := bundle; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return false
		}
		if bytes.Equal(pem.EncodeToMemory(block), one) {
			return true
		}
	}
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
