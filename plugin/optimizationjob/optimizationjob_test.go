package optimizationjob

import "testing"

func TestNameOf(t *testing.T) {
	for _, tc := range []struct {
		arg, name string
		ok        bool
	}{
		{"optimizationjob/sweep", "sweep", true},
		{"optimizationjobs/sweep", "sweep", true},
		{"OptimizationJob/sweep", "sweep", true},
		{"optimizationjobs.trainer.kubeflow.org/sweep", "sweep", true},
		{"optimizationjob.trainer.kubeflow.org/sweep", "sweep", true},
		{"sweep", "", false},
		{"optimizationjob/", "", false},
		{"trainjob/sweep", "", false},
	} {
		if name, ok := NameOf(tc.arg); name != tc.name || ok != tc.ok {
			t.Errorf("NameOf(%q) = %q, %v; want %q, %v", tc.arg, name, ok, tc.name, tc.ok)
		}
	}
}
