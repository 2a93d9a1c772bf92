package admission

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
)

// ancestorContainers maps each ancestor step to the container its
// replicated job must have.
var ancestorContainers = map[string]string{
	trainer.AncestorTrainer:            trainer.Node,
	trainer.AncestorDatasetInitializer: trainer.DatasetInitializerName,
	trainer.AncestorModelInitializer:   trainer.ModelInitializerName,
}

// ValidateRuntimeSpec checks every replicated job that runs a TrainJob step
// (it has an ancestor label): it must have one replica and the container
// its step runs in; and the name of every replicated job, which must leave
// room for a TrainJob's.
func ValidateRuntimeSpec(spec *trainer.TrainingRuntimeSpec) field.ErrorList {
	var errs field.ErrorList
	jobsPath := field.NewPath("spec", "template", "spec", "replicatedJobs")
	names := make([]string, 0, len(spec.Template.Spec.ReplicatedJobs))
	for i, rj := range spec.Template.Spec.ReplicatedJobs {
		names = append(names, rj.Name)
		ancestor := rj.Template.Labels[trainer.AncestorLabel]
		container, ok := ancestorContainers[ancestor]
		if !ok {
			continue
		}
		path := jobsPath.Index(i)
		if rj.Replicas != 1 {
			errs = append(errs, field.Invalid(path.Child("replicas"), rj.Replicas, "always must be 1"))
		}
		if !hasContainer(rj, container) {
			errs = append(errs, field.Invalid(path.Child("template", "spec", "template", "spec", "containers"), containerNames(rj),
				fmt.Sprintf("must contain the required container for the ancestor: %s", ancestor)))
		}
	}
	return append(errs, ValidateReplicatedJobNames(names, jobsPath)...)
}

func hasContainer(rj jobsetv1alpha2.ReplicatedJob, name string) bool {
	for _, c := range rj.Template.Spec.Template.Spec.Containers {
		if c.Name == name {
			return true
		}
	}
	return false
}

func containerNames(rj jobsetv1alpha2.ReplicatedJob) []string {
	var names []string
	for _, c := range rj.Template.Spec.Template.Spec.Containers {
		names = append(names, c.Name)
	}
	return names
}
