package apply

import (
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"

	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
)

func TestDrifted(t *testing.T) {
	built := func() *jobsetv1alpha2.JobSet {
		js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "alpha", Namespace: "ns",
			Labels: map[string]string{"team": "ml"}, Annotations: map[string]string{pipeline.AppliedHashAnnotation: "h"}}}
		js.Spec.Suspend = ptr.To(true)
		js.Spec.ReplicatedJobs = []jobsetv1alpha2.ReplicatedJob{{Name: "node", Replicas: 1}}
		c := corev1.Container{Name: "node", Image: "trainer", Env: []corev1.EnvVar{{Name: "A", Value: "1"}},
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"cpu": resource.MustParse("1000m")}}}
		js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers = []corev1.Container{c}
		return js
	}
	for _, tc := range []struct {
		name string
		edit func(*jobsetv1alpha2.JobSet)
		want bool
	}{
		{"as built", func(*jobsetv1alpha2.JobSet) {}, false},
		{"what the server and others add", func(js *jobsetv1alpha2.JobSet) {
			js.UID, js.ResourceVersion, js.Generation = "u", "7", 2
			js.Labels["theirs"] = "x"
			js.Annotations["theirs"] = "y"
			js.Status.Restarts = 3
			js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0].ImagePullPolicy = corev1.PullIfNotPresent
			js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0].Resources.Limits["cpu"] = resource.MustParse("1")
		}, false},
		{"resumed", func(js *jobsetv1alpha2.JobSet) { js.Spec.Suspend = ptr.To(false) }, true},
		{"suspend dropped", func(js *jobsetv1alpha2.JobSet) { js.Spec.Suspend = nil }, true},
		{"label removed", func(js *jobsetv1alpha2.JobSet) { delete(js.Labels, "team") }, true},
		{"label changed", func(js *jobsetv1alpha2.JobSet) { js.Labels["team"] = "other" }, true},
		{"image changed", func(js *jobsetv1alpha2.JobSet) {
			js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0].Image = "evil"
		}, true},
		{"env added", func(js *jobsetv1alpha2.JobSet) {
			c := &js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0]
			c.Env = append(c.Env, corev1.EnvVar{Name: "B"})
		}, true},
		{"replicated job removed", func(js *jobsetv1alpha2.JobSet) { js.Spec.ReplicatedJobs = nil }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			current := built()
			tc.edit(current)
			if got := drifted(current, built()); got != tc.want {
				t.Errorf("drifted = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestDriftedConfigMap(t *testing.T) {
	built := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "alpha-mpi-hostfile"}, Data: map[string]string{"hostfile": "a slots=1\n"}}
	for _, tc := range []struct {
		name    string
		current client.Object
		want    bool
	}{
		{"as built", built.DeepCopy(), false},
		{"edited", &corev1.ConfigMap{ObjectMeta: built.ObjectMeta, Data: map[string]string{"hostfile": "evil slots=1\n"}}, true},
		{"key added", &corev1.ConfigMap{ObjectMeta: built.ObjectMeta, Data: map[string]string{"hostfile": "a slots=1\n", "x": "y"}}, false},
		{"emptied", &corev1.ConfigMap{ObjectMeta: built.ObjectMeta}, true},
	} {
		if got := drifted(tc.current, built); got != tc.want {
			t.Errorf("%s: drifted = %v, want %v", tc.name, got, tc.want)
		}
	}
}
