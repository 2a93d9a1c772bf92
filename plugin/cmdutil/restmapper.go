package cmdutil

import (
	"net/http"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
)

// knownResource is a kind the commands read or write, with its resource and scope as its API defines them.
type knownResource struct {
	gvk        schema.GroupVersionKind
	resource   string
	namespaced bool
}

var knownResources = []knownResource{
	{trainer.GroupVersion.WithKind(trainer.TrainJobKind), "trainjobs", true},
	{trainer.GroupVersion.WithKind(trainer.TrainingRuntimeKind), "trainingruntimes", true},
	{trainer.GroupVersion.WithKind(trainer.ClusterTrainingRuntimeKind), "clustertrainingruntimes", false},
	{jobsetv1alpha2.GroupVersion.WithKind("JobSet"), "jobsets", true},
	{batchv1.SchemeGroupVersion.WithKind("Job"), "jobs", true},
	{corev1.SchemeGroupVersion.WithKind("Pod"), "pods", true},
	{corev1.SchemeGroupVersion.WithKind("Event"), "events", true},
	{corev1.SchemeGroupVersion.WithKind("ConfigMap"), "configmaps", true},
	{corev1.SchemeGroupVersion.WithKind("Node"), "nodes", false},
	{corev1.SchemeGroupVersion.WithKind("Namespace"), "namespaces", false},
	// Kueue's Workload, watched as metadata (plugin/kueue reads it over REST), in the versions read there.
	{schema.GroupVersionKind{Group: "kueue.x-k8s.io", Version: "v1beta2", Kind: "Workload"}, "workloads", true},
	{schema.GroupVersionKind{Group: "kueue.x-k8s.io", Version: "v1beta1", Kind: "Workload"}, "workloads", true},
}

// newRESTMapper maps the kinds the commands use to their resources without asking the API server: they are
// fixed by their APIs, and discovery would cost every command two requests more, and the time to decode
// every group of the cluster (kubectl saves that with a cache on disk). Any other kind is mapped by
// discovery, on first use.
func newRESTMapper(cfg *rest.Config, httpClient *http.Client) (meta.RESTMapper, error) {
	discovered, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	known := meta.NewDefaultRESTMapper(nil)
	for _, r := range knownResources {
		scope := meta.RESTScopeRoot
		if r.namespaced {
			scope = meta.RESTScopeNamespace
		}
		singular := r.gvk.GroupVersion().WithResource(strings.ToLower(r.gvk.Kind))
		known.AddSpecific(r.gvk, r.gvk.GroupVersion().WithResource(r.resource), singular, scope)
	}
	return &fallbackMapper{known: known, discovered: discovered}, nil
}

// fallbackMapper asks known first, and discovered for what known has no match for.
type fallbackMapper struct {
	known, discovered meta.RESTMapper
}

var _ meta.RESTMapper = (*fallbackMapper)(nil)

func (m *fallbackMapper) KindFor(r schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	return fallback(m, func(rm meta.RESTMapper) (schema.GroupVersionKind, error) { return rm.KindFor(r) })
}

func (m *fallbackMapper) KindsFor(r schema.GroupVersionResource) ([]schema.GroupVersionKind, error) {
	return fallback(m, func(rm meta.RESTMapper) ([]schema.GroupVersionKind, error) { return rm.KindsFor(r) })
}

func (m *fallbackMapper) ResourceFor(r schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	return fallback(m, func(rm meta.RESTMapper) (schema.GroupVersionResource, error) { return rm.ResourceFor(r) })
}

func (m *fallbackMapper) ResourcesFor(r schema.GroupVersionResource) ([]schema.GroupVersionResource, error) {
	return fallback(m, func(rm meta.RESTMapper) ([]schema.GroupVersionResource, error) { return rm.ResourcesFor(r) })
}

func (m *fallbackMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	return fallback(m, func(rm meta.RESTMapper) (*meta.RESTMapping, error) { return rm.RESTMapping(gk, versions...) })
}

func (m *fallbackMapper) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	return fallback(m, func(rm meta.RESTMapper) ([]*meta.RESTMapping, error) { return rm.RESTMappings(gk, versions...) })
}

func (m *fallbackMapper) ResourceSingularizer(resource string) (string, error) {
	return fallback(m, func(rm meta.RESTMapper) (string, error) { return rm.ResourceSingularizer(resource) })
}

func fallback[T any](m *fallbackMapper, do func(meta.RESTMapper) (T, error)) (T, error) {
	v, err := do(m.known)
	if meta.IsNoMatchError(err) {
		return do(m.discovered)
	}
	return v, err
}
