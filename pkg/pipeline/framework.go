package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"

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

// Framework runs the enabled plugins at each extension point, in the order
// of the configuration (by default the registry's).
type Framework struct {
	// plugins are the plugins enabled at one point at least, in registry order.
	plugins []Plugin
	// cacheTrimmers are the plugins of plugins that trim the cache.
	cacheTrimmers []CacheTrimPlugin
	// enabled are, per extension point, the names of its plugins in order.
	enabled map[ExtensionPoint][]string

	watchExtension        []WatchExtensionPlugin
	customValidation      []CustomValidationPlugin
	enforceMLPolicy       []EnforceMLPolicyPlugin
	enforcePodGroupPolicy []EnforcePodGroupPolicyPlugin
	enforcePodSpec        []EnforcePodSpecPlugin
	preComponentBuilder   []PreComponentBuilderPlugin
	componentBuilder      []ComponentBuilderPlugin
	trainJobStatus        TrainJobStatusPlugin

	// handle reads the DRA claims of the pods the Build phase sizes.
	handle Handle
}

// Option configures a Framework.
type Option func(*options)

type options struct {
	plugins Plugins
}

// WithPlugins enables, disables and orders plugins per extension point
// (the operator's configuration, field plugins).
func WithPlugins(p Plugins) Option {
	return func(o *options) { o.plugins = p }
}

// New builds every plugin of the registry and sorts them into extension
// points: at each point, the plugins of the registry that implement it, in
// the registry's order, as the configuration of WithPlugins changes them.
func New(ctx context.Context, r Registry, h Handle, opts ...Option) (*Framework, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	built := make(map[string]Plugin, len(r))
	var names []string
	for _, e := range r {
		if _, ok := built[e.Name]; ok {
			return nil, fmt.Errorf("plugin %q is registered twice", e.Name)
		}
		p, err := e.Factory(ctx, h)
		if err != nil {
			return nil, fmt.Errorf("plugin %s: %w", e.Name, err)
		}
		built[e.Name] = p
		names = append(names, e.Name)
	}
	f := &Framework{enabled: map[ExtensionPoint][]string{}, handle: h}
	used := map[string]bool{}
	for _, point := range points() {
		ep := extensionPoints[point]
		var defaults []string
		for _, name := range names {
			if ep.implements(built[name]) {
				defaults = append(defaults, name)
			}
		}
		enabled, err := ep.set(&o.plugins).merge(defaults, built)
		if err != nil {
			return nil, fmt.Errorf("plugins.%s: %w", point.field(), err)
		}
		for _, name := range enabled {
			p := built[name]
			if !ep.implements(p) {
				return nil, fmt.Errorf("plugins.%s: plugin %s does not extend %s", point.field(), name, point)
			}
			if err := ep.add(f, p); err != nil {
				return nil, err
			}
			used[name] = true
		}
		f.enabled[point] = enabled
	}
	for _, name := range names {
		if !used[name] {
			continue
		}
		f.plugins = append(f.plugins, built[name])
		if t, ok := built[name].(CacheTrimPlugin); ok {
			f.cacheTrimmers = append(f.cacheTrimmers, t)
		}
	}
	return f, nil
}

// extensionPoint is what the framework knows of one extension point, as
// kube-scheduler's getExtensionPoints: the configuration's PluginSet for
// it, whether a plugin extends it, and how to put a plugin there. Adding an
// extension point is a constant, a field of Plugins and of Framework, and a
// row of extensionPoints.
type extensionPoint struct {
	// set is the point's PluginSet in the configuration.
	set func(*Plugins) PluginSet
	// implements tells whether a plugin extends the point.
	implements func(Plugin) bool
	// add puts a plugin that extends the point after those already there.
	add func(*Framework, Plugin) error
}

