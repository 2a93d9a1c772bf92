// Package pipelinetest has helpers for tests of the framework and its
// plugins: objects are written as YAML in the test, as a user would.
package pipelinetest

import (
	"cmp"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
)

// Decode strictly decodes YAML (unknown fields fail the test) into a new T.
func Decode[T any](t testing.TB, doc string) *T {
	t.Helper()
	out := new(T)
	if err := yaml.UnmarshalStrict([]byte(doc), out); err != nil {
		t.Fatalf("decode %T: %v\n%s", out, err, doc)
	}
	return out
}

// TrainJob decodes a TrainJob, defaulting namespace "default" and UID.
func TrainJob(t testing.TB, doc string) *trainer.TrainJob {
	t.Helper()
	tj := Decode[trainer.TrainJob](t, doc)
	if tj.Namespace == "" {
		tj.Namespace = "default"
	}
	if tj.UID == "" {
		tj.UID = "uid-0001"
	}
	return tj
}

// ControlledBy is the owner references of an object that the TrainJob
// named name, with TrainJob's default UID, controls.
func ControlledBy(name string) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind, Name: name,
		UID: "uid-0001", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
}

// Runtime decodes a TrainingRuntime or ClusterTrainingRuntime (by its kind).
func Runtime(t testing.TB, doc string) *pipeline.Runtime {
	t.Helper()
	var tm struct {
		Kind string `json:"kind"`
	}
	if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
		t.Fatal(err)
	}
	var obj client.Object
	if tm.Kind == trainer.TrainingRuntimeKind {
		obj = Decode[trainer.TrainingRuntime](t, doc)
	} else {
		obj = Decode[trainer.ClusterTrainingRuntime](t, doc)
	}
	rt, err := pipeline.RuntimeOf(obj)
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// Info builds the RuntimeInfo of a TrainJob and runtime, failing the test on error.
func Info(t testing.TB, tj *trainer.TrainJob, rt *pipeline.Runtime) *pipeline.RuntimeInfo {
	t.Helper()
	info, err := pipeline.NewRuntimeInfo(tj, rt)
	if err != nil {
		t.Fatalf("NewRuntimeInfo: %v", err)
	}
	return info
}

// TrainerRuntime is a ClusterTrainingRuntime whose one replicated job is
// the trainer step (unless Step says otherwise), the shape of most shipped
// runtimes. The fields are YAML
// flow style; empty ones are left out.
type TrainerRuntime struct {
	Name     string // the runtime's name
	MLPolicy string // e.g. {numNodes: 2, torch: {}}
	Network  string // the JobSet's network, e.g. {subdomain: workers}
	Job      string // the replicated job's name; `node` when empty
	Step     string // the job's trainjob-ancestor-step; `trainer` when empty
	Pod      string // the job's pod spec, e.g. {containers: [{name: node, image: app:v1}]}
}

// YAML is the runtime as a user would write it.
func (r TrainerRuntime) YAML() string {
	var b strings.Builder
	b.WriteString("apiVersion: trainer.kubeflow.org/v1alpha1\nkind: ClusterTrainingRuntime\nmetadata: {name: " + r.Name + "}\nspec:\n")
	if r.MLPolicy != "" {
		b.WriteString("  mlPolicy: " + r.MLPolicy + "\n")
	}
	b.WriteString("  template:\n    spec:\n")
	if r.Network != "" {
		b.WriteString("      network: " + r.Network + "\n")
	}
	job := cmp.Or(r.Job, trainer.Node)
	b.WriteString(`      replicatedJobs:
      - name: ` + job + `
        template:
          metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: ` + cmp.Or(r.Step, trainer.AncestorTrainer) + `}}
          spec: {template: {spec: ` + r.Pod + `}}
`)
	return b.String()
}

// Runtime decodes the runtime, failing the test on error.
func (r TrainerRuntime) Runtime(t testing.TB) *pipeline.Runtime {
	t.Helper()
	return Runtime(t, r.YAML())
}

// TrainJobOn is the TrainJob alpha (see TrainJob) of the runtime named
// runtime, with spec.trainer given as a YAML flow mapping ("" for none).
func TrainJobOn(t testing.TB, runtime, trainerSpec string) *trainer.TrainJob {
	t.Helper()
	doc := "metadata: {name: alpha}\nspec:\n  runtimeRef: {name: " + runtime + "}\n"
	if trainerSpec != "" {
		doc += "  trainer: " + trainerSpec + "\n"
	}
	return TrainJob(t, doc)
}
