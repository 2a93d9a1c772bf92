// Package config is the operator's configuration: the Configuration read
// from the --config file (YAML, config.trainer.kubeflow.org/v1alpha1, shaped
// like upstream Kubeflow Trainer's so its field names carry over), its
// defaults, and its validation. Command-line flags override the file; that
// merge happens in the command, not here.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/feature"
)

// The file's apiVersion and kind.
const (
	APIVersion = "config.trainer.kubeflow.org/v1alpha1"
	Kind       = "Configuration"
)

// Defaults.
const (
	DefaultNamespace              = "kubectl-trainjob-system"
	DefaultLeaderElectionID       = "trainer.kubeflow.org"
	DefaultLeaseDuration          = 15 * time.Second
	DefaultRenewDeadline          = 10 * time.Second
	DefaultRetryPeriod            = 2 * time.Second
	DefaultMetricsBindAddress     = ":8443"
	DefaultHealthProbeBindAddress = ":8081"
	DefaultReadinessEndpointName  = "readyz"
	DefaultLivenessEndpointName   = "healthz"
	DefaultWebhookPort            = 9443
	DefaultWebhookServiceName     = "kubectl-trainjob-webhook-service"
	DefaultWebhookSecretName      = "kubectl-trainjob-webhook-cert"
	// DefaultQPS is the JobSet controller's: a TrainJob costs the operator
	// three requests, and with upstream's 50 a burst of TrainJobs waits on
	// the operator's own rate limiter rather than on the API server. The
	// API server's priority and fairness protects it from more.
	DefaultQPS               = 500
	DefaultBurst             = 1000
	DefaultStatusServerPort  = 10443
	DefaultStatusServerQPS   = 5
	DefaultStatusServerBurst = 10
	// DefaultTrainJobConcurrency is the number of TrainJob workers.
	DefaultTrainJobConcurrency = 64

	// LeasesResourceLock is the only leader election lock the operator
	// supports: a coordination.k8s.io Lease.
	LeasesResourceLock = "leases"
)

// The GroupKinds of the operator's controllers, as keys of
// controller.groupKindConcurrency.
const (
	TrainJobGroupKind               = "TrainJob.trainer.kubeflow.org"
	TrainingRuntimeGroupKind        = "TrainingRuntime.trainer.kubeflow.org"
	ClusterTrainingRuntimeGroupKind = "ClusterTrainingRuntime.trainer.kubeflow.org"
)

// FeatureTrainJobStatus is upstream's alpha gate of KEP-2779: trainers
// report their progress to the operator's status server, which writes it
// into status.trainerStatus.
const FeatureTrainJobStatus = "TrainJobStatus"

// FeatureOptimizationJob gates the OptimizationJob controller (KEP-2605),
// off by default as upstream's alpha gates are. Upstream names no gate for
// it yet; this is the API's kind. Its admission webhook runs whatever the
// gate: the CRD is installed either way.
const FeatureOptimizationJob = "OptimizationJob"

// KnownFeatureGates are the feature gates and their defaults.
var KnownFeatureGates = map[string]bool{
	FeatureTrainJobStatus:  false,
	FeatureOptimizationJob: false,
}

