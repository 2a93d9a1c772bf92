package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/utils/ptr"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
)

func TestDefault(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "ops")
	t.Setenv("TMPDIR", "/scratch")
	cfg := &Configuration{}
	cfg.Default()
	want := &Configuration{
		APIVersion: APIVersion,
		Kind:       Kind,
		Namespace:  "ops",
		LeaderElection: LeaderElection{
			LeaderElect:       ptr.To(true),
			LeaseDuration:     metav1.Duration{Duration: 15 * time.Second},
			RenewDeadline:     metav1.Duration{Duration: 10 * time.Second},
			RetryPeriod:       metav1.Duration{Duration: 2 * time.Second},
			ResourceLock:      "leases",
			ResourceName:      "trainer.kubeflow.org",
			ResourceNamespace: "ops",
		},
		Metrics: Metrics{BindAddress: ":8443", SecureServing: ptr.To(true)},
		Health:  Health{HealthProbeBindAddress: ":8081", ReadinessEndpointName: "readyz", LivenessEndpointName: "healthz"},
		Webhook: Webhook{Enable: ptr.To(true), Port: ptr.To[int32](9443), CertDir: "/scratch/k8s-webhook-server/serving-certs"},
		CertManagement: CertManagement{
			Enable:             ptr.To(true),
			WebhookServiceName: "kubectl-trainjob-webhook-service",
			WebhookSecretName:  "kubectl-trainjob-webhook-cert",
		},
		ClientConnection: ClientConnection{QPS: ptr.To[float32](500), Burst: ptr.To[int32](1000)},
		StatusServer:     StatusServer{Port: ptr.To[int32](10443), QPS: ptr.To[float32](5), Burst: ptr.To[int32](10)},
		Controller: Controller{GroupKindConcurrency: map[string]int{
			"TrainJob.trainer.kubeflow.org":               64,
			"TrainingRuntime.trainer.kubeflow.org":        1,
			"ClusterTrainingRuntime.trainer.kubeflow.org": 1,
		}},
		FeatureGates: map[string]bool{"TrainJobStatus": false, "OptimizationJob": false},
	}
	if diff := cmp.Diff(want, cfg); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("defaults do not validate: %v", err)
	}
}

func TestDecodeAndValidate(t *testing.T) {
	cases := []struct {
		name    string
		doc     string
		wantErr string
	}{
		{name: "empty document", doc: ""},
		{name: "upstream-shaped file", doc: `
apiVersion: config.trainer.kubeflow.org/v1alpha1
kind: Configuration
leaderElection: {leaderElect: true, resourceName: trainer.kubeflow.org}
webhook: {port: 9443}
controller:
  groupKindConcurrency: {TrainJob.trainer.kubeflow.org: 10}
featureGates: {TrainJobStatus: true}
statusServer: {port: 10443, qps: 5, burst: 10}
`},
		{name: "unknown field", doc: "webhook: {prot: 9443}", wantErr: `unknown field "prot"`},
		{name: "other kind", doc: "kind: Deployment", wantErr: `kind "Deployment" is not supported`},
		{name: "other apiVersion", doc: "apiVersion: v1", wantErr: `apiVersion "v1" is not supported`},
		{name: "unknown feature gate", doc: "featureGates: {Warp: true}", wantErr: `unknown feature gate "Warp"`},
		{name: "zero workers", doc: "controller: {groupKindConcurrency: {TrainJob.trainer.kubeflow.org: 0}}", wantErr: "must be at least 1"},
		{name: "unknown controller", doc: "controller: {groupKindConcurrency: {Pod: 3}}", wantErr: `unknown controller "Pod"`},
		{name: "lease shorter than renew", doc: "leaderElection: {leaseDuration: 5s, renewDeadline: 10s}", wantErr: "must be greater than renewDeadline"},
		{name: "lease lock", doc: "leaderElection: {resourceLock: configmaps}", wantErr: `resourceLock "configmaps" is not supported`},
		{name: "negative qps", doc: "clientConnection: {qps: -1}", wantErr: "qps must be positive"},
		{name: "status server port out of range", doc: "statusServer: {port: 70000}", wantErr: "statusServer.port 70000 is not a port"},
		{name: "status server port zero", doc: "statusServer: {port: 0}", wantErr: "statusServer.port 0 is not a port"},
		{name: "status server on the webhook port", doc: "featureGates: {TrainJobStatus: true}\nstatusServer: {port: 9443}", wantErr: "statusServer.port must differ from webhook.port"},
		{name: "status server port ignored while gated off", doc: "statusServer: {port: 9443}"},
		{name: "status server zero burst", doc: "statusServer: {burst: 0}", wantErr: "statusServer.burst must be positive"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Decode([]byte(tc.doc))
			if err == nil {
				cfg.Default()
				err = cfg.Validate()
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestParseFeatureGates(t *testing.T) {
	got, err := ParseFeatureGates("TrainJobStatus=true, Other=False")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]bool{"TrainJobStatus": true, "Other": false}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, bad := range []string{"TrainJobStatus", "TrainJobStatus=yes"} {
		if _, err := ParseFeatureGates(bad); err == nil {
			t.Errorf("ParseFeatureGates(%q) accepted", bad)
		}
	}
}

// TestShippedConfiguration checks the file the Deployment mounts.
func TestShippedConfiguration(t *testing.T) {
	cfg := shippedConfiguration(t)
	if cfg.Webhook.CertDir != "/tmp/k8s-webhook-server/serving-certs" || !*cfg.CertManagement.Enable {
		t.Errorf("the Deployment's emptyDir at /tmp must hold the certificates the operator writes; got certDir %q", cfg.Webhook.CertDir)
	}
}

// TestShippedLeaseTakeOver: when the leader dies without releasing the Lease
// (SIGKILL, a node lost), the other replica takes it within the lease
// duration plus a few seconds (issue 36 item 11). client-go's standby polls
// the Lease every retryPeriod to retryPeriod × (1 + JitterFactor): it counts
// the lease duration from the poll that first sees the last renewal, and
// takes the Lease at the first poll after that, so each poll may add its
// longest period to the lease duration.
func TestShippedLeaseTakeOver(t *testing.T) {
	le := shippedConfiguration(t).LeaderElection
	late := time.Duration(2 * (1 + leaderelection.JitterFactor) * float64(le.RetryPeriod.Duration))
	if late > maxTakeOverAfterLease {
		t.Errorf("a standby takes the Lease up to %v after the lease duration (two polls of retryPeriod %v, jitter factor %v), want at most %v",
			late, le.RetryPeriod.Duration, leaderelection.JitterFactor, maxTakeOverAfterLease)
	}
}

// maxTakeOverAfterLease is the "few seconds" after the lease duration within
// which a standby must lead.
const maxTakeOverAfterLease = 5 * time.Second

// shippedConfiguration is config/manager/config.yaml, defaulted and valid.
func shippedConfiguration(t *testing.T) *Configuration {
	t.Helper()
	// go test runs in the package's folder.
	path := filepath.Join("..", "..", "config", "manager", "config.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Decode(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	cfg.Default()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return cfg
}

func TestOperatorInfo(t *testing.T) {
	cfg := &Configuration{Namespace: "ops"}
	cfg.Default()
	want := pipeline.OperatorInfo{
		Namespace:          "ops",
		WebhookServiceName: "kubectl-trainjob-webhook-service",
		WebhookSecretName:  "kubectl-trainjob-webhook-cert",
		StatusServerPort:   10443,
	}
	if diff := cmp.Diff(want, cfg.OperatorInfo()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
