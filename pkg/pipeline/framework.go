package pipeline

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
)

// ExtensionPoint names a place in the pipeline where plugins run.
type ExtensionPoint string

// The extension points, by phase.
const (
	WatchExtension        ExtensionPoint = "WatchExtension"
	CustomValidation      ExtensionPoint = "CustomValidation"
	EnforceMLPolicy       ExtensionPoint = "EnforceMLPolicy"
	EnforcePodGroupPolicy ExtensionPoint = "EnforcePodGroupPolicy"
	EnforcePodSpec        ExtensionPoint = "EnforcePodSpec"
	PreComponentBuilder   ExtensionPoint = "PreComponentBuilder"
	ComponentBuilder      ExtensionPoint = "ComponentBuilder"
	TrainJobStatus        ExtensionPoint = "TrainJobStatus"
)

// Phase is a stage of a TrainJob's life in which extension points run.
type Phase struct {
	Name   string
	When   string
	Points []ExtensionPoint
}

// Phases are the four phases of KEP-2170 in order, with their extension
// points in the order they run.
var Phases = []Phase{
	{Name: "Startup", When: "once, when the operator starts", Points: []ExtensionPoint{WatchExtension}},
	{Name: "PreExecution", When: "at admission of a TrainJob (create, update)", Points: []ExtensionPoint{CustomValidation}},
	{Name: "Build", When: "at each reconcile of a TrainJob that has not finished", Points: []ExtensionPoint{EnforceMLPolicy, EnforcePodGroupPolicy, EnforcePodSpec, PreComponentBuilder, ComponentBuilder}},
	{Name: "PostExecution", When: "at each reconcile", Points: []ExtensionPoint{TrainJobStatus}},
}

// Framework runs the registered plugins at each extension point, in the
// registry's order.
type Framework struct {
	plugins []Plugin

	watchExtension        []WatchExtensionPlugin
	customValidation      []CustomValidationPlugin
	enforceMLPolicy       []EnforceMLPolicyPlugin
	enforcePodGroupPolicy []EnforcePodGroupPolicyPlugin
	enforcePodSpec        []EnforcePodSpecPlugin
	preComponentBuilder   []PreComponentBuilderPlugin
	componentBuilder      []ComponentBuilderPlugin
	trainJobStatus        TrainJobStatusPlugin
}

// New builds every plugin of the registry and sorts them into extension points.
func New(ctx context.Context, r Registry, h Handle) (*Framework, error) {
	f := &Framework{}
	seen := make(map[string]bool, len(r))
	for _, e := range r {
		if seen[e.Name] {
			return nil, fmt.Errorf("plugin %q is registered twice", e.Name)
		}
		seen[e.Name] = true
		p, err := e.Factory(ctx, h)
		if err != nil {
			return nil, fmt.Errorf("plugin %s: %w", e.Name, err)
		}
		f.plugins = append(f.plugins, p)
		if p, ok := p.(WatchExtensionPlugin); ok {
			f.watchExtension = append(f.watchExtension, p)
		}
		if p, ok := p.(CustomValidationPlugin); ok {
			f.customValidation = append(f.customValidation, p)
		}
		if p, ok := p.(EnforceMLPolicyPlugin); ok {
			f.enforceMLPolicy = append(f.enforceMLPolicy, p)
		}
		if p, ok := p.(EnforcePodGroupPolicyPlugin); ok {
			f.enforcePodGroupPolicy = append(f.enforcePodGroupPolicy, p)
		}
		if p, ok := p.(EnforcePodSpecPlugin); ok {
			f.enforcePodSpec = append(f.enforcePodSpec, p)
		}
		if p, ok := p.(PreComponentBuilderPlugin); ok {
			f.preComponentBuilder = append(f.preComponentBuilder, p)
		}
		if p, ok := p.(ComponentBuilderPlugin); ok {
			f.componentBuilder = append(f.componentBuilder, p)
		}
		if p, ok := p.(TrainJobStatusPlugin); ok {
			if f.trainJobStatus != nil {
				return nil, errors.New("too many TrainJobStatus plugins are registered")
			}
			f.trainJobStatus = p
		}
	}
	return f, nil
}

// Plugins returns, for an extension point, the names of the plugins that
// run there, in execution order.
func (f *Framework) Plugins(point ExtensionPoint) []string {
	var names []string
	add := func(p Plugin) { names = append(names, p.Name()) }
	switch point {
	case WatchExtension:
		each(f.watchExtension, add)
	case CustomValidation:
		each(f.customValidation, add)
	case EnforceMLPolicy:
		each(f.enforceMLPolicy, add)
	case EnforcePodGroupPolicy:
		each(f.enforcePodGroupPolicy, add)
	case EnforcePodSpec:
		each(f.enforcePodSpec, add)
	case PreComponentBuilder:
		each(f.preComponentBuilder, add)
	case ComponentBuilder:
		each(f.componentBuilder, add)
	case TrainJobStatus:
		if f.trainJobStatus != nil {
			add(f.trainJobStatus)
		}
	}
	return names
}

