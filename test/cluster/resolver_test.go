package cluster

import (
	"net"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/dns/dnsmessage"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

// The resolver's answers, from Services and EndpointSlices held by a fake client (pure logic: what a query
// returns for what the API server holds).
func TestResolverAnswers(t *testing.T) {
	client := fake.NewClientset(
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: "default"}, Spec: corev1.ServiceSpec{ClusterIP: "10.0.0.1"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ns"}, Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, PublishNotReadyAddresses: true}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "strict", Namespace: "ns"}, Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone}},
		&discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: "train-x", Namespace: "ns", Labels: map[string]string{discoveryv1.LabelServiceName: "train"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints: []discoveryv1.Endpoint{
				{Addresses: []string{"10.250.0.5"}, Hostname: ptr.To("train-node-0-0"), Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)}},
				{Addresses: []string{"10.250.0.6"}, Hostname: ptr.To("train-node-0-1")},
			},
		},
		&discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: "strict-x", Namespace: "ns", Labels: map[string]string{discoveryv1.LabelServiceName: "strict"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints: []discoveryv1.Endpoint{
				{Addresses: []string{"10.250.0.7"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)}},
				{Addresses: []string{"10.250.0.8"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
			},
		},
	)
	r := &resolver{client: client}
	for _, tc := range []struct {
		name  string
		qtype dnsmessage.Type
		rcode dnsmessage.RCode
		ips   []string
	}{
		{"kubernetes.default.svc.cluster.local.", dnsmessage.TypeA, dnsmessage.RCodeSuccess, []string{"10.0.0.1"}},
		{"train.ns.svc.cluster.local.", dnsmessage.TypeA, dnsmessage.RCodeSuccess, []string{"10.250.0.5", "10.250.0.6"}},
		{"train-node-0-0.train.ns.svc.cluster.local.", dnsmessage.TypeA, dnsmessage.RCodeSuccess, []string{"10.250.0.5"}},
		{"TRAIN-NODE-0-1.train.ns.svc.cluster.local.", dnsmessage.TypeA, dnsmessage.RCodeSuccess, []string{"10.250.0.6"}},
		{"train-node-0-9.train.ns.svc.cluster.local.", dnsmessage.TypeA, dnsmessage.RCodeNameError, nil},
		{"strict.ns.svc.cluster.local.", dnsmessage.TypeA, dnsmessage.RCodeSuccess, []string{"10.250.0.8"}},
		{"train.ns.svc.cluster.local.", dnsmessage.TypeAAAA, dnsmessage.RCodeSuccess, nil},
		{"missing.ns.svc.cluster.local.", dnsmessage.TypeA, dnsmessage.RCodeNameError, nil},
		{"example.com.", dnsmessage.TypeA, dnsmessage.RCodeNameError, nil},
		{"train.ns.svc.cluster.local.ns.svc.cluster.local.", dnsmessage.TypeA, dnsmessage.RCodeNameError, nil},
	} {
		t.Run(tc.name+" "+tc.qtype.String(), func(t *testing.T) {
			b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 7, RecursionDesired: true})
			_ = b.StartQuestions()
			_ = b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(tc.name), Type: tc.qtype, Class: dnsmessage.ClassINET})
			query, err := b.Finish()
			if err != nil {
				t.Fatal(err)
			}
			reply, err := r.reply(t.Context(), query)
			if err != nil {
				t.Fatal(err)
			}
			var msg dnsmessage.Message
			if err := msg.Unpack(reply); err != nil {
				t.Fatal(err)
			}
			if msg.ID != 7 || !msg.Response || msg.RCode != tc.rcode {
				t.Errorf("header %+v, want ID 7, a response, rcode %v", msg.Header, tc.rcode)
			}
			var ips []string
			for _, a := range msg.Answers {
				ips = append(ips, net.IP(a.Body.(*dnsmessage.AResource).A[:]).String())
			}
			if diff := cmp.Diff(tc.ips, ips); diff != "" {
				t.Errorf("answers (-want +got):\n%s", diff)
			}
		})
	}
}
