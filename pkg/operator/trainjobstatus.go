package operator

import (
	"slices"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator/config"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator/statusserver"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/plugins/jobset"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/plugins/trainjobstatus"
)

// The TrainJobStatus feature (KEP-2779): with the gate on, the pipeline
// gets the TrainJobStatus plugin and every replica runs the status server.

// operatorInfo is what the plugins learn of the operator.
func operatorInfo(cfg *config.Configuration) pipeline.OperatorInfo {
	return pipeline.OperatorInfo{
		Namespace:          cfg.Namespace,
		WebhookServiceName: cfg.CertManagement.WebhookServiceName,
		WebhookSecretName:  cfg.CertManagement.WebhookSecretName,
		StatusServerPort:   ptr.Deref(cfg.StatusServer.Port, config.DefaultStatusServerPort),
	}
}

// withFeatures returns the registry with the plugins of the feature gates
// that are on. The TrainJobStatus plugin goes before JobSet, so that the CA
// ConfigMap the trainer pods mount is applied before the JobSet that makes
// them.
func withFeatures(cfg *config.Configuration, r pipeline.Registry) pipeline.Registry {
	if !cfg.Enabled(config.FeatureTrainJobStatus) {
		return r
	}
	entry := pipeline.RegistryEntry{Name: trainjobstatus.Name, Factory: trainjobstatus.New}
	at := slices.IndexFunc(r, func(e pipeline.RegistryEntry) bool { return e.Name == jobset.Name })
	if at < 0 {
		at = len(r)
	}
	return slices.Insert(slices.Clone(r), at, entry)
}

// setupFeatures adds the runnables of the feature gates that are on.
func setupFeatures(mgr manager.Manager, cfg *config.Configuration) error {
	if !cfg.Enabled(config.FeatureTrainJobStatus) {
		return nil
	}
	return statusserver.Setup(mgr, cfg)
}
