package admission

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
)

func TestValidateRuntimeSpec(t *testing.T) {
	job := func(name, ancestor string, replicas int32, containers ...string) jobsetv1alpha2.ReplicatedJob {
		rj := jobsetv1alpha2.ReplicatedJob{Name: name, Replicas: replicas}
		if ancestor != "" {
			rj.Template.Labels = map[string]string{trainer.AncestorLabel: ancestor}
		}
		for _, c := range containers {
			rj.Template.Spec.Template.Spec.Containers = append(rj.Template.Spec.Template.Spec.Containers, corev1.Container{Name: c})
		}
		return rj
	}
	jobs := field.NewPath("spec", "template", "spec", "replicatedJobs")
	cases := []struct {
		name string
		jobs []jobsetv1alpha2.ReplicatedJob
		want field.ErrorList
	}{
		{name: "valid", jobs: []jobsetv1alpha2.ReplicatedJob{
			job("dataset-initializer", "dataset-initializer", 1, "dataset-initializer"),
			job("model-initializer", "model-initializer", 1, "model-initializer"),
			job("node", "trainer", 1, "node", "sidecar"),
			job("workers", "", 4, "anything"),
		}},
		{name: "ancestor jobs need one replica and their container", jobs: []jobsetv1alpha2.ReplicatedJob{
			job("launcher", "trainer", 2, "launcher"),
			job("data", "dataset-initializer", 1, "fetch"),
		}, want: field.ErrorList{
			field.Invalid(jobs.Index(0).Child("replicas"), int32(2), "always must be 1"),
			field.Invalid(jobs.Index(0).Child("template", "spec", "template", "spec", "containers"), []string{"launcher"}, "must contain the required container for the ancestor: trainer"),
			field.Invalid(jobs.Index(1).Child("template", "spec", "template", "spec", "containers"), []string{"fetch"}, "must contain the required container for the ancestor: dataset-initializer"),
		}},
		// Upstream v2.4 (kubeflow/trainer #4394) caps every replicated job's name at 20 characters.
		{name: "replicated job names of 20 characters at most", jobs: []jobsetv1alpha2.ReplicatedJob{
			job("dataset-initializer", "dataset-initializer", 1, "dataset-initializer"),
			job("workers-of-twenty-ch", "", 4, "worker"),
			job("workers-of-twenty-one", "", 4, "worker"),
			job("trainer-of-twenty-two", "trainer", 1, "node"),
		}, want: field.ErrorList{
			field.Invalid(jobs.Index(2).Child("name"), "workers-of-twenty-one", "must be no more than 20 characters, and is 21: "+
				"JobSet names the Jobs and pods of a TrainJob <trainjob>-<replicated job>-<index>-<index>-<5 random characters>, within 63 characters; shorten it by 1"),
			field.Invalid(jobs.Index(3).Child("name"), "trainer-of-twenty-two", "must be no more than 20 characters, and is 21: "+
				"JobSet names the Jobs and pods of a TrainJob <trainjob>-<replicated job>-<index>-<index>-<5 random characters>, within 63 characters; shorten it by 1"),
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := &trainer.TrainingRuntimeSpec{}
			spec.Template.Spec.ReplicatedJobs = tc.jobs
			if diff := cmp.Diff(tc.want, ValidateRuntimeSpec(spec)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
