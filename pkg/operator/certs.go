package operator

import (
	"bytes"
	"context"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// Validity of what the operator issues, as cert-controller's defaults: a
// certificate is renewed when it would not be valid renewBefore from now.
const (
	caValidity   = 10 * 365 * 24 * time.Hour
	certValidity = 365 * 24 * time.Hour
	renewBefore  = 90 * 24 * time.Hour
	// certCheck is how often a Secret that has not changed is checked
	// again for renewal.
	certCheck = time.Hour
)

// secretLabels are the labels of the Secret the operator creates, as the
// manifests label it.
var secretLabels = map[string]string{"app.kubernetes.io/name": "kubectl-trainjob", "app.kubernetes.io/component": "operator"}

// addCertRotation makes mgr issue and renew the webhook serving
// certificate in the configured Secret (created again at once when it is
// deleted), inject its CA into the webhook configurations, write the
// certificate into the webhook server's folder, and keep ca at the bundle
// the API server trusts. ready is closed once the certificate is in the
// folder and the CA injected.
//
// It runs on every replica, which all serve webhooks. Whichever replica's
// write of the Secret the API server takes first wins: the other one's
// create is refused (AlreadyExists) or its update (a conflict on the
// resourceVersion), and it follows what its cache then shows, so the two
// never serve certificates of different CAs for long. A replica that
// starts while the Secret is missing creates it; it never waits for
// anyone.
func addCertRotation(mgr manager.Manager, cfg *config.Configuration, ready chan struct{}, ca *servingCA) error {
	cm := cfg.CertManagement
	secret := types.NamespacedName{Namespace: cfg.Namespace, Name: cm.WebhookSecretName}
	dnsName := fmt.Sprintf("%s.%s.svc", cm.WebhookServiceName, cfg.Namespace)
	certs, err := certCache(mgr, secret, true)
	if err != nil {
		return err
	}
	return mgr.Add(&certSync{
		reader: certs, writer: mgr.GetClient(), secret: secret, dir: cfg.Webhook.CertDir, now: time.Now,
		issuer: &rotator.CertRotator{
			CAName: caName, CAOrganization: caOrganization, DNSName: dnsName,
			ExtraDNSNames: append([]string{dnsName + ".cluster.local"}, cm.ExtraDNSNames...),
			ExtKeyUsages:  &[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		},
		ready: ready, served: ca,
	})
}

// addSecretCA keeps ca at the Secret's CA when the operator does not
// manage its certificates (cert-manager does, or another replica's
// webhooks): the status server's clients trust what the Secret holds.
func addSecretCA(mgr manager.Manager, cfg *config.Configuration, ca *servingCA) error {
	secret := types.NamespacedName{Namespace: cfg.Namespace, Name: cfg.CertManagement.WebhookSecretName}
	certs, err := certCache(mgr, secret, false)
	if err != nil {
		return err
	}
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		for {
			var s corev1.Secret
			if err := certs.Get(ctx, secret, &s); err == nil && firstPEM(s.Data[caCertKey]) != nil {
				ca.set(s.Data[caCertKey])
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(certPoll):
			}
		}
	}))
}

// certCache is a cache, started on every replica, of the Secret and, with
// webhooks, the operator's two webhook configurations. It reads only those:
// the Role and ClusterRole name them.
func certCache(mgr manager.Manager, secret types.NamespacedName, webhooks bool) (cache.Cache, error) {
	names := namedCollections{"/namespaces/" + secret.Namespace + "/secrets": secret.Name}
	if webhooks {
		names["/validatingwebhookconfigurations"] = webhook.ValidatingConfigurationName
		names["/mutatingwebhookconfigurations"] = webhook.MutatingConfigurationName
	}
	certs, err := cache.New(listedByName(mgr.GetConfig(), names), cache.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		DefaultNamespaces: map[string]cache.Config{secret.Namespace: {}},
	})
	if err != nil {
		return nil, fmt.Errorf("certificate cache: %w", err)
	}
	// Added as a cache, it starts on every replica with the manager's own
	// caches; a bare cache.Cache would be taken for a leader's runnable and
	// never start on a replica that does not lead, which would then never
	// serve its webhooks.
	if err := mgr.Add(everyReplicaCache{certs}); err != nil {
		return nil, err
	}
	return certs, nil
}

// everyReplicaCache is a cache the manager starts, and waits for, with its
// own (the manager recognises a cache by GetCache).
type everyReplicaCache struct{ cache.Cache }

