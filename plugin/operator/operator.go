// Package operator is `kubectl-trainjob operator`: the cobra command that reads the operator's configuration
// and flags and starts the manager of pkg/operator. It lives with the other commands so that nothing under
// pkg/ imports the CLI toolkit.
package operator

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/olekukonko/tablewriter/pkg/twwidth"
	"github.com/spf13/cobra"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/config"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
)

// CommandOptions are the flags of `kubectl-trainjob operator`. A flag given
// on the command line overrides the configuration file.
type CommandOptions struct {
	Config         config.Flags
	LeaderElect    bool
	Webhooks       bool
	MetricsAddress string
	ProbeAddress   string
	PprofAddress   string
	WebhookPort    int32
	WebhookCertDir string
	Namespace      string
	WatchNamespace string
	QPS            float32
	Burst          int32

	zap       zap.Options
	outOfTree pipeline.Registry
	streams   cmdutil.Streams
	// factory gives the cluster connection; Complete keeps it.
	factory cmdutil.Factory
	// cfg is the configuration file with the flags given laid over it (Complete).
	cfg *config.Configuration
}

var _ cmdutil.Command = (*CommandOptions)(nil)

// NewCommand returns the `operator` command of the binary, running the
// Pipeline Framework with the in-tree plugins and outOfTree (app.WithPlugin). Its cluster connection comes from the
// root's kubectl flags (--kubeconfig, --context, …), else the pod's
// in-cluster configuration.
func NewCommand(outOfTree pipeline.Registry) func(cmdutil.Factory, cmdutil.Streams) *cobra.Command {
	return func(f cmdutil.Factory, streams cmdutil.Streams) *cobra.Command {
		cmd, _ := newCommand(outOfTree, f, streams)
		return cmd
	}
}

func newCommand(outOfTree pipeline.Registry, f cmdutil.Factory, streams cmdutil.Streams) (*cobra.Command, *CommandOptions) {
	o := &CommandOptions{outOfTree: outOfTree, streams: streams, zap: zap.Options{}}
	cmd := &cobra.Command{
		Use:   "operator",
		Short: "Run the operator: reconcile TrainJobs into JobSets, serve the admission webhooks",
		Long: strings.TrimSpace(`
Run the controller manager that reconciles TrainJobs (trainer.kubeflow.org/v1alpha1)
into JobSets through the Pipeline Framework, and serves the TrainJob and runtime
admission webhooks with certificates it generates and rotates itself.

Settings come from --config (a config.trainer.kubeflow.org/v1alpha1 Configuration,
YAML); a flag given on the command line overrides the file. The cluster is the one
of the kubectl flags (--kubeconfig, --context, ...), else the pod's in-cluster
configuration.`),
		Example: `  # In a pod (the Deployment of config/manager)
  kubectl-trainjob operator --config=/etc/kubectl-trainjob/config.yaml

  # Against the current kubeconfig context, without leader election or webhooks
  kubectl-trainjob operator --leader-elect=false --webhooks=false --metrics-bind-address=0`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.RunCommand(f, o, cmd, args)
		},
	}
	fs := cmd.Flags()
	o.Config.AddFlags(fs)
	fs.BoolVar(&o.LeaderElect, "leader-elect", true, "Elect a leader through a Lease so that only one replica reconciles")
	fs.BoolVar(&o.Webhooks, "webhooks", true, "Serve the admission webhooks (turn off only where another replica serves them)")
	fs.StringVar(&o.MetricsAddress, "metrics-bind-address", config.DefaultMetricsBindAddress, `Address of /metrics ("0" turns it off)`)
	fs.StringVar(&o.ProbeAddress, "health-probe-bind-address", config.DefaultHealthProbeBindAddress, `Address of /healthz and /readyz ("0" turns them off)`)
	fs.StringVar(&o.PprofAddress, "pprof-bind-address", "", `Address of /debug/pprof/ for profiling (default: off)`)
	fs.Int32Var(&o.WebhookPort, "webhook-port", config.DefaultWebhookPort, "Port of the webhook server")
	fs.StringVar(&o.WebhookCertDir, "webhook-cert-dir", "", "Folder of the webhook server's tls.crt and tls.key (default $TMPDIR/k8s-webhook-server/serving-certs)")
	fs.StringVar(&o.Namespace, "operator-namespace", "", "The operator's namespace, for its Lease and certificate Secret (default $POD_NAMESPACE, else the pod's, else "+config.DefaultNamespace+")")
	fs.StringVar(&o.WatchNamespace, "watch-namespace", "", "Reconcile TrainJobs of this namespace only (default: all)")
	fs.Float32Var(&o.QPS, "kube-api-qps", config.DefaultQPS, "Queries per second to the API server")
	fs.Int32Var(&o.Burst, "kube-api-burst", config.DefaultBurst, "Burst of queries to the API server")
	logFlags := flag.NewFlagSet("log", flag.ContinueOnError)
	o.zap.BindFlags(logFlags)
	fs.AddGoFlagSet(logFlags)
	return cmd, o
}

