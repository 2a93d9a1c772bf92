package operator

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
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