func (c everyReplicaCache) GetCache() cache.Cache { return c.Cache }

// The keys of the Secret's CA.
const (
	caCertKey = "ca.crt"
	caKeyKey  = "ca.key"
)

// certSync keeps, on every replica, the Secret's certificate valid, and
// the CA the API server trusts and the certificate the webhook server
// serves in step, so that no TrainJob write is refused across a rotation:
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
	// issuer makes CAs and certificates (cert-controller's).
	issuer *rotator.CertRotator
	// ready is closed once a certificate is served; served is the bundle
	// the webhook configurations trust.
	ready  chan struct{}
	served *servingCA

	// ca is the Secret's CA last seen, since when; trusted since when
	// both webhook configurations trust it.
	ca           []byte
	caSince      time.Time
	trustedSince time.Time
	// checked is the Secret's version last found valid, when.
	checkedVersion string
	checkedAt      time.Time
}

// Timing of a rotation.
const (
	// certPoll is how often the cached Secret and webhook configurations
	// are looked at: a read of a local cache, which a watch keeps, not a
	// request.
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

// Start keeps the certificate valid, and the CA and the certificate in
// step, until ctx ends.
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

// sync is one step: issue, inject, then write the certificate when it is
// safe.
func (w *certSync) sync(ctx context.Context, logger logr.Logger) error {
	s, err := w.issued(ctx, logger)
	if err != nil {
		return err
	}
	ca, crt, key := firstPEM(s.Data[caCertKey]), s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey]
	if ca == nil || len(crt) == 0 || len(key) == 0 {
		return fmt.Errorf("secret %s has no certificate yet", w.secret)
	}
	now := w.now()
	if !bytes.Equal(ca, w.ca) {
		w.ca, w.caSince, w.trustedSince = ca, now, time.Time{}
	}
	bundle, trusted, err := w.inject(ctx, ca, now.Sub(w.caSince) < previousCATrust)
	if err != nil {
		return err
	}
	if !trusted {
		w.trustedSince = time.Time{}
		return errors.New("the webhook configurations do not trust the Secret's CA yet")
	}
	w.served.set(bundle)
	if w.trustedSince.IsZero() {
		w.trustedSince = now
	}
	oldCrt, errCrt := os.ReadFile(filepath.Join(w.dir, certFile))
	oldKey, _ := os.ReadFile(filepath.Join(w.dir, keyFile))
	if bytes.Equal(crt, oldCrt) && bytes.Equal(key, oldKey) {
		w.markReady()
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
	w.markReady()
	return nil
}

func (w *certSync) markReady() {
	select {
	case <-w.ready:
	default:
		close(w.ready)
	}
}

// issued is the Secret with a valid CA and certificate: created when it is
// missing, renewed when its CA or certificate is missing, invalid, or
// would expire within renewBefore. A write another replica made first
// (AlreadyExists, a conflict) is an error of this step: the next one reads
// what that replica wrote.
func (w *certSync) issued(ctx context.Context, logger logr.Logger) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	err := w.reader.Get(ctx, w.secret, s)
	if apierrors.IsNotFound(err) {
		s = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: w.secret.Namespace, Name: w.secret.Name, Labels: secretLabels}}
		if err := w.issue(s, true); err != nil {
			return nil, err
		}
		if err := w.writer.Create(ctx, s); err != nil {
			return nil, fmt.Errorf("create the Secret: %w", err)
		}
		logger.Info("Webhook certificate Secret created", "secret", w.secret)
		return s, nil
	}
	if err != nil {
		return nil, err
	}
	now := w.now()
	if s.ResourceVersion == w.checkedVersion && now.Sub(w.checkedAt) < certCheck {
		return s, nil
	}
	at := now.Add(renewBefore)
	caCrt, caKey := s.Data[caCertKey], s.Data[caKeyKey]
	validCA, _ := rotator.ValidCert(caCrt, caCrt, caKey, w.issuer.CAName, nil, at)
	valid, _ := rotator.ValidCert(caCrt, s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey], w.issuer.DNSName, w.issuer.ExtKeyUsages, at)
	if validCA && valid {
		w.checkedVersion, w.checkedAt = s.ResourceVersion, now
		return s, nil
	}
	if err := w.issue(s, !validCA); err != nil {
		return nil, err
	}
	if err := w.writer.Update(ctx, s); err != nil {
		return nil, fmt.Errorf("renew the certificate: %w", err)
	}
	logger.Info("Webhook certificate renewed", "secret", w.secret, "newCA", !validCA)
	return s, nil
}

