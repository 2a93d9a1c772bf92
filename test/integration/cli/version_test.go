package cli

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubectl-trainjob/kubectl-trainjob/plugin"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/version"
)

// TestVersion prints the client's version, and the operator's from a Deployment shaped like config/'s, or
// why it is not known. Each case names the operator namespace, so that nothing else in the shared cluster
// can change the answer.
func TestVersion(t *testing.T) {
	c := sharedCluster(t)
	cl := adminClient(t, c)
	withOperator := newNamespace(t, cl)
	labels := map[string]string{version.NameLabel: version.OperatorName, version.ComponentLabel: version.OperatorComponent, version.VersionLabel: "v0.3.1"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "kubectl-trainjob-operator", Namespace: withOperator, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{version.ComponentLabel: version.OperatorComponent}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{version.ComponentLabel: version.OperatorComponent}},
				// The operator's container is found by name, wherever it is.
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "sidecar", Image: "ghcr.io/example/sidecar:9.9",
				}, {
					Name: version.OperatorContainer, Image: "ghcr.io/kubectl-trainjob/kubectl-trainjob:v0.3.1", Args: []string{"operator"},
				}}},
			},
		},
	}
	if err := cl.Create(t.Context(), d); err != nil {
		t.Fatal(err)
	}
	d.Status = appsv1.DeploymentStatus{Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1, UpdatedReplicas: 1}
	if err := cl.Status().Update(t.Context(), d); err != nil {
		t.Fatal(err)
	}
	// As config/ installs it: no version label, the image's tag is the version.
	unlabelled := withOperator + "-unlabelled"
	if err := cl.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: unlabelled}}); err != nil {
		t.Fatal(err)
	}
	d2 := d.DeepCopy()
	d2.ObjectMeta = metav1.ObjectMeta{Name: "kubectl-trainjob-operator", Namespace: unlabelled, Labels: map[string]string{version.NameLabel: version.OperatorName, version.ComponentLabel: version.OperatorComponent}}
	d2.Spec.Template.Spec.Containers = []corev1.Container{{Name: version.OperatorContainer, Image: "registry.example.com:5000/team/kubectl-trainjob:v0.4.0-rc.1"}}
	d2.Status = appsv1.DeploymentStatus{}
	if err := cl.Create(t.Context(), d2); err != nil {
		t.Fatal(err)
	}

	cmd := []plugin.CommandAdder{version.NewCmdVersion}
	kube := []string{"--kubeconfig", c.KubeconfigPath}
	n := Normalizer{Replace: map[string]string{withOperator: "<operator-ns>", unlabelled: "<unlabelled-ns>"}}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"client", []string{"version", "--client"}},
		{"client-json", []string{"version", "--client", "-o", "json"}},
		{"operator", withArgs(kube, "version", "--operator-namespace", withOperator)},
		{"operator-json", withArgs(kube, "version", "--operator-namespace", withOperator, "-o", "json")},
		{"operator-yaml", withArgs(kube, "version", "--operator-namespace", withOperator, "-o", "yaml")},
		{"operator-image-tag", withArgs(kube, "version", "--operator-namespace", unlabelled)},
		{"operator-not-found", withArgs(kube, "version", "--operator-namespace", "kube-public")},
		{"operator-forbidden", withArgs(kube, "version", "--operator-namespace", withOperator, "--as", "bob")},
		{"bad-output", withArgs(kube, "version", "-o", "xml")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			AssertGolden(t, "version/"+tc.name, n.Normalize(Run(t, "", cmd, tc.args...).String()))
		})
	}

	t.Run("no-kubeconfig", func(t *testing.T) {
		noKubeconfig(t)
		AssertGolden(t, "version/no-kubeconfig", Run(t, "", cmd, "version").String())
	})
}

// noKubeconfig leaves the commands of the test without any cluster to talk to.
func noKubeconfig(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
}
