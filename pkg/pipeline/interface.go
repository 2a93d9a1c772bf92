// Package pipeline is the Pipeline Framework of KEP-2170: it turns a TrainJob
// and its runtime into the objects to apply, through plugins called at fixed
// extension points. The operator and the CLI (render, describe-pipeline) run
// the very same code. The framework never talks to the API server itself; a
// plugin may read through the Handle it is given (offline, a cluster that
// holds only what the input files hold).
//
// pkg/pipeline/plugins holds the in-tree plugins of this framework;
// plugin/ (top level) is the kubectl plugin's commands, which run it.
package pipeline

import (
	"context"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
)

// Plugin is anything the framework can call. A plugin implements only the
// extension points it cares about; the framework finds them by type
// assertion once, at construction.
type Plugin interface {
	Name() string
}

// CustomValidationPlugin runs at admission (PreExecution phase).
type CustomValidationPlugin interface {
	Plugin
	Validate(ctx context.Context, info *RuntimeInfo, oldObj, newObj *trainer.TrainJob) (admission.Warnings, field.ErrorList)
}

// ReconcilerBuilder adds watches to the TrainJob controller.
type ReconcilerBuilder func(b *builder.Builder, c client.Client, ca cache.Cache) *builder.Builder

// WatchExtensionPlugin adds watches to the TrainJob controller (Startup phase).
type WatchExtensionPlugin interface {
	Plugin
	ReconcilerBuilders() []ReconcilerBuilder
}

// EnforceMLPolicyPlugin applies an ML policy (counts, env, ports) to the pod sets.
type EnforceMLPolicyPlugin interface {
	Plugin
	EnforceMLPolicy(info *RuntimeInfo, trainJob *trainer.TrainJob) error
}

// EnforcePodGroupPolicyPlugin applies a gang-scheduling policy. It runs after
// every ML policy, since those may change counts.
type EnforcePodGroupPolicyPlugin interface {
	Plugin
	EnforcePodGroupPolicy(info *RuntimeInfo, trainJob *trainer.TrainJob) error
}

// EnforcePodSpecPlugin applies PodSpec concerns not driven by the ML or
// PodGroup policies.
type EnforcePodSpecPlugin interface {
	Plugin
	EnforcePodSpec(info *RuntimeInfo, trainJob *trainer.TrainJob) error
}

// PreComponentBuilderPlugin synchronises the pod sets with the template
// (endpoints, parallelism); only the template owner (JobSet) implements it.
type PreComponentBuilderPlugin interface {
	Plugin
	PreBuildSync(info *RuntimeInfo, trainJob *trainer.TrainJob) error
}

// ComponentBuilderPlugin returns the objects to server-side apply, in order.
// Each object has its TypeMeta set. A plugin returns nothing for an object
// that must not be touched (e.g. a running JobSet).
type ComponentBuilderPlugin interface {
	Plugin
	Build(ctx context.Context, info *RuntimeInfo, trainJob *trainer.TrainJob) ([]client.Object, error)
}

// TrainJobStatusPlugin computes the TrainJob status from its children
// (PostExecution phase). At most one may be registered.
type TrainJobStatusPlugin interface {
	Plugin
	Status(ctx context.Context, trainJob *trainer.TrainJob) (*trainer.TrainJobStatus, error)
}

// CacheTrimPlugin is a plugin that reads objects of some kind from the
// operator's cache and knows what of them it never reads there: the cache
// keeps objects without it (JobSets without their pod templates). It is no
// extension point of KEP-2170; every enabled plugin that implements it
// trims, so it must keep what any other reader of that kind needs.
type CacheTrimPlugin interface {
	Plugin
	// TrimForCache drops in place from obj what the cache need not keep;
	// it leaves objects of other kinds alone.
	TrimForCache(obj client.Object)
}

// OperatorInfo is what plugins know of the operator: pods reach its
// status server through the webhook Service, with the CA of the webhook
// certificate Secret (TrainJobStatus plugin).
type OperatorInfo struct {
	// Namespace is the operator's namespace.
	Namespace string
	// WebhookServiceName is the Service in front of the webhook and
	// status servers, in Namespace.
	WebhookServiceName string
	// WebhookSecretName is the Secret, in Namespace, of the webhook
	// certificate and its CA (key ca.crt).
	WebhookSecretName string
	// StatusServerPort is the status server's port on that Service.
	StatusServerPort int32
}

// Factory builds a plugin.
type Factory func(ctx context.Context, h Handle) (Plugin, error)

// RegistryEntry is a named plugin factory.
type RegistryEntry struct {
	Name    string
	Factory Factory
}

// Registry is the ordered list of plugins. Within an extension point the
// plugins run in this order, so the output is deterministic.
type Registry []RegistryEntry