// issue fills s with a new certificate, of a new CA when newCA, else of
// the CA s holds.
func (w *certSync) issue(s *corev1.Secret, newCA bool) error {
	now := w.now()
	begin := now.Add(-time.Hour)
	var ca *rotator.KeyPairArtifacts
	var err error
	if newCA {
		ca, err = w.issuer.CreateCACert(begin, now.Add(caValidity))
	} else {
		ca, err = parseCA(s.Data[caCertKey], s.Data[caKeyKey])
	}
	if err != nil {
		return err
	}
	crt, key, err := w.issuer.CreateCertPEM(ca, begin, now.Add(certValidity))
	if err != nil {
		return err
	}
	if s.Data == nil {
		s.Data = map[string][]byte{}
	}
	s.Data[caCertKey], s.Data[caKeyKey] = ca.CertPEM, ca.KeyPEM
	s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey] = crt, key
	return nil
}

// parseCA is the CA of a Secret, to sign a new certificate with.
func parseCA(crt, key []byte) (*rotator.KeyPairArtifacts, error) {
	pair, err := tls.X509KeyPair(crt, key)
	if err != nil {
		return nil, fmt.Errorf("the Secret's CA: %w", err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("the Secret's CA: %w", err)
	}
	rsaKey, ok := pair.PrivateKey.(*rsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("the Secret's CA key is a %T, not RSA", pair.PrivateKey)
	}
	return &rotator.KeyPairArtifacts{Cert: cert, Key: rsaKey, CertPEM: crt, KeyPEM: key}, nil
}

// servingCA is the CA bundle the webhook configurations trust, in memory:
// the pipeline's ServingCA in the operator (pipeline.NewOperatorHandle).
// Builds read it instead of the Secret, so that none fails while the
// Secret is gone, and none sends a request for it.
type servingCA struct {
	mu     sync.Mutex
	bundle []byte
	known  chan struct{}
	notify []func()
}

// caWait bounds how long a build waits for the first bundle, as the
// operator starts.
const caWait = 10 * time.Second

func newServingCA() *servingCA { return &servingCA{known: make(chan struct{})} }

// set makes bundle the CA bundle, and tells who asked when it changed.
func (c *servingCA) set(bundle []byte) {
	c.mu.Lock()
	if bytes.Equal(c.bundle, bundle) {
		c.mu.Unlock()
		return
	}
	first := c.bundle == nil
	c.bundle = slices.Clone(bundle)
	notify := slices.Clone(c.notify)
	c.mu.Unlock()
	if first {
		close(c.known)
	}
	for _, f := range notify {
		f()
	}
}

// Bundle is the CA bundle, once there is one.
func (c *servingCA) Bundle(ctx context.Context) ([]byte, error) {
	select {
	case <-c.known:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(caWait):
		return nil, errors.New("the operator has no CA of its serving certificate yet")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bundle, nil
}

// Notify calls f after each change of the bundle.
func (c *servingCA) Notify(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.notify = append(c.notify, f)
}

// inject makes every webhook of the operator's two configurations trust
// ca, and the other CAs it trusts now as long as keepPrevious; it returns
// the bundle they trust and reports whether all of them trusted ca already
// (as the cache saw them).
func (w *certSync) inject(ctx context.Context, ca []byte, keepPrevious bool) ([]byte, bool, error) {
	trusted := true
	var bundle []byte
	for _, cfg := range []client.Object{
		&admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: webhook.ValidatingConfigurationName}},
		&admissionv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: webhook.MutatingConfigurationName}},
	} {
		if err := w.reader.Get(ctx, client.ObjectKeyFromObject(cfg), cfg); err != nil {
			return nil, false, err
		}
		changed := false
		for _, cc := range clientConfigs(cfg) {
			want := caBundle(ca, cc.CABundle, keepPrevious)
			if bundle == nil {
				bundle = want
			}
			if !pemContains(cc.CABundle, ca) {
				trusted = false
			}
			if !bytes.Equal(want, cc.CABundle) {
				cc.CABundle, changed = want, true
			}
		}
		if changed {
			if err := w.writer.Update(ctx, cfg); err != nil {
				return nil, false, err
			}
		}
	}
	return bundle, trusted, nil
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
