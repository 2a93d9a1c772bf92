package pipeline_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/pipelinetest"
)

// recorder is a plugin at every Build extension point that logs its calls.
type recorder struct {
	name string
	log  *[]string
	fail pipeline.ExtensionPoint
	env  string
}

func (r *recorder) Name() string { return r.name }

func (r *recorder) call(p pipeline.ExtensionPoint) error {
	*r.log = append(*r.log, string(p)+":"+r.name)
	if p == r.fail {
		return errors.New("boom")
	}
	return nil
}

func (r *recorder) EnforceMLPolicy(info *pipeline.RuntimeInfo, _ *trainer.TrainJob) error {
	if r.env != "" {
		pipeline.UpsertEnv(info.TrainerPodSet().Container("node"), corev1.EnvVar{Name: r.env, Value: "1"})
	}
	return r.call(pipeline.EnforceMLPolicy)
}
func (r *recorder) EnforcePodGroupPolicy(*pipeline.RuntimeInfo, *trainer.TrainJob) error {
	return r.call(pipeline.EnforcePodGroupPolicy)
}
func (r *recorder) EnforcePodSpec(*pipeline.RuntimeInfo, *trainer.TrainJob) error {
	return r.call(pipeline.EnforcePodSpec)
}
func (r *recorder) PreBuildSync(*pipeline.RuntimeInfo, *trainer.TrainJob) error {
	return r.call(pipeline.PreComponentBuilder)
}
func (r *recorder) Build(context.Context, *pipeline.RuntimeInfo, *trainer.TrainJob) ([]client.Object, error) {
	cm := &corev1.ConfigMap{}
	cm.Kind, cm.Name = "ConfigMap", r.name
	return []client.Object{cm}, r.call(pipeline.ComponentBuilder)
}

type statusOnly struct{ name string }

func (s statusOnly) Name() string { return s.name }
func (s statusOnly) Status(context.Context, *trainer.TrainJob) (*trainer.TrainJobStatus, error) {
	return &trainer.TrainJobStatus{}, nil
}

func registry(plugins ...pipeline.Plugin) pipeline.Registry {
	var r pipeline.Registry
	for _, p := range plugins {
		r = append(r, pipeline.RegistryEntry{Name: p.Name(), Factory: func(context.Context, pipeline.Handle) (pipeline.Plugin, error) { return p, nil }})
	}
	return r
}

const runtimeYAML = `
kind: ClusterTrainingRuntime
metadata: {name: torch}
spec:
  mlPolicy: {numNodes: 2, torch: {}}
  template:
    spec:
      replicatedJobs:
      - name: node
        template:
          metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}
          spec: {template: {spec: {containers: [{name: node, image: img}]}}}
`

const trainJobYAML = `
metadata: {name: job}
spec: {runtimeRef: {name: torch}}
`

func TestBuildRunsPointsInPhaseOrderAndPluginsInRegistryOrder(t *testing.T) {
	var log []string
	fw, err := pipeline.New(context.Background(), registry(&recorder{name: "b", log: &log}, &recorder{name: "a", log: &log}), pipeline.OfflineHandle(pipeline.OperatorInfo{}))
	if err != nil {
		t.Fatal(err)
	}
	objs, _, err := fw.Build(context.Background(), pipelinetest.TrainJob(t, trainJobYAML), pipelinetest.Runtime(t, runtimeYAML), pipeline.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"EnforceMLPolicy:b", "EnforceMLPolicy:a", "EnforcePodGroupPolicy:b", "EnforcePodGroupPolicy:a",
		"EnforcePodSpec:b", "EnforcePodSpec:a", "PreComponentBuilder:b", "PreComponentBuilder:a",
		"ComponentBuilder:b", "ComponentBuilder:a",
	}
	if diff := cmp.Diff(want, log); diff != "" {
		t.Errorf("call order (-want +got):\n%s", diff)
	}
	if len(objs) != 2 || objs[0].GetName() != "b" || objs[1].GetName() != "a" {
		t.Errorf("objects are not in builder order: %v", objs)
	}
	if diff := cmp.Diff([]string{"b", "a"}, fw.Plugins(pipeline.EnforceMLPolicy)); diff != "" {
		t.Errorf("Plugins(EnforceMLPolicy) (-want +got):\n%s", diff)
	}
}

