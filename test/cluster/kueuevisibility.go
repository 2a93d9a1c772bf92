package cluster

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Kueue's visibility API (the positions of pending Workloads) is an aggregated API server inside Kueue's manager.
// The API server forwards its requests to the endpoint of the Service kueueVisibilityService (aggregator
// routing: there is no Service network here), which points at the Kueue process on this machine's address, and
// proves who asks with its front-proxy client certificate; the visibility server checks that certificate
// against the extension-apiserver-authentication ConfigMap and asks the API server whether the user may. Kueue
// runs as the cluster administrator here, so it needs no RBAC of its own for that.
const (
	kueueVisibilityGroup   = "visibility.kueue.x-k8s.io"
	kueueVisibilityService = "kueue-visibility-server"
	// frontProxyClient is the name in the API server's front-proxy client certificate, the one name an
	// aggregated API server accepts the forwarded user from.
	frontProxyClient = "front-proxy-client"
)

// kueueVisibilityVersions are the versions of the visibility API that Kueue v0.17.0 serves (pkg/visibility).
var kueueVisibilityVersions = []string{"v1beta2", "v1beta1"}

var apiServiceGVR = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// prepareAggregation gives the API server its aggregation layer: the CA that signs the front-proxy client
// certificate, that certificate, and the headers it forwards the user in; and it calls an aggregated API server
// at its Service's endpoint rather than its cluster IP, which nothing routes here.
func prepareAggregation(api *envtest.APIServer, certDir string) error {
	ca, err := newCertificateAuthority("front-proxy-ca")
	if err != nil {
		return err
	}
	caFile := filepath.Join(certDir, "front-proxy-ca.crt")
	certFile, keyFile := filepath.Join(certDir, "front-proxy-client.crt"), filepath.Join(certDir, "front-proxy-client.key")
	if err := os.WriteFile(caFile, ca.certPEM, 0o644); err != nil {
		return err
	}
	if err := ca.issue(certFile, keyFile, pkix.Name{CommonName: frontProxyClient}, x509.ExtKeyUsageClientAuth, nil, nil); err != nil {
		return err
	}
	flags := api.Configure()
	flags.Set("requestheader-client-ca-file", caFile)
	flags.Set("requestheader-allowed-names", frontProxyClient)
	flags.Set("requestheader-username-headers", "X-Remote-User")
	flags.Set("requestheader-group-headers", "X-Remote-Group")
	flags.Set("requestheader-extra-headers-prefix", "X-Remote-Extra-")
	flags.Set("proxy-client-cert-file", certFile)
	flags.Set("proxy-client-key-file", keyFile)
	flags.Set("enable-aggregator-routing", "true")
	return nil
}

// kueueVisibility is where Kueue's visibility server listens, and the folder of its serving certificate
// (tls.crt and tls.key, which Kueue reads from /visibility: kueueCommand links it there).
type kueueVisibility struct {
	ip      net.IP
	port    int
	certDir string
}

// newKueueVisibility picks the visibility server's address, this machine's (Kubernetes refuses a loopback
// endpoint), and a port, and writes its serving certificate for its Service's name into certDir, signed by a
// CA of its own. It registers the Service, its endpoint and the APIServices of the visibility API.
func (c *Cluster) newKueueVisibility(ctx context.Context, certDir string) (*kueueVisibility, error) {
	ip, err := hostAddress()
	if err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	v := &kueueVisibility{ip: ip, port: port, certDir: certDir}
	ca, err := newCertificateAuthority("kueue-visibility-ca")
	if err != nil {
		return nil, err
	}
	svcName := kueueVisibilityService + "." + kueueNamespace + ".svc"
	if err := ca.issue(filepath.Join(certDir, "tls.crt"), filepath.Join(certDir, "tls.key"), pkix.Name{CommonName: svcName},
		x509.ExtKeyUsageServerAuth, []string{svcName}, []net.IP{ip}); err != nil {
		return nil, err
	}
	return v, c.registerKueueVisibility(ctx, v, ca.certPEM)
}

// registerKueueVisibility creates the selector-less Service of the visibility server, the EndpointSlice that
// points it at v, and one APIService a version, trusting caPEM.
func (c *Cluster) registerKueueVisibility(ctx context.Context, v *kueueVisibility, caPEM []byte) error {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: kueueNamespace, Name: kueueVisibilityService},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromInt(v.port)}}}}
	if _, err := c.client.CoreV1().Services(kueueNamespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create Service %s: %w", svc.Name, err)
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: kueueNamespace, Name: kueueVisibilityService,
			Labels: map[string]string{discoveryv1.LabelServiceName: kueueVisibilityService, discoveryv1.LabelManagedBy: "trainjob-local-cluster"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{v.ip.String()}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To(int32(v.port)), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	if v.ip.To4() == nil {
		slice.AddressType = discoveryv1.AddressTypeIPv6
	}
	if _, err := c.client.DiscoveryV1().EndpointSlices(kueueNamespace).Create(ctx, slice, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create EndpointSlice %s: %w", slice.Name, err)
	}
	client, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	for _, version := range kueueVisibilityVersions {
		apiService := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
			"metadata": map[string]any{"name": version + "." + kueueVisibilityGroup},
			"spec": map[string]any{
				"group": kueueVisibilityGroup, "version": version, "groupPriorityMinimum": int64(100), "versionPriority": int64(100),
				"service":  map[string]any{"namespace": kueueNamespace, "name": kueueVisibilityService, "port": int64(443)},
				"caBundle": base64.StdEncoding.EncodeToString(caPEM),
			},
		}}
		if _, err := client.Resource(apiServiceGVR).Create(ctx, apiService, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create APIService %s: %w", apiService.GetName(), err)
		}
	}
	return nil
}

// kueueVisibilityAvailable reports whether the API server reaches the visibility server: its APIServices are
// Available.
func (c *Cluster) kueueVisibilityAvailable(ctx context.Context) (bool, error) {
	client, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		return false, err
	}
	for _, version := range kueueVisibilityVersions {
		u, err := client.Resource(apiServiceGVR).Get(ctx, version+"."+kueueVisibilityGroup, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if ok, err := conditionTrue(u, "Available"); !ok {
			return false, err
		}
	}
	return true, nil
}

// hostAddress is an address of this machine that is neither loopback nor link-local: the first of the first
// interface that is up and has one.
func hostAddress() (net.IP, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	for _, iface := range ifaces {
		if iface.Flags&net.FlagUp == 0 || iface.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := iface.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if ipnet, ok := a.(*net.IPNet); ok && ipnet.IP.IsGlobalUnicast() {
				return ipnet.IP, nil
			}
		}
	}
	return nil, errors.New("Kueue's visibility API needs an address of this machine that is neither loopback nor link-local " +
		"(Kubernetes refuses a loopback endpoint), and no interface has one")
}