// Configuration is the operator's configuration file.
type Configuration struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`

	// Namespace is the operator's own namespace: its leader election Lease
	// and its webhook certificate Secret live there. Default: $POD_NAMESPACE,
	// else the namespace of the pod's service account, else
	// kubectl-trainjob-system.
	Namespace string `json:"namespace,omitempty"`

	LeaderElection   LeaderElection   `json:"leaderElection,omitzero"`
	Metrics          Metrics          `json:"metrics,omitzero"`
	Health           Health           `json:"health,omitzero"`
	Webhook          Webhook          `json:"webhook,omitzero"`
	CertManagement   CertManagement   `json:"certManagement,omitzero"`
	ClientConnection ClientConnection `json:"clientConnection,omitzero"`
	Controller       Controller       `json:"controller,omitzero"`
	StatusServer     StatusServer     `json:"statusServer,omitzero"`

	// FeatureGates turns features on or off by name.
	FeatureGates map[string]bool `json:"featureGates,omitempty"`

	// Plugins enables, disables and orders the Pipeline Framework's
	// plugins per extension point, as a kube-scheduler profile does
	// (pipeline.PluginSet). By default every registered plugin runs at
	// every point it implements, in the registry's order.
	Plugins pipeline.Plugins `json:"plugins,omitzero"`
}

// LeaderElection configures the Lease that lets one replica reconcile.
type LeaderElection struct {
	// LeaderElect turns leader election on (default true).
	LeaderElect   *bool           `json:"leaderElect,omitempty"`
	LeaseDuration metav1.Duration `json:"leaseDuration,omitzero"`
	RenewDeadline metav1.Duration `json:"renewDeadline,omitzero"`
	RetryPeriod   metav1.Duration `json:"retryPeriod,omitzero"`
	// ResourceLock must be "leases".
	ResourceLock string `json:"resourceLock,omitempty"`
	// ResourceName is the Lease's name (default trainer.kubeflow.org).
	ResourceName string `json:"resourceName,omitempty"`
	// ResourceNamespace is the Lease's namespace (default: Namespace).
	ResourceNamespace string `json:"resourceNamespace,omitempty"`
}

// Metrics configures the Prometheus endpoint.
type Metrics struct {
	// BindAddress is where /metrics is served (default :8443); "0" turns it off.
	BindAddress string `json:"bindAddress,omitempty"`
	// SecureServing serves /metrics over HTTPS (default true).
	SecureServing *bool `json:"secureServing,omitempty"`
}

// Health configures the liveness and readiness probes.
type Health struct {
	// HealthProbeBindAddress is where the probes are served (default :8081); "0" turns them off.
	HealthProbeBindAddress string `json:"healthProbeBindAddress,omitempty"`
	ReadinessEndpointName  string `json:"readinessEndpointName,omitempty"`
	LivenessEndpointName   string `json:"livenessEndpointName,omitempty"`
}

// Webhook configures the admission webhook server.
type Webhook struct {
	// Enable serves the defaulting and validating webhooks (default true).
	// Turn it off only where another replica serves them.
	Enable *bool `json:"enable,omitempty"`
	// Host is the address the server listens on (default: all).
	Host string `json:"host,omitempty"`
	// Port is the server's port (default 9443).
	Port *int32 `json:"port,omitempty"`
	// CertDir holds tls.crt and tls.key (default
	// $TMPDIR/k8s-webhook-server/serving-certs). With certManagement on,
	// the operator writes them there; it must be writable.
	CertDir string `json:"certDir,omitempty"`
}

// CertManagement configures the in-process webhook certificates.
type CertManagement struct {
	// Enable generates and rotates the webhook certificates and injects
	// the CA into the webhook configurations (default true). Turn it off to
	// bring certificates another way (cert-manager), mounted at CertDir.
	Enable *bool `json:"enable,omitempty"`
	// WebhookServiceName is the Service in front of the webhook server; the
	// certificate is issued for <service>.<namespace>.svc.
	WebhookServiceName string `json:"webhookServiceName,omitempty"`
	// WebhookSecretName is the Secret, in Namespace, that holds the CA and
	// the serving certificate. It must exist (the manifests create it empty).
	WebhookSecretName string `json:"webhookSecretName,omitempty"`
	// ExtraDNSNames are more names the serving certificate is valid for,
	// for webhook configurations that reach the server by URL.
	ExtraDNSNames []string `json:"extraDNSNames,omitempty"`
}

// ClientConnection configures the client of the API server.
type ClientConnection struct {
	QPS   *float32 `json:"qps,omitempty"`
	Burst *int32   `json:"burst,omitempty"`
}

// Controller configures the controllers.
type Controller struct {
	// GroupKindConcurrency is the number of workers per controller, keyed by
	// Kind.group (default TrainJob 64, runtimes 1). Upstream ships 5 TrainJob
	// workers; a reconcile mostly waits on the API server (the JobSet's
	// admission webhooks), so more workers turn a burst of TrainJobs into
	// JobSets sooner, and an idle worker costs only its goroutine.
	GroupKindConcurrency map[string]int `json:"groupKindConcurrency,omitempty"`
	// WatchNamespace restricts the controllers to one namespace (default: all).
	WatchNamespace string `json:"watchNamespace,omitempty"`
	// Warmup makes a replica that does not lead fill its caches (and its
	// controllers' queues) all the same, so that it reconciles as soon as it
	// takes the Lease when the leader dies (default true). Off, a standby
	// holds no cache, and takes over only after listing everything.
	Warmup *bool `json:"warmup,omitempty"`
}

// StatusServer configures the server trainers report their progress to
// (feature gate TrainJobStatus). It serves HTTPS with the webhook
// certificate, on the webhook's host.
type StatusServer struct {
	// Port is the server's port (default 10443).
	Port *int32 `json:"port,omitempty"`
	// QPS and Burst limit the server's own requests to the API server
	// (default 5 and 10), so that trainers cannot starve the controllers:
	// the status writes, and apart from them the token reviews, so that
	// bad tokens cannot starve the reports.
	QPS   *float32 `json:"qps,omitempty"`
	Burst *int32   `json:"burst,omitempty"`
}

// Decode parses a configuration document strictly: an unknown field is an
// error, so that a typo is not silently ignored.
func Decode(data []byte) (*Configuration, error) {
	cfg := &Configuration{}
	if len(bytes.TrimSpace(data)) == 0 {
		return cfg, nil
	}
	if err := yaml.UnmarshalStrict(data, cfg); err != nil {
		return nil, err
	}
	if cfg.APIVersion != "" && cfg.APIVersion != APIVersion {
		return nil, fmt.Errorf("apiVersion %q is not supported (want %s)", cfg.APIVersion, APIVersion)
	}
	if cfg.Kind != "" && cfg.Kind != Kind {
		return nil, fmt.Errorf("kind %q is not supported (want %s)", cfg.Kind, Kind)
	}
	return cfg, nil
}

// Default fills every unset field with its default.
func (c *Configuration) Default() {
	c.APIVersion, c.Kind = APIVersion, Kind
	if c.Namespace == "" {
		c.Namespace = operatorNamespace()
	}
	le := &c.LeaderElection
	if le.LeaderElect == nil {
		le.LeaderElect = ptr.To(true)
	}
	defaultDuration(&le.LeaseDuration, DefaultLeaseDuration)
	defaultDuration(&le.RenewDeadline, DefaultRenewDeadline)
	defaultDuration(&le.RetryPeriod, DefaultRetryPeriod)
	defaultString(&le.ResourceLock, LeasesResourceLock)
	defaultString(&le.ResourceName, DefaultLeaderElectionID)
	defaultString(&le.ResourceNamespace, c.Namespace)

	defaultString(&c.Metrics.BindAddress, DefaultMetricsBindAddress)
	if c.Metrics.SecureServing == nil {
		c.Metrics.SecureServing = ptr.To(true)
	}
	defaultString(&c.Health.HealthProbeBindAddress, DefaultHealthProbeBindAddress)
	defaultString(&c.Health.ReadinessEndpointName, DefaultReadinessEndpointName)
	defaultString(&c.Health.LivenessEndpointName, DefaultLivenessEndpointName)

	if c.Webhook.Enable == nil {
		c.Webhook.Enable = ptr.To(true)
	}
	if c.Webhook.Port == nil {
		c.Webhook.Port = ptr.To[int32](DefaultWebhookPort)
	}
	defaultString(&c.Webhook.CertDir, defaultCertDir())
	if c.CertManagement.Enable == nil {
		c.CertManagement.Enable = ptr.To(true)
	}
	defaultString(&c.CertManagement.WebhookServiceName, DefaultWebhookServiceName)
	defaultString(&c.CertManagement.WebhookSecretName, DefaultWebhookSecretName)

	if c.ClientConnection.QPS == nil {
		c.ClientConnection.QPS = ptr.To[float32](DefaultQPS)
	}
	if c.ClientConnection.Burst == nil {
		c.ClientConnection.Burst = ptr.To[int32](DefaultBurst)
	}
	if c.StatusServer.Port == nil {
		c.StatusServer.Port = ptr.To[int32](DefaultStatusServerPort)
	}
	if c.StatusServer.QPS == nil {
		c.StatusServer.QPS = ptr.To[float32](DefaultStatusServerQPS)
	}
	if c.StatusServer.Burst == nil {
		c.StatusServer.Burst = ptr.To[int32](DefaultStatusServerBurst)
	}
	if c.Controller.GroupKindConcurrency == nil {
		c.Controller.GroupKindConcurrency = map[string]int{}
	}
	for gk, n := range map[string]int{TrainJobGroupKind: DefaultTrainJobConcurrency, TrainingRuntimeGroupKind: 1, ClusterTrainingRuntimeGroupKind: 1} {
		if _, ok := c.Controller.GroupKindConcurrency[gk]; !ok {
			c.Controller.GroupKindConcurrency[gk] = n
		}
	}
	gates := make(map[string]bool, len(KnownFeatureGates))
	for name, on := range KnownFeatureGates {
		gates[name] = on
	}
	for name, on := range c.FeatureGates {
		gates[name] = on
	}
	c.FeatureGates = gates
}

// Validate checks a defaulted configuration.
func (c *Configuration) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.Namespace == "" {
		bad("namespace must not be empty")
	}
	le := c.LeaderElection
	if le.ResourceLock != LeasesResourceLock {
		bad("leaderElection.resourceLock %q is not supported (want %q)", le.ResourceLock, LeasesResourceLock)
	}
	if ptr.Deref(le.LeaderElect, false) {
		if le.LeaseDuration.Duration <= le.RenewDeadline.Duration {
			bad("leaderElection.leaseDuration (%v) must be greater than renewDeadline (%v)", le.LeaseDuration.Duration, le.RenewDeadline.Duration)
		}
		if le.RenewDeadline.Duration <= le.RetryPeriod.Duration || le.RetryPeriod.Duration <= 0 {
			bad("leaderElection.renewDeadline (%v) must be greater than retryPeriod (%v), which must be positive", le.RenewDeadline.Duration, le.RetryPeriod.Duration)
		}
	}
	if p := ptr.Deref(c.Webhook.Port, 0); p < 0 || p > 65535 {
		bad("webhook.port %d is not a port", p)
	}
	if p := ptr.Deref(c.StatusServer.Port, 0); p < 1 || p > 65535 {
		bad("statusServer.port %d is not a port (1-65535)", p)
	}
	if c.Enabled(FeatureTrainJobStatus) && ptr.Deref(c.Webhook.Port, 0) == ptr.Deref(c.StatusServer.Port, 0) {
		bad("statusServer.port must differ from webhook.port (both %d)", ptr.Deref(c.Webhook.Port, 0))
	}
	if q := ptr.Deref(c.StatusServer.QPS, 0); q <= 0 {
		bad("statusServer.qps must be positive, not %v", q)
	}
	if b := ptr.Deref(c.StatusServer.Burst, 0); b <= 0 {
		bad("statusServer.burst must be positive, not %d", b)
	}
	if ptr.Deref(c.CertManagement.Enable, false) && ptr.Deref(c.Webhook.Enable, false) {
		if c.CertManagement.WebhookServiceName == "" || c.CertManagement.WebhookSecretName == "" {
			bad("certManagement.webhookServiceName and webhookSecretName must be set")
		}
	}
	if q := ptr.Deref(c.ClientConnection.QPS, 0); q <= 0 {
		bad("clientConnection.qps must be positive, not %v", q)
	}
	if b := ptr.Deref(c.ClientConnection.Burst, 0); b <= 0 {
		bad("clientConnection.burst must be positive, not %d", b)
	}
	known := []string{TrainJobGroupKind, TrainingRuntimeGroupKind, ClusterTrainingRuntimeGroupKind}
	for gk, n := range c.Controller.GroupKindConcurrency {
		if !slices.Contains(known, gk) {
			bad("controller.groupKindConcurrency: unknown controller %q (known: %s)", gk, strings.Join(known, ", "))
		}
		if n < 1 {
			bad("controller.groupKindConcurrency[%s] must be at least 1, not %d", gk, n)
		}
	}
	for name := range c.FeatureGates {
		if _, ok := KnownFeatureGates[name]; !ok {
			bad("featureGates: unknown feature gate %q", name)
		}
	}
	return errors.Join(errs...)
}

// Enabled tells whether a feature gate is on.
func (c *Configuration) Enabled(gate string) bool { return c.FeatureGates[gate] }

// Features are the gates the pipeline's registry reads.
func (c *Configuration) Features() feature.Features {
	return feature.Features{EnableTrainJobStatus: c.Enabled(FeatureTrainJobStatus)}
}

// OperatorInfo is what the plugins learn of the operator.
func (c *Configuration) OperatorInfo() pipeline.OperatorInfo {
	return pipeline.OperatorInfo{
		Namespace:          c.Namespace,
		WebhookServiceName: c.CertManagement.WebhookServiceName,
		WebhookSecretName:  c.CertManagement.WebhookSecretName,
		StatusServerPort:   ptr.Deref(c.StatusServer.Port, DefaultStatusServerPort),
	}
}

// Flags are the flags that give a command the operator's configuration:
// the operator's, and render's and describe-pipeline's, which build the
// operator's pipeline.
type Flags struct {
	File         string
	FeatureGates string
}

// AddFlags adds --config and --feature-gates to fs.
func (f *Flags) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.File, "config", "", "The operator's configuration file ("+APIVersion+" "+Kind+", YAML)")
	fs.StringVar(&f.FeatureGates, "feature-gates", "", "Feature gates, Name=true|false separated by commas; they override the file's featureGates")
}

// Load reads the file, if any, and lays the feature gates over it. The
// configuration is neither defaulted nor validated: a command lays its
// own flags over it first.
func (f *Flags) Load() (*Configuration, error) {
	cfg := &Configuration{}
	if f.File != "" {
		data, err := os.ReadFile(f.File)
		if err != nil {
			return nil, fmt.Errorf("read configuration: %w", err)
		}
		if cfg, err = Decode(data); err != nil {
			return nil, fmt.Errorf("configuration %s: %w", f.File, err)
		}
	}
	if f.FeatureGates != "" {
		gates, err := ParseFeatureGates(f.FeatureGates)
		if err != nil {
			return nil, fmt.Errorf("--feature-gates: %w", err)
		}
		if cfg.FeatureGates == nil {
			cfg.FeatureGates = map[string]bool{}
		}
		maps.Copy(cfg.FeatureGates, gates)
	}
	return cfg, nil
}

// ParseFeatureGates parses --feature-gates: "Name=true,Other=false".
func ParseFeatureGates(s string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, kv := range strings.Split(s, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		name, value, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("feature gate %q: want Name=true|false", kv)
		}
		switch strings.ToLower(strings.TrimSpace(value)) {
		case "true":
			out[strings.TrimSpace(name)] = true
		case "false":
			out[strings.TrimSpace(name)] = false
		default:
			return nil, fmt.Errorf("feature gate %q: value must be true or false", kv)
		}
	}
	return out, nil
}

// serviceAccountNamespaceFile holds the pod's namespace in a cluster.
const serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

func operatorNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	if data, err := os.ReadFile(serviceAccountNamespaceFile); err == nil {
		if ns := strings.TrimSpace(string(data)); ns != "" {
			return ns
		}
	}
	return DefaultNamespace
}

// defaultCertDir is controller-runtime's default webhook certificate folder.
func defaultCertDir() string {
	return filepath.Join(os.TempDir(), "k8s-webhook-server", "serving-certs")
}

func defaultString(s *string, v string) {
	if *s == "" {
		*s = v
	}
}

func defaultDuration(d *metav1.Duration, v time.Duration) {
	if d.Duration == 0 {
		d.Duration = v
	}
}
