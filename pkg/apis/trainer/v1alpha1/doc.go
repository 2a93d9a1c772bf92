// Package v1alpha1 holds the trainer.kubeflow.org/v1alpha1 API: TrainJob,
// TrainingRuntime and ClusterTrainingRuntime, wire-compatible with Kubeflow
// Trainer v2.3, and OptimizationJob (KEP-2605) as upstream's main branch has it. JSON names, defaults, enums and CEL rules are part of that
// contract: never rename or drop a field here, only add.
//
// +kubebuilder:object:generate=true
// +groupName=trainer.kubeflow.org
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the group and version of this API.
var GroupVersion = schema.GroupVersion{Group: "trainer.kubeflow.org", Version: "v1alpha1"}

// AddToScheme adds the kinds of this API to a scheme.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&TrainJob{}, &TrainJobList{},
		&TrainingRuntime{}, &TrainingRuntimeList{},
		&ClusterTrainingRuntime{}, &ClusterTrainingRuntimeList{},
		&OptimizationJob{}, &OptimizationJobList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
