package statusserver

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/config"
)

// Names of the server's health and readiness checks.
const (
	HealthzCheck = "status-server-healthz"
	ReadyzCheck  = "status-server-readyz"
)

// readsPerReview are the requests one token review makes: the review, and
// the pod, Job and JobSet its controller chain goes through. The review
// budget counts in requests: reading the pod again for a token reviewed
// before is one.
const readsPerReview = 4

// Setup adds the status server to mgr, on the webhook's host and
// certificate folder, with its checks. Status writes and token reviews
// each have a client and a rate limit of their own (statusServer.qps and
// burst), so that bad tokens, however many, never delay a report; and each
// namespace may spend only half of the reviews' (reviewBudgets), so that the
// tokens of one cannot starve the reports of another.
func Setup(mgr manager.Manager, cfg *config.Configuration) error {
	qps := ptr.Deref(cfg.StatusServer.QPS, config.DefaultStatusServerQPS)
	burst := int(ptr.Deref(cfg.StatusServer.Burst, config.DefaultStatusServerBurst))
	newClient := func(what string, qps float32, burst int) (client.Client, error) {
		restConfig := rest.CopyConfig(mgr.GetConfig())
		restConfig.QPS, restConfig.Burst = qps, burst
		c, err := client.New(restConfig, client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
		if err != nil {
			return nil, fmt.Errorf("status server %s client: %w", what, err)
		}
		return c, nil
	}
	writer, err := newClient("status", qps, burst)
	if err != nil {
		return err
	}
	reviewer, err := newClient("review", qps*readsPerReview, burst*readsPerReview)
	if err != nil {
		return err
	}
	s := New(Options{
		Host:         cfg.Webhook.Host,
		Port:         ptr.Deref(cfg.StatusServer.Port, config.DefaultStatusServerPort),
		CertDir:      cfg.Webhook.CertDir,
		Client:       writer,
		Reviewer:     reviewer,
		TrainJobs:    mgr.GetCache(),
		ReviewBudget: &ReviewBudget{QPS: float64(qps) * readsPerReview, Burst: burst * readsPerReview},
	})
	if err := mgr.Add(s); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck(HealthzCheck, s.Checker()); err != nil {
		return err
	}
	return mgr.AddReadyzCheck(ReadyzCheck, s.Checker())
}
