package deploy_test

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-trainjob/kubectl-trainjob/test/integration/operator/internal/optest"
)

// TestRestrictedPodSecurity: the API server's PodSecurity admission, enforcing the restricted standard in a
// namespace, admits a pod of the operator's Deployment template (a server-side dry run), and refuses the same
// pod with one hardening setting taken out, so the check is known to be on.
func TestRestrictedPodSecurity(t *testing.T) {
	objs, err := optest.Build("default")
	if err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	for _, u := range objs {
		if u.GetKind() == "Deployment" {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &d); err != nil {
				t.Fatal(err)
			}
		}
	}
	if d.Name == "" {
		t.Fatal("no Deployment in config/default")
	}

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "restricted-", Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}}}
	if err := env.Client.Create(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(t.Context(), ns) })
	// The pod runs as the Deployment's ServiceAccount, which the ServiceAccount admission wants to exist.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: d.Spec.Template.Spec.ServiceAccountName}}
	if err := env.Client.Create(t.Context(), sa); err != nil {
		t.Fatal(err)
	}
	pod := func(mutate func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: *d.Spec.Template.ObjectMeta.DeepCopy(), Spec: *d.Spec.Template.Spec.DeepCopy()}
		p.Namespace, p.Name = ns.Name, "operator"
		mutate(p)
		return p
	}

	if err := env.Client.Create(t.Context(), pod(func(*corev1.Pod) {}), client.DryRunAll); err != nil {
		t.Errorf("the Deployment's pod in a namespace enforcing the restricted Pod Security Standard: %v", err)
	}
	for name, mutate := range map[string]func(*corev1.Pod){
		"allowPrivilegeEscalation": func(p *corev1.Pod) { p.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation = ptr.To(true) },
		"capabilities":             func(p *corev1.Pod) { p.Spec.Containers[0].SecurityContext.Capabilities = nil },
		"seccompProfile":           func(p *corev1.Pod) { p.Spec.SecurityContext.SeccompProfile = nil },
	} {
		err := env.Client.Create(t.Context(), pod(mutate), client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), `violates PodSecurity "restricted:latest"`) {
			t.Errorf("the Deployment's pod without its %s setting: %v, want it refused by PodSecurity", name, err)
		}
	}
}
