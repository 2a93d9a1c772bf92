package list

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/dryrun"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
)

// clusterRuntime is the ClusterTrainingRuntime "cluster" of runtimeSpec(nodes, gpus), as read at resourceVersion
// version.
func clusterRuntime(t testing.TB, version string, nodes int32, gpus string) *pipeline.Runtime {
	t.Helper()
	rt, err := pipeline.RuntimeOf(&trainer.ClusterTrainingRuntime{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster", UID: "uid-cluster", ResourceVersion: version}, Spec: runtimeSpec(nodes, gpus)})
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// TestSizedOncePerSpecAndRuntime: TrainJobs of the same spec on the same runtime are sized once, whatever their
// names; another spec, namespace or version of the runtime is sized again, so a runtime changed changes the
// cells.
func TestSizedOncePerSpecAndRuntime(t *testing.T) {
	ctx := context.Background()
	defaults := inTreeRuntimeDefaults(t)
	v1, v2 := clusterRuntime(t, "10", 2, "4"), clusterRuntime(t, "11", 2, "8")
	onThree := func(tj *trainer.TrainJob) { tj.Spec.Trainer = &trainer.Trainer{NumNodes: ptr.To[int32](3)} }
	inOther := func(tj *trainer.TrainJob) { tj.Namespace = "other" }
	for _, step := range []struct {
		name       string
		tj         trainer.TrainJob
		rt         *pipeline.Runtime
		nodes      string
		gpus       string
		sizedSpecs int
	}{
		{"first", trainJob("a", trainer.ClusterTrainingRuntimeKind, "cluster", nil), v1, "2", "8", 1},
		{"same spec, another name", trainJob("b", trainer.ClusterTrainingRuntimeKind, "cluster", nil), v1, "2", "8", 1},
		{"another spec", trainJob("c", trainer.ClusterTrainingRuntimeKind, "cluster", onThree), v1, "3", "12", 2},
		{"another namespace", trainJob("d", trainer.ClusterTrainingRuntimeKind, "cluster", inOther), v1, "2", "8", 3},
		{"the runtime changed", trainJob("a", trainer.ClusterTrainingRuntimeKind, "cluster", nil), v2, "2", "16", 4},
		{"the runtime changed, another spec", trainJob("c", trainer.ClusterTrainingRuntimeKind, "cluster", onThree), v2, "3", "24", 5},
	} {
		nodes, gpus := defaults.size(ctx, &step.tj, step.rt)
		if diff := cmp.Diff([]string{step.nodes, step.gpus}, []string{nodes, gpus}); diff != "" {
			t.Errorf("%s: NODES, GPUS (-want +got):\n%s", step.name, diff)
		}
		if got := len(defaults.sized); got != step.sizedSpecs {
			t.Errorf("%s: %d specs sized, want %d", step.name, got, step.sizedSpecs)
		}
	}
}

// BenchmarkSize10000TrainJobs sizes 10 000 TrainJobs of two specs (every other one suspended) on the reference
// torch-distributed runtime, as the dashboard makes its rows when it starts (make bench-scale's TrainJobs).
func BenchmarkSize10000TrainJobs(b *testing.B) {
	ctx := context.Background()
	schema, err := dryrun.NewSchema()
	if err != nil {
		b.Fatal(err)
	}
	in := &dryrun.Inputs{}
	if err := (&dryrun.Loader{Schema: schema}).Load(ctx, in, filepath.Join(examples, "cluster-runtime-torch-distributed.yaml")); err != nil {
		b.Fatal(err)
	}
	rt := in.Runtimes[0]
	tjs := make([]trainer.TrainJob, 10000)
	for i := range tjs {
		tjs[i] = trainJob(fmt.Sprintf("tj-%04d", i), trainer.ClusterTrainingRuntimeKind, rt.Object.GetName(), func(tj *trainer.TrainJob) {
			tj.Spec.Trainer = &trainer.Trainer{NumNodes: ptr.To[int32](1)}
			if i%2 == 1 {
				tj.Spec.Suspend = ptr.To(true)
			}
		})
	}
	b.ReportAllocs()
	for b.Loop() {
		defaults := inTreeRuntimeDefaults(b)
		for i := range tjs {
			if _, gpus := defaults.size(ctx, &tjs[i], rt); gpus == "-" {
				b.Fatalf("%s: GPUS unknown", tjs[i].Name)
			}
		}
	}
}
