package cluster

import (
	"context"
	"errors"
	"net"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// ClusterDomain is the DNS domain of the real node's pods.
const ClusterDomain = "cluster.local"

// resolver answers the real node's pods for the names Kubernetes DNS gives Services, as CoreDNS's kubernetes
// plugin does for the cases trainers use: <service>.<namespace>.svc.cluster.local is the ClusterIP, or for a
// headless Service the addresses of its endpoints; <hostname>.<service>.<namespace>.svc.cluster.local is the
// endpoint with that hostname (a JobSet pod's name, through its subdomain). Every other name is unknown: it
// forwards nothing, so no pod resolves an address outside the cluster. It reads the API server on every query
// (a few per trainer), so its answers are never stale; CoreDNS would have cost a build of its module and a pod.
type resolver struct {
	client kubernetes.Interface
	conn   net.PacketConn
}

// resolverTTL is short: a restarted pod has a new address.
const resolverTTL = 1

// serveDNS answers DNS over UDP at addr until conn is closed.
func (n *nodeNetwork) serveDNS(client kubernetes.Interface) error {
	conn, err := net.ListenPacket("udp", net.JoinHostPort(n.hostIP.String(), "53"))
	if err != nil {
		return err
	}
	n.listeners = append(n.listeners, conn)
	r := &resolver{client: client, conn: conn}
	n.wg.Go(r.serve)
	return nil
}

func (r *resolver) serve() {
	buf := make([]byte, 1500)
	for {
		size, from, err := r.conn.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		query := append([]byte(nil), buf[:size]...)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if reply, err := r.reply(ctx, query); err == nil {
				_, _ = r.conn.WriteTo(reply, from)
			}
		}()
	}
}

// reply answers one query message.
func (r *resolver) reply(ctx context.Context, query []byte) ([]byte, error) {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil {
		return nil, err
	}
	q, err := p.Question()
	if err != nil {
		return nil, err
	}
	head := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired, RCode: dnsmessage.RCodeSuccess}
	ips, known, err := r.lookup(ctx, strings.ToLower(q.Name.String()))
	switch {
	case err != nil:
		head.RCode = dnsmessage.RCodeServerFailure
	case !known:
		head.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, head)
	b.EnableCompression()
	if err := b.StartQuestions(); err != nil {
		return nil, err
	}
	if err := b.Question(q); err != nil {
		return nil, err
	}
	if err := b.StartAnswers(); err != nil {
		return nil, err
	}
	if q.Type == dnsmessage.TypeA && q.Class == dnsmessage.ClassINET {
		for _, ip := range ips {
			var a dnsmessage.AResource
			copy(a.A[:], ip.To4())
			if err := b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: resolverTTL}, a); err != nil {
				return nil, err
			}
		}
	}
	return b.Finish()
}

// lookup returns the IPv4 addresses of a fully qualified name, and whether the name exists at all (a name
// can exist without addresses: a headless Service whose pods have none yet).
func (r *resolver) lookup(ctx context.Context, fqdn string) ([]net.IP, bool, error) {
	rest, ok := strings.CutSuffix(fqdn, ".svc."+ClusterDomain+".")
	if !ok {
		return nil, false, nil
	}
	labels := strings.Split(rest, ".")
	var host, service, namespace string
	switch len(labels) {
	case 2:
		service, namespace = labels[0], labels[1]
	case 3:
		host, service, namespace = labels[0], labels[1], labels[2]
	default:
		return nil, false, nil
	}
	svc, err := r.client.CoreV1().Services(namespace).Get(ctx, service, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if host == "" && svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != corev1.ClusterIPNone {
		return []net.IP{net.ParseIP(svc.Spec.ClusterIP)}, true, nil
	}
	slices, err := r.client.DiscoveryV1().EndpointSlices(namespace).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + service})
	if err != nil {
		return nil, false, err
	}
	var ips []net.IP
	for _, s := range slices.Items {
		if s.AddressType != discoveryv1.AddressTypeIPv4 {
			continue
		}
		for _, ep := range s.Endpoints {
			ready := ep.Conditions.Ready == nil || *ep.Conditions.Ready
			if !ready && !svc.Spec.PublishNotReadyAddresses {
				continue
			}
			if host != "" && (ep.Hostname == nil || *ep.Hostname != host) {
				continue
			}
			for _, a := range ep.Addresses {
				if ip := net.ParseIP(a).To4(); ip != nil {
					ips = append(ips, ip)
				}
			}
		}
	}
	if host != "" && len(ips) == 0 {
		return nil, false, nil
	}
	return ips, true, nil
}
