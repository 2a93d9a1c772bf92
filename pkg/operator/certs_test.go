package operator

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator/webhook"
)

// testCA is a self-signed CA certificate in PEM, valid until notAfter.
func testCA(t *testing.T, name string, notAfter time.Time) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: notAfter.Add(-48 * time.Hour), NotAfter: notAfter,
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// TestCABundle: the webhook configurations trust the Secret's CA first,
// and the one they trusted before for a while, never more than two, never
// an expired one.
func TestCABundle(t *testing.T) {
	live := time.Now().Add(24 * time.Hour)
	newCA, oldCA, olderCA := testCA(t, "new", live), testCA(t, "old", live), testCA(t, "older", live)
	expired := testCA(t, "expired", time.Now().Add(-time.Hour))
	join := func(pems ...[]byte) []byte {
		var out []byte
		for _, p := range pems {
			out = append(out, p...)
		}
		return out
	}
	cases := []struct {
		name         string
		current      []byte
		keepPrevious bool
		want         []byte
	}{
		{name: "nothing trusted yet", current: nil, keepPrevious: true, want: newCA},
		{name: "already trusted alone", current: newCA, keepPrevious: true, want: newCA},
		{name: "a new CA keeps the previous one", current: oldCA, keepPrevious: true, want: join(newCA, oldCA)},
		{name: "the previous one dropped after its time", current: join(newCA, oldCA), keepPrevious: false, want: newCA},
		{name: "at most the previous one", current: join(oldCA, olderCA), keepPrevious: true, want: join(newCA, oldCA)},
		{name: "an expired one is dropped", current: join(expired, oldCA), keepPrevious: true, want: join(newCA, oldCA)},
		{name: "not PEM", current: []byte("garbage"), keepPrevious: true, want: newCA},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(string(tc.want), string(caBundle(newCA, tc.current, tc.keepPrevious))); diff != "" {
				t.Errorf("bundle (-want +got):\n%s", diff)
			}
			if !pemContains(caBundle(newCA, tc.current, tc.keepPrevious), newCA) {
				t.Error("the bundle does not hold the Secret's CA")
			}
		})
	}
}

// TestCertSyncRecreatesTheSecret: a replica that finds no Secret, at start
// or later, creates it with a new CA, injects that CA, serves its
// certificate and keeps the bundle in memory; a second replica follows the
// Secret the first wrote instead of writing its own.
func TestCertSyncRecreatesTheSecret(t *testing.T) {
	ctx := context.Background()
	secret := types.NamespacedName{Namespace: "ops", Name: "webhook-cert"}
	c := fake.NewClientBuilder().WithObjects(
		&admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: webhook.ValidatingConfigurationName},
			Webhooks: []admissionv1.ValidatingWebhook{{Name: "v"}}},
		&admissionv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: webhook.MutatingConfigurationName},
			Webhooks: []admissionv1.MutatingWebhook{{Name: "m"}}},
	).Build()
	replica := func() *certSync {
		return &certSync{
			reader: c, writer: c, secret: secret, dir: t.TempDir(), now: time.Now,
			issuer: &rotator.CertRotator{CAName: caName, CAOrganization: caOrganization, DNSName: "svc.ops.svc",
				ExtKeyUsages: &[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}},
			ready: make(chan struct{}), served: newServingCA(),
		}
	}
	a, b := replica(), replica()
	secretCA := func() []byte {
		t.Helper()
		var s corev1.Secret
		if err := c.Get(ctx, secret, &s); err != nil {
			t.Fatal(err)
		}
		return s.Data[caCertKey]
	}
	// step syncs until a step finds everything in step: the first
	// injects, the next sees the injection.
	step := func(w *certSync) {
		t.Helper()
		var err error
		for range 3 {
			if err = w.sync(ctx, logr.Discard()); err == nil {
				return
			}
		}
		t.Fatalf("sync: %v", err)
	}
	check := func(w *certSync, ca []byte) {
		t.Helper()
		select {
		case <-w.ready:
		default:
			t.Error("not ready after a step that served the certificate")
		}
		if got, err := w.served.Bundle(ctx); err != nil || !bytes.Equal(got, ca) {
			t.Errorf("bundle in memory %q, %v; want the Secret's CA", got, err)
		}
		crt, err := os.ReadFile(filepath.Join(w.dir, certFile))
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := rotator.ValidCert(ca, crt, mustRead(t, filepath.Join(w.dir, keyFile)), "svc.ops.svc", nil, time.Now()); !ok {
			t.Errorf("the certificate served is not one of the Secret's CA: %v", err)
		}
	}

	step(a)
	first := secretCA()
	check(a, first)
	step(b)
	if !bytes.Equal(secretCA(), first) {
		t.Fatal("the second replica replaced the Secret the first created")
	}
	check(b, first)

	if err := c.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: secret.Namespace, Name: secret.Name}}); err != nil {
		t.Fatal(err)
	}
	step(b)
	second := secretCA()
	if bytes.Equal(second, first) {
		t.Fatal("the Secret was created again with the old CA")
	}
	step(a)
	if !bytes.Equal(secretCA(), second) {
		t.Fatal("the other replica replaced the Secret created again")
	}
	// Both trust the old and the new CA while the old one is still served.
	for _, w := range []*certSync{a, b} {
		if got, _ := w.served.Bundle(ctx); !pemContains(got, second) || !pemContains(got, first) {
			t.Errorf("bundle in memory after the new CA: %q, want both CAs", got)
		}
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