func TestFirstErrorStopsBuildAndNamesThePlugin(t *testing.T) {
	var log []string
	fw, err := pipeline.New(context.Background(), registry(&recorder{name: "first", log: &log, fail: pipeline.EnforcePodSpec}, &recorder{name: "second", log: &log}), pipeline.OfflineHandle(pipeline.OperatorInfo{}))
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = fw.Build(context.Background(), pipelinetest.TrainJob(t, trainJobYAML), pipelinetest.Runtime(t, runtimeYAML), pipeline.BuildOptions{})
	var pe *pipeline.PluginError
	if !errors.As(err, &pe) || pe.Plugin != "first" || pe.Point != pipeline.EnforcePodSpec {
		t.Fatalf("err = %v, want a PluginError of plugin first at EnforcePodSpec", err)
	}
	if got, want := err.Error(), "EnforcePodSpec plugin first: boom"; got != want {
		t.Errorf("err = %q, want %q", got, want)
	}
	if last := log[len(log)-1]; last != "EnforcePodSpec:first" {
		t.Errorf("ran on after the error: last call %s", last)
	}
}

func TestTraceRecordsWhatEachPluginChanged(t *testing.T) {
	var log []string
	fw, err := pipeline.New(context.Background(), registry(&recorder{name: "env", log: &log, env: "FOO"}, &recorder{name: "quiet", log: &log}), pipeline.OfflineHandle(pipeline.OperatorInfo{}))
	if err != nil {
		t.Fatal(err)
	}
	tr := &pipeline.Trace{}
	if _, _, err := fw.Build(context.Background(), pipelinetest.TrainJob(t, trainJobYAML), pipelinetest.Runtime(t, runtimeYAML), pipeline.BuildOptions{Trace: tr}); err != nil {
		t.Fatal(err)
	}
	got := tr.ByPoint(pipeline.EnforceMLPolicy)
	want := []pipeline.Run{
		{Point: pipeline.EnforceMLPolicy, Plugin: "env", Changes: []pipeline.Change{{Where: "node/node", What: "env FOO=1"}}},
		{Point: pipeline.EnforceMLPolicy, Plugin: "quiet"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("trace (-want +got):\n%s", diff)
	}
	builds := tr.ByPoint(pipeline.ComponentBuilder)
	if len(builds) != 2 || len(builds[0].Objects) != 1 || builds[0].Objects[0] != "ConfigMap/env" {
		t.Errorf("ComponentBuilder runs = %+v, want objects recorded", builds)
	}
}

func TestNewRejectsBadRegistries(t *testing.T) {
	var log []string
	cases := []struct {
		name    string
		reg     pipeline.Registry
		wantErr string
	}{
		{"two status plugins", registry(statusOnly{"s1"}, statusOnly{"s2"}), "too many TrainJobStatus plugins are enabled: at most one computes the status"},
		{"same name twice", registry(&recorder{name: "x", log: &log}, &recorder{name: "x", log: &log}), `plugin "x" is registered twice`},
		{"factory error", pipeline.Registry{{Name: "bad", Factory: func(context.Context, pipeline.Handle) (pipeline.Plugin, error) {
			return nil, errors.New("no client")
		}}}, "plugin bad: no client"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := pipeline.New(context.Background(), tc.reg, pipeline.OfflineHandle(pipeline.OperatorInfo{}))
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// TestWithPlugins: the configuration enables, disables and orders plugins
// per extension point as a scheduler profile does.
func TestWithPlugins(t *testing.T) {
	var log []string
	reg := func() pipeline.Registry {
		return registry(&recorder{name: "a", log: &log}, &recorder{name: "b", log: &log}, &recorder{name: "c", log: &log}, statusOnly{"s"})
	}
	names := func(ps ...string) []pipeline.PluginRef {
		var out []pipeline.PluginRef
		for _, p := range ps {
			out = append(out, pipeline.PluginRef{Name: p})
		}
		return out
	}
	cases := []struct {
		name    string
		plugins pipeline.Plugins
		want    map[pipeline.ExtensionPoint][]string
	}{
		{
			name: "defaults: the registry's order",
			want: map[pipeline.ExtensionPoint][]string{pipeline.EnforcePodSpec: {"a", "b", "c"}, pipeline.ComponentBuilder: {"a", "b", "c"}, pipeline.TrainJobStatus: {"s"}},
		},
		{
			name:    "one disabled at one point only",
			plugins: pipeline.Plugins{EnforcePodSpec: pipeline.PluginSet{Disabled: names("b")}},
			want:    map[pipeline.ExtensionPoint][]string{pipeline.EnforcePodSpec: {"a", "c"}, pipeline.ComponentBuilder: {"a", "b", "c"}, pipeline.TrainJobStatus: {"s"}},
		},
		{
			name:    "all disabled, then enabled in a new order",
			plugins: pipeline.Plugins{ComponentBuilder: pipeline.PluginSet{Disabled: names("*"), Enabled: names("c", "a")}},
			want:    map[pipeline.ExtensionPoint][]string{pipeline.EnforcePodSpec: {"a", "b", "c"}, pipeline.ComponentBuilder: {"c", "a"}, pipeline.TrainJobStatus: {"s"}},
		},
		{
			name:    "a default enabled again keeps its place",
			plugins: pipeline.Plugins{EnforcePodSpec: pipeline.PluginSet{Enabled: names("a")}},
			want:    map[pipeline.ExtensionPoint][]string{pipeline.EnforcePodSpec: {"a", "b", "c"}, pipeline.ComponentBuilder: {"a", "b", "c"}, pipeline.TrainJobStatus: {"s"}},
		},
		{
			name:    "no status plugin",
			plugins: pipeline.Plugins{TrainJobStatus: pipeline.PluginSet{Disabled: names("s")}},
			want:    map[pipeline.ExtensionPoint][]string{pipeline.EnforcePodSpec: {"a", "b", "c"}, pipeline.ComponentBuilder: {"a", "b", "c"}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fw, err := pipeline.New(context.Background(), reg(), pipeline.OfflineHandle(pipeline.OperatorInfo{}), pipeline.WithPlugins(tc.plugins))
			if err != nil {
				t.Fatal(err)
			}
			got := map[pipeline.ExtensionPoint][]string{}
			for _, point := range []pipeline.ExtensionPoint{pipeline.EnforcePodSpec, pipeline.ComponentBuilder, pipeline.TrainJobStatus} {
				if names := fw.Plugins(point); names != nil {
					got[point] = names
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("plugins per point (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("the configured order is the order they run in", func(t *testing.T) {
		log = nil
		fw, err := pipeline.New(context.Background(), reg(), pipeline.OfflineHandle(pipeline.OperatorInfo{}),
			pipeline.WithPlugins(pipeline.Plugins{EnforcePodSpec: pipeline.PluginSet{Disabled: names("*"), Enabled: names("c", "a")}}))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fw.RuntimeInfo(context.Background(), pipelinetest.TrainJob(t, trainJobYAML), pipelinetest.Runtime(t, runtimeYAML), pipeline.BuildOptions{}); err != nil {
			t.Fatal(err)
		}
		var podSpec []string
		for _, l := range log {
			if strings.HasPrefix(l, string(pipeline.EnforcePodSpec)+":") {
				podSpec = append(podSpec, l)
			}
		}
		if diff := cmp.Diff([]string{"EnforcePodSpec:c", "EnforcePodSpec:a"}, podSpec); diff != "" {
			t.Errorf("EnforcePodSpec runs (-want +got):\n%s", diff)
		}
	})
}

func TestWithPluginsRejectsBadConfigurations(t *testing.T) {
	var log []string
	reg := registry(&recorder{name: "a", log: &log}, statusOnly{"s1"}, statusOnly{"s2"})
	cases := []struct {
		name    string
		plugins pipeline.Plugins
		wantErr string
	}{
		{"unknown plugin", pipeline.Plugins{EnforcePodSpec: pipeline.PluginSet{Enabled: []pipeline.PluginRef{{Name: "typo"}}}},
			`plugins.enforcePodSpec: plugin "typo" is not registered (is its feature gate off?)`},
		{"unknown plugin disabled", pipeline.Plugins{EnforcePodSpec: pipeline.PluginSet{Disabled: []pipeline.PluginRef{{Name: "typo"}}}},
			`plugins.enforcePodSpec: plugin "typo" is not registered (is its feature gate off?)`},
		{"plugin at a point it does not extend", pipeline.Plugins{CustomValidation: pipeline.PluginSet{Enabled: []pipeline.PluginRef{{Name: "a"}}}},
			"plugins.customValidation: plugin a does not extend CustomValidation"},
		{"enabled twice", pipeline.Plugins{EnforcePodSpec: pipeline.PluginSet{Disabled: []pipeline.PluginRef{{Name: "*"}}, Enabled: []pipeline.PluginRef{{Name: "a"}, {Name: "a"}}}},
			`plugins.enforcePodSpec: plugin "a" is enabled twice`},
		{"two status plugins", pipeline.Plugins{}, "too many TrainJobStatus plugins are enabled: at most one computes the status"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			plugins := tc.plugins
			if tc.name != "two status plugins" {
				plugins.TrainJobStatus = pipeline.PluginSet{Disabled: []pipeline.PluginRef{{Name: "s2"}}}
			}
			_, err := pipeline.New(context.Background(), reg, pipeline.OfflineHandle(pipeline.OperatorInfo{}), pipeline.WithPlugins(plugins))
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}
