package operator

import (
	"context"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator/config"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/plugins"
)

// TestTrainJobStatusGate: the TrainJobStatus plugin runs only with its
// gate on, and then builds its CA ConfigMap before JobSet builds the pods
// that mount it.
func TestTrainJobStatusGate(t *testing.T) {
	cases := []struct {
		name        string
		gates       map[string]bool
		wantPodSpec []string
		wantBuilder bool
	}{
		{name: "gate off (default)"},
		{
			name:        "gate on",
			gates:       map[string]bool{config.FeatureTrainJobStatus: true},
			wantPodSpec: []string{"TrainJobStatus"},
			wantBuilder: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &config.Configuration{Namespace: "ops", FeatureGates: tc.gates}
			cfg.Default()
			registry := plugins.NewRegistry()
			before := len(registry)
			fw, err := pipeline.New(context.Background(), withFeatures(cfg, registry), pipeline.Handle{Operator: operatorInfo(cfg)})
			if err != nil {
				t.Fatal(err)
			}
			if len(registry) != before {
				t.Errorf("withFeatures changed the registry it was given")
			}
			if diff := cmp.Diff(tc.wantPodSpec, fw.Plugins(pipeline.EnforcePodSpec)); diff != "" {
				t.Errorf("EnforcePodSpec plugins (-want +got):\n%s", diff)
			}
			builders := fw.Plugins(pipeline.ComponentBuilder)
			status, jobSet := slices.Index(builders, "TrainJobStatus"), slices.Index(builders, "JobSet")
			if got := status >= 0; got != tc.wantBuilder || status > jobSet {
				t.Errorf("ComponentBuilder plugins %v: want TrainJobStatus %v, before JobSet", builders, tc.wantBuilder)
			}
		})
	}
}

func TestOperatorInfo(t *testing.T) {
	cfg := &config.Configuration{Namespace: "ops"}
	cfg.Default()
	want := pipeline.OperatorInfo{
		Namespace:          "ops",
		WebhookServiceName: "kubectl-trainjob-webhook-service",
		WebhookSecretName:  "kubectl-trainjob-webhook-cert",
		StatusServerPort:   10443,
	}
	if diff := cmp.Diff(want, operatorInfo(cfg)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