func each[P Plugin](ps []P, fn func(Plugin)) {
	for _, p := range ps {
		fn(p)
	}
}

// PluginError is an error of one plugin at one extension point.
type PluginError struct {
	Plugin string
	Point  ExtensionPoint
	Err    error
}

func (e *PluginError) Error() string {
	return fmt.Sprintf("%s plugin %s: %v", e.Point, e.Plugin, e.Err)
}
func (e *PluginError) Unwrap() error { return e.Err }

// BuildOptions tune a Build.
type BuildOptions struct {
	// Trace, when set, records each plugin's run and what it changed. It
	// costs a snapshot per plugin; the operator leaves it nil.
	Trace *Trace
}

// RuntimeInfo builds the RuntimeInfo and runs the enforcement points of the
// Build phase: EnforceMLPolicy → EnforcePodGroupPolicy → EnforcePodSpec →
// PreComponentBuilder. The first error stops it.
func (f *Framework) RuntimeInfo(tj *trainer.TrainJob, rt *Runtime, opts BuildOptions) (*RuntimeInfo, error) {
	info, err := NewRuntimeInfo(tj, rt)
	if err != nil {
		return nil, err
	}
	tr := opts.Trace
	for _, p := range f.enforceMLPolicy {
		if err := tr.run(EnforceMLPolicy, p, info, func() error { return p.EnforceMLPolicy(info, tj) }); err != nil {
			return nil, err
		}
	}
	for _, p := range f.enforcePodGroupPolicy {
		if err := tr.run(EnforcePodGroupPolicy, p, info, func() error { return p.EnforcePodGroupPolicy(info, tj) }); err != nil {
			return nil, err
		}
	}
	for _, p := range f.enforcePodSpec {
		if err := tr.run(EnforcePodSpec, p, info, func() error { return p.EnforcePodSpec(info, tj) }); err != nil {
			return nil, err
		}
	}
	for _, p := range f.preComponentBuilder {
		if err := tr.run(PreComponentBuilder, p, info, func() error { return p.PreBuildSync(info, tj) }); err != nil {
			return nil, err
		}
	}
	return info, nil
}

// Build runs the whole Build phase and returns the objects to apply, in the
// order to apply them.
func (f *Framework) Build(ctx context.Context, tj *trainer.TrainJob, rt *Runtime, opts BuildOptions) ([]client.Object, *RuntimeInfo, error) {
	info, err := f.RuntimeInfo(tj, rt, opts)
	if err != nil {
		return nil, nil, err
	}
	var objs []client.Object
	for _, p := range f.componentBuilder {
		var built []client.Object
		err := opts.Trace.run(ComponentBuilder, p, info, func() error {
			var err error
			built, err = p.Build(ctx, info, tj)
			return err
		})
		if err != nil {
			return nil, info, err
		}
		opts.Trace.objects(built)
		objs = append(objs, built...)
	}
	return objs, info, nil
}

// Validate runs the PreExecution phase: the CustomValidation plugins on a
// RuntimeInfo built without enforcement. Results of all plugins are joined.
func (f *Framework) Validate(ctx context.Context, rt *Runtime, oldObj, newObj *trainer.TrainJob) (admission.Warnings, field.ErrorList) {
	info, err := NewRuntimeInfo(newObj, rt)
	if err != nil {
		return nil, field.ErrorList{field.Invalid(field.NewPath("spec", "runtimePatches"), "", err.Error())}
	}
	var warnings admission.Warnings
	var errs field.ErrorList
	for _, p := range f.customValidation {
		w, e := p.Validate(ctx, info, oldObj, newObj)
		warnings = append(warnings, w...)
		errs = append(errs, e...)
	}
	return warnings, errs
}

// Status runs the PostExecution phase's TrainJobStatus plugin. Without one
// it returns a copy of the current status.
func (f *Framework) Status(ctx context.Context, tj *trainer.TrainJob) (*trainer.TrainJobStatus, error) {
	if f.trainJobStatus == nil {
		return tj.Status.DeepCopy(), nil
	}
	st, err := f.trainJobStatus.Status(ctx, tj)
	if err != nil {
		return nil, &PluginError{Plugin: f.trainJobStatus.Name(), Point: TrainJobStatus, Err: err}
	}
	return st, nil
}

// ReconcilerBuilders collects the WatchExtension plugins' watches.
func (f *Framework) ReconcilerBuilders() []ReconcilerBuilder {
	var out []ReconcilerBuilder
	for _, p := range f.watchExtension {
		out = append(out, p.ReconcilerBuilders()...)
	}
	return out
}
