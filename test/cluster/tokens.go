package cluster

import (
	"context"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// MetricsReader is the ClusterRole of config/rbac that may scrape the operator's /metrics.
const MetricsReader = "kubectl-trainjob-metrics-reader"

// metricsScraper is the ServiceAccount (in namespace default) whose token MetricsReaderToken returns.
const metricsScraper = "metrics-scraper"

// tokenLifetime is how long the tokens made here are valid: longer than any test, bench or demo session.
const tokenLifetime = 7 * 24 * time.Hour

// ServiceAccountToken is a token of ServiceAccount namespace/name from the TokenRequest API.
func ServiceAccountToken(ctx context.Context, cs kubernetes.Interface, namespace, name string) (string, error) {
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(tokenLifetime.Seconds()))},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token of ServiceAccount %s/%s: %w", namespace, name, err)
	}
	return tr.Status.Token, nil
}

// MetricsReaderToken is a bearer token for the operator's /metrics, which answers only who may get it: the
// token of ServiceAccount default/metrics-scraper, bound to ClusterRole MetricsReader. The ClusterRole is
// created as config/rbac ships it when the manifests were not applied.
func (c *Cluster) MetricsReaderToken(ctx context.Context) (string, error) {
	cs := c.Clientset()
	objs := []func() error{
		func() error {
			_, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
				ObjectMeta: metav1.ObjectMeta{Name: MetricsReader},
				Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
			}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := cs.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Create(ctx,
				&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: metricsScraper}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: metricsScraper},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: MetricsReader},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: metav1.NamespaceDefault, Name: metricsScraper}},
			}, metav1.CreateOptions{})
			return err
		},
	}
	for _, create := range objs {
		if err := create(); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("metrics reader: %w", err)
		}
	}
	return ServiceAccountToken(ctx, cs, metav1.NamespaceDefault, metricsScraper)
}