// Complete reads the configuration file, lays the flags given on the
// command line over it and defaults the rest. The cluster connection is
// resolved when the operator starts (Run), after the configuration is
// validated.
func (o *CommandOptions) Complete(f cmdutil.Factory, cmd *cobra.Command, _ []string) error {
	o.factory = f
	cfg, err := o.Config.Load()
	if err != nil {
		return err
	}
	overrides := map[string]func(){
		"operator-namespace":        func() { cfg.Namespace = o.Namespace },
		"leader-elect":              func() { cfg.LeaderElection.LeaderElect = ptr.To(o.LeaderElect) },
		"webhooks":                  func() { cfg.Webhook.Enable = ptr.To(o.Webhooks) },
		"metrics-bind-address":      func() { cfg.Metrics.BindAddress = o.MetricsAddress },
		"health-probe-bind-address": func() { cfg.Health.HealthProbeBindAddress = o.ProbeAddress },
		"webhook-port":              func() { cfg.Webhook.Port = ptr.To(o.WebhookPort) },
		"webhook-cert-dir":          func() { cfg.Webhook.CertDir = o.WebhookCertDir },
		"watch-namespace":           func() { cfg.Controller.WatchNamespace = o.WatchNamespace },
		"kube-api-qps":              func() { cfg.ClientConnection.QPS = ptr.To(o.QPS) },
		"kube-api-burst":            func() { cfg.ClientConnection.Burst = ptr.To(o.Burst) },
	}
	for name, override := range overrides {
		if cmd.Flags().Changed(name) {
			override()
		}
	}
	cfg.Default()
	o.cfg = cfg
	return nil
}

// Validate checks the configuration.
func (o *CommandOptions) Validate() error {
	if err := o.cfg.Validate(); err != nil {
		return fmt.Errorf("invalid configuration: %w", err)
	}
	return nil
}

// Run connects to the cluster, starts the operator and blocks until SIGINT
// or SIGTERM.
func (o *CommandOptions) Run(ctx context.Context) error {
	cfg := o.cfg
	restConfig, err := o.factory.ToRESTConfig()
	if err != nil {
		return err
	}
	logger := operator.NewLogger(&o.zap, o.streams.ErrOut)
	log.SetLogger(logger)
	klog.SetLogger(logger)
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx = log.IntoContext(ctx, logger)
	// The operator prints no tables: the text-width cache that tablewriter
	// (linked in for the CLI) makes for 8192 strings at package init goes.
	twwidth.SetCacheCapacity(0)
	op, err := operator.New(ctx, operator.Options{Config: cfg, RESTConfig: restConfig, OutOfTree: o.outOfTree, PprofBindAddress: o.PprofAddress})
	if err != nil {
		return err
	}
	logger.Info("Starting the operator", "namespace", cfg.Namespace, "leaderElection", ptr.Deref(cfg.LeaderElection.LeaderElect, true),
		"webhooks", ptr.Deref(cfg.Webhook.Enable, true), "watchNamespace", cfg.Controller.WatchNamespace)
	return op.Start(ctx)
}
