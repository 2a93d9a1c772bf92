package statusserver

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
)

// writeCertificate writes a self-signed certificate for 127.0.0.1 into dir
// and returns a pool that trusts it.
func writeCertificate(t *testing.T, dir string) *x509.CertPool {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "status-server"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, keyFile), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, certFile), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return pool
}

// stop ends Start's context and waits until Start has returned nil.
func stop(t *testing.T, cancel context.CancelFunc, done <-chan error) {
	t.Helper()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Start = %v after its context ended, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Start did not return after its context ended")
	}
}

// TestStartWaitsForTheCertificate: the server is not healthy until the
// certificate exists, then serves HTTPS with it, and stops with its context.
func TestStartWaitsForTheCertificate(t *testing.T) {
	dir := t.TempDir()
	s := New(Options{Host: "127.0.0.1", Port: int32(cluster.FreePortFor(t)), CertDir: dir})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()

	check := s.Checker()
	if err := check(nil); err == nil {
		t.Fatal("healthy before the certificate exists")
	}
	pool := writeCertificate(t, dir)
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return check(nil) == nil, nil
	})
	if err != nil {
		t.Fatalf("not healthy once the certificate exists: %v", check(nil))
	}

	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	resp, err := client.Get("https://" + s.Addr() + "/healthz")
	if err != nil {
		t.Fatalf("GET over TLS with the certificate's CA: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /healthz = %d, want 404 (only the status route is served)", resp.StatusCode)
	}

	stop(t, cancel, done)
	if err := check(nil); err == nil {
		t.Error("healthy after it stopped")
	}
}

// TestStartWithoutCertificate: a server without its certificate waits for
// it, neither listening nor healthy, and returns nil once stopped, without
// having listened.
func TestStartWithoutCertificate(t *testing.T) {
	port := int32(cluster.FreePortFor(t))
	s := New(Options{Host: "127.0.0.1", Port: port, CertDir: t.TempDir()})
	var mu sync.Mutex
	var waits int
	s.log = funcr.New(func(_, args string) {
		if strings.Contains(args, `"msg"="Waiting for the serving certificate"`) {
			mu.Lock()
			waits++
			mu.Unlock()
		}
	}, funcr.Options{Verbosity: 2})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()

	// Two looks for the certificate: Start is in its waiting loop.
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return waits >= 2, nil
	})
	if err != nil {
		t.Fatalf("Start did not look for its certificate twice: %v", err)
	}
	select {
	case err := <-done:
		t.Fatalf("Start returned %v without a certificate, before its context ended", err)
	default:
	}
	if err := s.Checker()(nil); err == nil {
		t.Error("healthy without a certificate")
	}
	notListening := func(when string) {
		t.Helper()
		if conn, err := net.DialTimeout("tcp", s.Addr(), time.Second); err == nil {
			conn.Close()
			t.Errorf("%s: something listens on %s", when, s.Addr())
		}
	}
	notListening("waiting for the certificate")

	stop(t, cancel, done)
	notListening("stopped")
}
