package webhook

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

// TestDeprecatedRuntimeWarning: a deprecated ClusterTrainingRuntime is admitted with upstream's warning.
func TestDeprecatedRuntimeWarning(t *testing.T) {
	warnings, err := ClusterTrainingRuntimeValidator{}.ValidateCreate(t.Context(), &trainer.ClusterTrainingRuntime{
		ObjectMeta: metav1.ObjectMeta{Name: "old", Labels: map[string]string{trainer.SupportLabel: trainer.SupportDeprecated}},
	})
	want := `ClusterTrainingRuntime "old" is deprecated and will be removed in a future release of Kubeflow Trainer. See runtime deprecation policy: ` + trainer.DeprecationPolicyURL
	if err != nil || len(warnings) != 1 || warnings[0] != want {
		t.Errorf("deprecated ClusterTrainingRuntime: warnings %q, error %v; want %q", warnings, err, want)
	}
}
