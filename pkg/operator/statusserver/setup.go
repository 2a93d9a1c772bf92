package statusserver

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator/config"
)

// Names of the server's health and readiness checks.
const (
	HealthzCheck = "status-server-healthz"
	ReadyzCheck  = "status-server-readyz"
)

// Setup adds the status server to mgr, on the webhook's host and
// certificate folder, with its own rate-limited client and its checks.
func Setup(mgr manager.Manager, cfg *config.Configuration) error {
	restConfig := rest.CopyConfig(mgr.GetConfig())
	restConfig.QPS = ptr.Deref(cfg.StatusServer.QPS, config.DefaultStatusServerQPS)
	restConfig.Burst = int(ptr.Deref(cfg.StatusServer.Burst, config.DefaultStatusServerBurst))
	c, err := client.New(restConfig, client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return fmt.Errorf("status server client: %w", err)
	}
	s := New(Options{
		Host:    cfg.Webhook.Host,
		Port:    ptr.Deref(cfg.StatusServer.Port, config.DefaultStatusServerPort),
		CertDir: cfg.Webhook.CertDir,
		Client:  c,
	})
	if err := mgr.Add(s); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck(HealthzCheck, s.Checker()); err != nil {
		return err
	}
	return mgr.AddReadyzCheck(ReadyzCheck, s.Checker())
}
