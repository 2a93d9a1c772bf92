package webhook

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
)

func TestStampRuntimePatches(t *testing.T) {
	earlier := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	given := metav1.NewTime(time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC))
	now := metav1.NewTime(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	patch := func(manager string, tm *metav1.Time, sa string) trainer.RuntimePatch {
		p := trainer.RuntimePatch{Manager: manager, Time: tm}
		if sa != "" {
			p.TrainingRuntimeSpec = &trainer.TrainingRuntimeSpecPatch{Template: &trainer.JobSetTemplatePatch{
				Metadata: &metav1.ObjectMeta{Labels: map[string]string{"sa": sa}},
			}}
		}
		return p
	}
	cases := []struct {
		name       string
		old, given []trainer.RuntimePatch
		want       []trainer.RuntimePatch
	}{
		{
			name:  "create stamps patches without a time, keeps given ones",
			given: []trainer.RuntimePatch{patch("a.io/x", nil, "1"), patch("b.io/y", &given, "1")},
			want:  []trainer.RuntimePatch{patch("a.io/x", &now, "1"), patch("b.io/y", &given, "1")},
		},
		{
			name:  "update keeps the time of an unchanged patch, even when the client sends another",
			old:   []trainer.RuntimePatch{patch("a.io/x", &earlier, "1")},
			given: []trainer.RuntimePatch{patch("a.io/x", &given, "1")},
			want:  []trainer.RuntimePatch{patch("a.io/x", &earlier, "1")},
		},
		{
			name:  "update stamps a changed patch with now",
			old:   []trainer.RuntimePatch{patch("a.io/x", &earlier, "1"), patch("b.io/y", &earlier, "1")},
			given: []trainer.RuntimePatch{patch("a.io/x", &earlier, "2"), patch("b.io/y", &earlier, "1")},
			want:  []trainer.RuntimePatch{patch("a.io/x", &now, "2"), patch("b.io/y", &earlier, "1")},
		},
		{
			name:  "update: a new patch keeps its time or gets now",
			old:   []trainer.RuntimePatch{patch("a.io/x", &earlier, "1")},
			given: []trainer.RuntimePatch{patch("a.io/x", nil, "1"), patch("b.io/y", nil, "1"), patch("c.io/z", &given, "1")},
			want:  []trainer.RuntimePatch{patch("a.io/x", &earlier, "1"), patch("b.io/y", &now, "1"), patch("c.io/z", &given, "1")},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			StampRuntimePatches(tc.old, tc.given, now)
			if diff := cmp.Diff(tc.want, tc.given); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

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
	warnings, err := ClusterTrainingRuntimeValidator{}.ValidateCreate(t.Context(), &trainer.ClusterTrainingRuntime{
		ObjectMeta: metav1.ObjectMeta{Name: "old", Labels: map[string]string{trainer.SupportLabel: trainer.SupportDeprecated}},
	})
	want := `ClusterTrainingRuntime "old" is deprecated and will be removed in a future release of Kubeflow Trainer. See runtime deprecation policy: ` + trainer.DeprecationPolicyURL
	if err != nil || len(warnings) != 1 || warnings[0] != want {
		t.Errorf("deprecated ClusterTrainingRuntime: warnings %q, error %v; want %q", warnings, err, want)
	}
}
