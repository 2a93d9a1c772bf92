package operator

import (
	"errors"
	"net/http/httptest"
	"testing"

	"k8s.io/utils/ptr"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator/config"
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
