// Package operator_test runs the operator in-process against a real API
// server and checks the behaviours of spec §6.1 (TrainJob controller) and
// §6.2 (webhooks), plus what this operator adds: the ComponentsCreated
// condition, an event per condition transition, and its metrics. One API
// server and one operator serve every test of the package; each test works
// in its own namespace.
package operator_test

import (
	"context"
	"os"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/kubectl-trainjob/kubectl-trainjob/test/integration/operator/internal/optest"
)

var (
	env *optest.Env
	op  *optest.Operator
)

func TestMain(m *testing.M) {
	os.Exit(optest.Main(m, func(ctx context.Context, e *optest.Env) error {
		env = e
		cfg, err := optest.NewConfig(e.LogDir)
		if err != nil {
			return err
		}
		if err := optest.InstallWebhooks(ctx, e.Client, *cfg.Webhook.Port); err != nil {
			return err
		}
		// The operator's requests are counted (writes_test.go).
		restConfig := rest.CopyConfig(e.Cluster.Config)
		restConfig.Wrap(requests.wrap)
		if op, err = optest.StartOperator(ctx, restConfig, cfg); err != nil {
			return err
		}
		if err := optest.Poll(ctx, time.Minute, op.Ready); err != nil {
			return err
		}
		return optest.Poll(ctx, time.Minute, func(ctx context.Context) error { return optest.WebhooksServed(ctx, e.Client) })
	}))
}
