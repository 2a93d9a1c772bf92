// Package config_test checks what `kustomize build config/default`
// produces against the code it deploys, without a cluster: namespaces,
// webhook names and paths, the Service and Secret the operator's
// configuration names, the Deployment's hardening, the shipped runtimes.
// test/integration/operator/deploy applies it to a real API server.
package config_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/config"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator/webhook"
)

// built is config/default, by kind and name.
type built map[string]map[string][]byte

func build(t *testing.T) built {
	t.Helper()
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), "default")
	if err != nil {
		t.Fatalf("kustomize build config/default: %v", err)
	}
	out := built{}
	for _, r := range resources.Resources() {
		data, err := r.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if out[r.GetKind()] == nil {
			out[r.GetKind()] = map[string][]byte{}
		}
		out[r.GetKind()][r.GetName()] = data
		namespaced := r.GetNamespace() != ""
		clusterScoped := slices.Contains([]string{"Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding",
			"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", trainer.ClusterTrainingRuntimeKind}, r.GetKind())
		if namespaced == clusterScoped || (namespaced && r.GetNamespace() != config.DefaultNamespace) {
			t.Errorf("%s %s is in namespace %q", r.GetKind(), r.GetName(), r.GetNamespace())
		}
	}
	return out
}

func get[T runtime.Object](t *testing.T, b built, kind, name string, obj T) T {
	t.Helper()
	data, ok := b[kind][name]
	if !ok {
		t.Fatalf("no %s %s in config/default", kind, name)
	}
	if err := yaml.Unmarshal(data, obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

func TestDefault(t *testing.T) {
	b := build(t)
	var cfg *config.Configuration
	for name, data := range b["ConfigMap"] {
		if strings.HasPrefix(name, "kubectl-trainjob-config-") {
			cm := &corev1.ConfigMap{}
			if err := yaml.Unmarshal(data, cm); err != nil {
				t.Fatal(err)
			}
			var err error
			if cfg, err = config.Decode([]byte(cm.Data["config.yaml"])); err != nil {
				t.Fatal(err)
			}
		}
	}
	if cfg == nil {
		t.Fatal("no configuration ConfigMap")
	}
	cfg.Namespace = config.DefaultNamespace
	cfg.Default()

	t.Run("webhooks", func(t *testing.T) {
		service := admissionv1.ServiceReference{Namespace: cfg.Namespace, Name: cfg.CertManagement.WebhookServiceName}
		type hook struct{ Name, Path string }
		var got []hook
		m := get(t, b, "MutatingWebhookConfiguration", webhook.MutatingConfigurationName, &admissionv1.MutatingWebhookConfiguration{})
		for _, w := range m.Webhooks {
			got = append(got, hook{w.Name, ptr.Deref(w.ClientConfig.Service.Path, "")})
			if w.ClientConfig.Service.Name != service.Name || w.ClientConfig.Service.Namespace != service.Namespace {
				t.Errorf("%s calls %v, want the Service %v", w.Name, w.ClientConfig.Service, service)
			}
		}
		v := get(t, b, "ValidatingWebhookConfiguration", webhook.ValidatingConfigurationName, &admissionv1.ValidatingWebhookConfiguration{})
		for _, w := range v.Webhooks {
			got = append(got, hook{w.Name, ptr.Deref(w.ClientConfig.Service.Path, "")})
			if w.ClientConfig.Service.Name != service.Name || w.ClientConfig.Service.Namespace != service.Namespace {
				t.Errorf("%s calls %v, want the Service %v", w.Name, w.ClientConfig.Service, service)
			}
		}
		want := []hook{
			{webhook.TrainJobDefaulterName, webhook.TrainJobDefaulterPath},
			{webhook.TrainJobValidatorName, webhook.TrainJobValidatorPath},
			{webhook.TrainingRuntimeValidatorName, webhook.TrainingRuntimeValidatorPath},
			{webhook.ClusterTrainingRuntimeValidatorName, webhook.ClusterTrainingRuntimeValidatorPath},
			{webhook.OptimizationJobValidatorName, webhook.OptimizationJobValidatorPath},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("webhooks (-want +got):\n%s", diff)
		}
		get(t, b, "Service", cfg.CertManagement.WebhookServiceName, &corev1.Service{})
		get(t, b, "Secret", cfg.CertManagement.WebhookSecretName, &corev1.Secret{})
	})

	t.Run("deployment", func(t *testing.T) {
		d := get(t, b, "Deployment", "kubectl-trainjob-operator", &appsv1.Deployment{})
		pod := d.Spec.Template.Spec
		if len(pod.Containers) != 1 {
			t.Fatalf("%d containers", len(pod.Containers))
		}
		c := pod.Containers[0]
		sc := ptr.Deref(c.SecurityContext, corev1.SecurityContext{})
		got := map[string]any{
			"args[0]":                  c.Args[0],
			"serviceAccount":           pod.ServiceAccountName,
			"runAsNonRoot":             ptr.Deref(sc.RunAsNonRoot, false) && ptr.Deref(pod.SecurityContext.RunAsNonRoot, false),
			"readOnlyRootFilesystem":   ptr.Deref(sc.ReadOnlyRootFilesystem, false),
			"allowPrivilegeEscalation": ptr.Deref(sc.AllowPrivilegeEscalation, true),
			"liveness":                 c.LivenessProbe.HTTPGet.Path,
			"readiness":                c.ReadinessProbe.HTTPGet.Path,
			"requests":                 len(c.Resources.Requests),
			"replicas":                 ptr.Deref(d.Spec.Replicas, 1),
		}
		want := map[string]any{
			"args[0]":                  "operator",
			"serviceAccount":           "kubectl-trainjob-operator",
			"runAsNonRoot":             true,
			"readOnlyRootFilesystem":   true,
			"allowPrivilegeEscalation": false,
			"liveness":                 "/" + cfg.Health.LivenessEndpointName,
			"readiness":                "/" + cfg.Health.ReadinessEndpointName,
			"requests":                 2,
			"replicas":                 int32(2),
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Deployment (-want +got):\n%s", diff)
		}
		pdb := get(t, b, "PodDisruptionBudget", "kubectl-trainjob-operator", &policyv1.PodDisruptionBudget{})
		if pdb.Spec.MinAvailable.IntValue() != 1 || !maps.Equal(pdb.Spec.Selector.MatchLabels, d.Spec.Selector.MatchLabels) {
			t.Errorf("PodDisruptionBudget: minAvailable %v, selector %v; want 1 of the Deployment's pods %v", pdb.Spec.MinAvailable, pdb.Spec.Selector.MatchLabels, d.Spec.Selector.MatchLabels)
		}
		// The replicas spread over nodes where they can (ScheduleAnyway: a
		// one-node cluster still runs both), so that losing a node does not
		// take both.
		spread := slices.ContainsFunc(pod.TopologySpreadConstraints, func(c corev1.TopologySpreadConstraint) bool {
			return c.TopologyKey == corev1.LabelHostname && c.WhenUnsatisfiable == corev1.ScheduleAnyway && c.MaxSkew == 1 &&
				c.LabelSelector != nil && maps.Equal(c.LabelSelector.MatchLabels, d.Spec.Selector.MatchLabels)
		})
		if !spread {
			t.Errorf("topologySpreadConstraints %+v, want the Deployment's pods spread over %s, ScheduleAnyway", pod.TopologySpreadConstraints, corev1.LabelHostname)
		}
		// The certificate folder must be writable: it is below an emptyDir.
		if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
			return strings.HasPrefix(cfg.Webhook.CertDir, m.MountPath+"/") && !m.ReadOnly
		}) {
			t.Errorf("no writable volume holds the certificate folder %s", cfg.Webhook.CertDir)
		}
	})

	// Trainers reach the status server through the webhook Service, on the
	// port the TrainJobStatus plugin puts in their URL.
	t.Run("status server", func(t *testing.T) {
		svc := get(t, b, "Service", cfg.CertManagement.WebhookServiceName, &corev1.Service{})
		d := get(t, b, "Deployment", "kubectl-trainjob-operator", &appsv1.Deployment{})
		var got []string
		for _, p := range svc.Spec.Ports {
			if p.Port == *cfg.StatusServer.Port {
				got = append(got, "service "+p.TargetPort.String())
			}
		}
		for _, p := range d.Spec.Template.Spec.Containers[0].Ports {
			if p.ContainerPort == *cfg.StatusServer.Port {
				got = append(got, "container "+p.Name)
			}
		}
		if diff := cmp.Diff([]string{"service status-server", "container status-server"}, got); diff != "" {
			t.Errorf("port %d (-want +got):\n%s", *cfg.StatusServer.Port, diff)
		}
	})

	t.Run("runtimes", func(t *testing.T) {
		var names []string
		for name, data := range b[trainer.ClusterTrainingRuntimeKind] {
			names = append(names, name)
			rt := &trainer.ClusterTrainingRuntime{}
			if err := yaml.UnmarshalStrict(data, rt); err != nil {
				t.Errorf("%s: %v", name, err)
			}
			if rt.Labels[trainer.WebhookValidationLabel] != "disabled" || rt.Labels[trainer.FrameworkLabel] == "" {
				t.Errorf("%s labels %v, want webhook validation disabled and a framework", name, rt.Labels)
			}
		}
		slices.Sort(names)
		want := []string{"deepspeed-distributed", "flux-distributed", "jax-distributed", "torch-distributed", "torch-distributed-dra", "torchtune-llama3.2-1b", "xgboost-distributed"}
		if diff := cmp.Diff(want, names); diff != "" {
			t.Errorf("runtimes (-want +got):\n%s", diff)
		}
	})
}
