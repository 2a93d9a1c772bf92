package pipeline

import (
	"fmt"
	"slices"
	"strings"
)

// Plugins enables, disables and orders plugins per extension point, as
// the plugins of a kube-scheduler profile do. It is the field plugins of
// the operator's configuration; render and describe-pipeline read the same.
type Plugins struct {
	WatchExtension        PluginSet `json:"watchExtension,omitzero"`
	CustomValidation      PluginSet `json:"customValidation,omitzero"`
	EnforceMLPolicy       PluginSet `json:"enforceMLPolicy,omitzero"`
	EnforcePodGroupPolicy PluginSet `json:"enforcePodGroupPolicy,omitzero"`
	EnforcePodSpec        PluginSet `json:"enforcePodSpec,omitzero"`
	PreComponentBuilder   PluginSet `json:"preComponentBuilder,omitzero"`
	ComponentBuilder      PluginSet `json:"componentBuilder,omitzero"`
	TrainJobStatus        PluginSet `json:"trainJobStatus,omitzero"`
}

// PluginSet changes the plugins of one extension point. The point's
// default plugins are those of the registry that implement it, in the
// registry's order. Disabled removes some of them ("*" removes them all);
// Enabled adds plugins after the remaining ones, in its order. A default
// plugin named in Enabled keeps its place, so to reorder the defaults,
// disable "*" and enable them in the order wanted.
type PluginSet struct {
	Enabled  []PluginRef `json:"enabled,omitempty"`
	Disabled []PluginRef `json:"disabled,omitempty"`
}

// PluginRef names a plugin of the registry.
type PluginRef struct {
	Name string `json:"name"`
}

// DisableAll is the name in PluginSet.Disabled that disables every default
// plugin of the point.
const DisableAll = "*"

// field is the point's field name in Plugins.
func (point ExtensionPoint) field() string {
	s := string(point)
	return strings.ToLower(s[:1]) + s[1:]
}

// merge returns the names of the plugins of a point whose defaults are
// defaults, as scheduler profiles merge (mergePluginSet). Every name must be
// of a plugin in registered.
func (s PluginSet) merge(defaults []string, registered map[string]Plugin) ([]string, error) {
	known := func(name string) error {
		if _, ok := registered[name]; !ok {
			return fmt.Errorf("plugin %q is not registered (is its feature gate off?)", name)
		}
		return nil
	}
	disabled := map[string]bool{}
	for _, p := range s.Disabled {
		if p.Name != DisableAll {
			if err := known(p.Name); err != nil {
				return nil, err
			}
		}
		disabled[p.Name] = true
	}
	var enabled []string
	for _, p := range s.Enabled {
		if err := known(p.Name); err != nil {
			return nil, err
		}
		if slices.Contains(enabled, p.Name) {
			return nil, fmt.Errorf("plugin %q is enabled twice", p.Name)
		}
		enabled = append(enabled, p.Name)
	}
	var out []string
	if !disabled[DisableAll] {
		for _, name := range defaults {
			if !disabled[name] {
				out = append(out, name)
			}
		}
	}
	for _, name := range enabled {
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out, nil
}
