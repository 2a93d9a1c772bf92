// Package operator_test runs the operator in-process against a real API
// server and checks the behaviours of spec §6.1 (TrainJob controller) and
// §6.2 (webhooks), plus what this operator adds: the ComponentsCreated
// condition, an event per condition transition, and its metrics. One API
// server and one operator serve every test of the package; each test works
// in its own namespace.
package operator_test

import (
	"context"
	"net"
	"os"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/config"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/integration/operator/internal/optest"
)

var (
	env *optest.Env
	op  *optest.Operator
	// opConfig is the operator's client configuration, with its requests
	// counted; restartOperator starts it again with it.
	opConfig *rest.Config
)

func TestMain(m *testing.M) {
	os.Exit(optest.Main(m, func(ctx context.Context, e *optest.Env) error {
		env = e
		cfg, err := optest.NewConfig(e.LogDir)
		if err != nil {
			return err
		}
		cfg.FeatureGates = map[string]bool{config.FeatureOptimizationJob: true}
		if err := optest.InstallWebhooks(ctx, e.Client, *cfg.Webhook.Port); err != nil {
			return err
		}
		// The operator's requests are counted (writes_test.go).
		opConfig = rest.CopyConfig(e.Cluster.Config)
		opConfig.Wrap(requests.wrap)
		if op, err = optest.StartOperator(ctx, opConfig, cfg); err != nil {
			return err
		}
		if err := optest.Poll(ctx, time.Minute, op.Ready); err != nil {
			return err
		}
		return optest.Poll(ctx, time.Minute, func(ctx context.Context) error { return optest.WebhooksServed(ctx, e.Client) })
	}))
}

// TestStartOperatorOnATakenPort: a port InProcess picked that another
// process takes before the operator binds it does not fail the test: the
// operator is started again on other ports.
func TestStartOperatorOnATakenPort(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	cfg := &config.Configuration{Namespace: optest.Namespace, Webhook: config.Webhook{Enable: ptr.To(false)},
		// A standby in the test process: warmed, its queue would count in optest.Settled's process-wide metrics.
		Controller: config.Controller{Warmup: ptr.To(false)}}
	if err := optest.InProcess(cfg, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	// The health port: the operator binds it as it is built, and fails at
	// once (a server bound as it starts makes it stop, after the manager's
	// graceful shutdown).
	cfg.Health.HealthProbeBindAddress = taken.Addr().String()
	standby, err := optest.StartOperator(t.Context(), env.Cluster.Config, cfg)
	if err != nil {
		t.Fatalf("start an operator whose health port is taken: %v", err)
	}
	t.Cleanup(func() { _ = standby.Stop() })
	if cfg.Health.HealthProbeBindAddress == taken.Addr().String() {
		t.Errorf("the operator kept the taken port %s", cfg.Health.HealthProbeBindAddress)
	}
	optest.Eventually(t, "the operator started again is ready", standby.Ready)
}
