package operator

import (
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/config"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator/statusserver"
)

// The TrainJobStatus feature (KEP-2779): with the gate on, every replica
// runs the status server; the pipeline's registry holds the plugin that
// tells the trainers where it is (plugins.NewInTreeRegistry).

// setupFeatures adds the runnables of the feature gates that are on.
func setupFeatures(mgr manager.Manager, cfg *config.Configuration) error {
	if !cfg.Enabled(config.FeatureTrainJobStatus) {
		return nil
	}
	return statusserver.Setup(mgr, cfg)
}