// extensionPoints is the table of extension points.
var extensionPoints = map[ExtensionPoint]extensionPoint{
	WatchExtension: pointOf(func(p *Plugins) PluginSet { return p.WatchExtension },
		func(f *Framework) *[]WatchExtensionPlugin { return &f.watchExtension }),
	CustomValidation: pointOf(func(p *Plugins) PluginSet { return p.CustomValidation },
		func(f *Framework) *[]CustomValidationPlugin { return &f.customValidation }),
	EnforceMLPolicy: pointOf(func(p *Plugins) PluginSet { return p.EnforceMLPolicy },
		func(f *Framework) *[]EnforceMLPolicyPlugin { return &f.enforceMLPolicy }),
	EnforcePodGroupPolicy: pointOf(func(p *Plugins) PluginSet { return p.EnforcePodGroupPolicy },
		func(f *Framework) *[]EnforcePodGroupPolicyPlugin { return &f.enforcePodGroupPolicy }),
	EnforcePodSpec: pointOf(func(p *Plugins) PluginSet { return p.EnforcePodSpec },
		func(f *Framework) *[]EnforcePodSpecPlugin { return &f.enforcePodSpec }),
	PreComponentBuilder: pointOf(func(p *Plugins) PluginSet { return p.PreComponentBuilder },
		func(f *Framework) *[]PreComponentBuilderPlugin { return &f.preComponentBuilder }),
	ComponentBuilder: pointOf(func(p *Plugins) PluginSet { return p.ComponentBuilder },
		func(f *Framework) *[]ComponentBuilderPlugin { return &f.componentBuilder }),
	TrainJobStatus: {
		set:        func(p *Plugins) PluginSet { return p.TrainJobStatus },
		implements: func(p Plugin) bool { _, ok := p.(TrainJobStatusPlugin); return ok },
		add: func(f *Framework, p Plugin) error {
			if f.trainJobStatus != nil {
				return errors.New("too many TrainJobStatus plugins are enabled: at most one computes the status")
			}
			f.trainJobStatus = p.(TrainJobStatusPlugin)
			return nil
		},
	},
}

// pointOf is the row of a point whose plugins, of interface P, run in
// order from the Framework's list.
func pointOf[P Plugin](set func(*Plugins) PluginSet, list func(*Framework) *[]P) extensionPoint {
	return extensionPoint{
		set:        set,
		implements: func(p Plugin) bool { _, ok := p.(P); return ok },
		add: func(f *Framework, p Plugin) error {
			l := list(f)
			*l = append(*l, p.(P))
			return nil
		},
	}
}

// points are every extension point, in phase order.
func points() []ExtensionPoint {
	var out []ExtensionPoint
	for _, ph := range Phases {
		out = append(out, ph.Points...)
	}
	return out
}

// Plugins returns, for an extension point, the names of the plugins that
// run there, in execution order.
func (f *Framework) Plugins(point ExtensionPoint) []string {
	return slices.Clone(f.enabled[point])
}

// TrimForCache drops from obj, on its way into the operator's cache, what
// no enabled plugin reads there (CacheTrimPlugin).
func (f *Framework) TrimForCache(obj client.Object) {
	for _, t := range f.cacheTrimmers {
		t.TrimForCache(obj)
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
// PreComponentBuilder. The first error stops it. The DRA claims of the
// pods are read first, so that the ML policies count their GPUs.
func (f *Framework) RuntimeInfo(ctx context.Context, tj *trainer.TrainJob, rt *Runtime, opts BuildOptions) (*RuntimeInfo, error) {
	info, err := f.newRuntimeInfo(ctx, tj, rt)
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
	info, err := f.RuntimeInfo(ctx, tj, rt, opts)
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

// newRuntimeInfo is NewRuntimeInfo with the pods' DRA claims read.
func (f *Framework) newRuntimeInfo(ctx context.Context, tj *trainer.TrainJob, rt *Runtime) (*RuntimeInfo, error) {
	info, err := NewRuntimeInfo(tj, rt)
	if err != nil {
		return nil, err
	}
	if err := info.ReadClaims(ctx, f.handle.Reader(), tj.Namespace); err != nil {
		return nil, err
	}
	return info, nil
}

// Validate runs the PreExecution phase: the CustomValidation plugins on a
// RuntimeInfo built without enforcement. Results of all plugins are joined.
func (f *Framework) Validate(ctx context.Context, rt *Runtime, oldObj, newObj *trainer.TrainJob) (admission.Warnings, field.ErrorList) {
	info, err := NewRuntimeInfo(newObj, rt)
	if err != nil {
		return nil, field.ErrorList{field.Invalid(field.NewPath("spec", "runtimePatches"), "", err.Error())}
	}
	if err := info.ReadClaims(ctx, f.handle.Reader(), newObj.Namespace); err != nil {
		return nil, field.ErrorList{field.InternalError(field.NewPath("spec", "runtimeRef"), err)}
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
