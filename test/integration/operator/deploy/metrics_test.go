package deploy_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/integration/operator/internal/optest"
)

// metricsNeedAuthorization scrapes the operator's /metrics as nobody, as a ServiceAccount with no right to
// it, and as one bound to the shipped metrics-reader ClusterRole: the API server reviews each token, for an
// operator that has only config/rbac's permissions.
func metricsNeedAuthorization(t *testing.T, op *optest.Operator, ns string) {
	bound, unbound := "prometheus", "nosy"
	for _, name := range []string{bound, unbound} {
		if err := env.Client.Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "test-" + ns + "-prometheus"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: cluster.MetricsReader},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: bound}},
	}
	if err := env.Client.Create(t.Context(), binding); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(t.Context(), binding) })
	token := func(name string) string {
		tok, err := cluster.ServiceAccountToken(t.Context(), env.Clientset, ns, name)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}

	scrape := func(token string) (int, string) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, op.MetricsURL(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // self-signed metrics certificate
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := scrape(""); code != http.StatusUnauthorized && code != http.StatusForbidden {
		t.Errorf("an anonymous scrape of /metrics: %d %.80q, want 401 or 403", code, body)
	}
	// controller-runtime's filter answers 500 when the TokenReview reports an error, as it does for a token
	// that is no JWT: refused all the same.
	if code, body := scrape("not-a-token"); code == http.StatusOK {
		t.Errorf("a scrape with a made-up token: %d %.80q, want it refused", code, body)
	}
	if code, body := scrape(token(unbound)); code != http.StatusForbidden {
		t.Errorf("a scrape as ServiceAccount %s/%s, not bound to %s: %d %.80q, want 403", ns, unbound, cluster.MetricsReader, code, body)
	}
	// The authorizer caches its answers for a while, and the binding was made a moment ago: wait for a 200.
	optest.Eventually(t, "a ServiceAccount bound to the metrics reader scrapes /metrics", func(ctx context.Context) error {
		code, body := scrape(token(bound))
		if code != http.StatusOK || !strings.Contains(body, "controller_runtime_reconcile_total") {
			return fmt.Errorf("%d %.200q", code, body)
		}
		return nil
	})
}
