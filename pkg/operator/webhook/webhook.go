// Package webhook holds the operator's admission webhooks (spec §4): the
// TrainJob defaulter, which stamps runtimePatches with their time, and the
// TrainJob, TrainingRuntime, ClusterTrainingRuntime and OptimizationJob
// validators. Everything
// else is checked by the CRD schema; that split is what makes a schema
// failure a 422 Invalid and a webhook denial a 403 Forbidden.
package webhook

import (
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
)

// Names of the webhook configurations and of their webhooks, and the paths
// controller-runtime serves them at (derived from the group, version, kind).
const (
	ValidatingConfigurationName = "validator.trainer.kubeflow.org"
	MutatingConfigurationName   = "defaulter.trainer.kubeflow.org"

	TrainJobDefaulterName               = "defaulter.trainjob.trainer.kubeflow.org"
	TrainJobValidatorName               = "validator.trainjob.trainer.kubeflow.org"
	TrainingRuntimeValidatorName        = "validator.trainingruntime.trainer.kubeflow.org"
	ClusterTrainingRuntimeValidatorName = "validator.clustertrainingruntime.trainer.kubeflow.org"
	OptimizationJobValidatorName        = "validator.optimizationjob.trainer.kubeflow.org"

	TrainJobDefaulterPath               = "/mutate-trainer-kubeflow-org-v1alpha1-trainjob"
	TrainJobValidatorPath               = "/validate-trainer-kubeflow-org-v1alpha1-trainjob"
	TrainingRuntimeValidatorPath        = "/validate-trainer-kubeflow-org-v1alpha1-trainingruntime"
	ClusterTrainingRuntimeValidatorPath = "/validate-trainer-kubeflow-org-v1alpha1-clustertrainingruntime"
	OptimizationJobValidatorPath        = "/validate-trainer-kubeflow-org-v1alpha1-optimizationjob"
)

// Setup registers every webhook on mgr's webhook server.
func Setup(mgr manager.Manager, fw *pipeline.Framework) error {
	mgr.GetWebhookServer().Register(TrainJobDefaulterPath, trainJobDefaulterWebhook(&TrainJobDefaulter{}))
	err := builder.WebhookManagedBy(mgr, &trainer.TrainJob{}).
		WithValidator(&TrainJobValidator{client: mgr.GetClient(), live: mgr.GetAPIReader(), framework: fw,
			decoder: serializer.NewCodecFactory(mgr.GetScheme()).UniversalDeserializer()}).
		Complete()
	if err != nil {
		return err
	}
	err = builder.WebhookManagedBy(mgr, &trainer.TrainingRuntime{}).
		WithValidator(&TrainingRuntimeValidator{}).
		Complete()
	if err != nil {
		return err
	}
	err = builder.WebhookManagedBy(mgr, &trainer.ClusterTrainingRuntime{}).
		WithValidator(&ClusterTrainingRuntimeValidator{}).
		Complete()
	if err != nil {
		return err
	}
	return builder.WebhookManagedBy(mgr, &trainer.OptimizationJob{}).
		WithValidator(&OptimizationJobValidator{client: mgr.GetClient(), live: mgr.GetAPIReader(), framework: fw}).
		Complete()
}
