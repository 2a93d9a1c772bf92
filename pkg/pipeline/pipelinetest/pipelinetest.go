// Package pipelinetest has helpers for tests of the framework and its
// plugins: objects are written as YAML in the test, as a user would.
package pipelinetest

import (
	"testing"

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
		tj.UID = "uid-" + "0001"
	}
	return tj
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
