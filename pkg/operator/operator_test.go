package operator

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/config"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
)

// TestWebhooksReady: the operator is not ready before its certificates
// are, nor before its webhooks are registered; with webhooks off, it is
// ready at once.
func TestWebhooksReady(t *testing.T) {
	cfg := &config.Configuration{}
	cfg.Default()
	o := &Operator{cfg: cfg, certsReady: make(chan struct{}), webhookErr: errors.New("webhooks are not registered yet")}
	req := httptest.NewRequest("GET", "/readyz", nil)
	if err := o.webhooksReady(req); err == nil || err.Error() != "webhook certificates are not ready" {
		t.Errorf("before the certificates: %v", err)
	}
	close(o.certsReady)
	if err := o.webhooksReady(req); err == nil || err.Error() != "webhooks are not registered yet" {
		t.Errorf("before the webhooks: %v", err)
	}
	cfg.Webhook.Enable = ptr.To(false)
	if err := o.webhooksReady(req); err != nil {
		t.Errorf("webhooks off: %v", err)
	}
}

// TestStandInForForeign: a ConfigMap or Secret with the operator's label
// that no TrainJob controls is cached as its name, UID and label alone,
// however large; the operator's own are cached whole.
func TestStandInForForeign(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	forged := metav1.ObjectMeta{Namespace: "team", Name: "forged", UID: "uid-1", ResourceVersion: "7",
		Labels:      map[string]string{pipeline.TrainJobNameLabel: "alpha", "more": big[:63]},
		Annotations: map[string]string{"big": big}}
	ours := *forged.DeepCopy()
	ours.OwnerReferences = []metav1.OwnerReference{{APIVersion: "trainer.kubeflow.org/v1alpha1", Kind: "TrainJob", Name: "alpha", UID: "uid-tj", Controller: ptr.To(true)}}
	wantMeta := metav1.ObjectMeta{Namespace: "team", Name: "forged", UID: "uid-1", ResourceVersion: "7",
		Labels: map[string]string{pipeline.TrainJobNameLabel: "alpha"}}
	for _, tc := range []struct {
		name   string
		in     client.Object
		want   client.Object
		isOurs bool
	}{
		{name: "a labelled ConfigMap", in: &corev1.ConfigMap{ObjectMeta: forged, Data: map[string]string{"big": big}}, want: &corev1.ConfigMap{ObjectMeta: wantMeta}},
		{name: "a labelled Secret", in: &corev1.Secret{ObjectMeta: forged, Data: map[string][]byte{"big": []byte(big)}}, want: &corev1.Secret{ObjectMeta: wantMeta}},
		{name: "a ConfigMap a TrainJob controls", in: &corev1.ConfigMap{ObjectMeta: ours, Data: map[string]string{"big": big}}, isOurs: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := standInForForeign(tc.in)
			if tc.isOurs {
				if got != nil {
					t.Errorf("stand-in %+v for an object a TrainJob controls, want none", got)
				}
				return
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("stand-in (-want +got):\n%s", diff)
			}
		})
	}
}
