package plugins_test

import (
	"context"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/feature"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/plugins"
)

// TestTrainJobStatusGate: the TrainJobStatus plugin runs only with its
// gate on, and then builds its CA ConfigMap before JobSet builds the pods
// that mount it.
func TestTrainJobStatusGate(t *testing.T) {
	op := pipeline.OperatorInfo{Namespace: "ops", WebhookServiceName: "svc", WebhookSecretName: "cert", StatusServerPort: 10443}
	cases := []struct {
		name        string
		features    feature.Features
		wantPodSpec []string
		wantBuilder bool
	}{
		{name: "gate off (default)"},
		{name: "gate on", features: feature.Features{EnableTrainJobStatus: true}, wantPodSpec: []string{"TrainJobStatus"}, wantBuilder: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fw, err := plugins.NewFramework(context.Background(), plugins.Config{Features: tc.features}, pipeline.OfflineHandle(op))
			if err != nil {
				t.Fatal(err)
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

// TestOutOfTreePluginsRunLast: a platform team's plugin runs after the
// in-tree ones at the points it implements, and the configuration can
// move it.
func TestOutOfTreePluginsRunLast(t *testing.T) {
	outOfTree := pipeline.Registry{{Name: "Team", Factory: func(context.Context, pipeline.Handle) (pipeline.Plugin, error) { return podSpecOnly{}, nil }}}
	fw, err := plugins.NewFramework(context.Background(), plugins.Config{OutOfTree: outOfTree}, pipeline.OfflineHandle(pipeline.OperatorInfo{}))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"Team"}, fw.Plugins(pipeline.EnforcePodSpec)); diff != "" {
		t.Errorf("EnforcePodSpec (-want +got):\n%s", diff)
	}
	off := plugins.Config{OutOfTree: outOfTree, Plugins: pipeline.Plugins{EnforcePodSpec: pipeline.PluginSet{Disabled: []pipeline.PluginRef{{Name: "Team"}}}}}
	if fw, err = plugins.NewFramework(context.Background(), off, pipeline.OfflineHandle(pipeline.OperatorInfo{})); err != nil {
		t.Fatal(err)
	}
	if got := fw.Plugins(pipeline.EnforcePodSpec); got != nil {
		t.Errorf("EnforcePodSpec = %v, want none: the configuration disabled Team", got)
	}
	clash := pipeline.Registry{{Name: "JobSet", Factory: outOfTree[0].Factory}}
	if _, err := plugins.NewFramework(context.Background(), plugins.Config{OutOfTree: clash}, pipeline.OfflineHandle(pipeline.OperatorInfo{})); err == nil {
		t.Error("an out-of-tree plugin named as an in-tree one was accepted")
	}
}

// podSpecOnly is an EnforcePodSpec plugin that changes nothing.
type podSpecOnly struct{}

func (podSpecOnly) Name() string { return "Team" }
func (podSpecOnly) EnforcePodSpec(*pipeline.RuntimeInfo, *trainer.TrainJob) error {
	return nil
}
