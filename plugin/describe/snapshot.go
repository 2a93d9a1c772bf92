package describe

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
)

// snapshotRuntime reads the runtime snapshot ConfigMap the controller keeps
// for a TrainJob (`<job>-runtime-snapshot`, key `runtime`), or nil when
// there is none or it is unreadable.
func snapshotRuntime(ctx context.Context, c client.Client, tj *trainer.TrainJob) (*pipeline.Runtime, error) {
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: tj.Namespace, Name: tj.Name + "-runtime-snapshot"}, cm); err != nil {
		return nil, err
	}
	data, ok := cm.Data["runtime"]
	if !ok {
		return nil, fmt.Errorf("runtime snapshot %s has no key runtime", cm.Name)
	}
	var obj client.Object = &trainer.ClusterTrainingRuntime{}
	if pipeline.RuntimeRefGroupKind(tj).Kind == trainer.TrainingRuntimeKind {
		obj = &trainer.TrainingRuntime{}
	}
	if err := yaml.Unmarshal([]byte(data), obj); err != nil {
		return nil, err
	}
	return pipeline.RuntimeOf(obj)
}
