package list

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"

	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/config"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/dryrun"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
)

// examples are the copies of the reference examples (shared/reference/examples) that render's tests use.
const examples = "../render/testdata/examples"

// refused are the examples the webhook refuses as shipped; render's tests check their error.
var refused = map[string]bool{"trainjob-05-multi-step.yaml": true}

// TestGPUsAgreeWithRender: for every reference example, the GPUS cell of list is the number of GPUs the pods
// of the JobSet that render builds ask for.
func TestGPUsAgreeWithRender(t *testing.T) {
	ctx := context.Background()
	files, err := filepath.Glob(filepath.Join(examples, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	schema, err := dryrun.NewSchema()
	if err != nil {
		t.Fatal(err)
	}
	in := &dryrun.Inputs{}
	if err := (&dryrun.Loader{Schema: schema, Namespace: "default"}).Load(ctx, in, files...); err != nil {
		t.Fatal(err)
	}
	if len(in.TrainJobs) < 6 {
		t.Fatalf("%d TrainJobs in %s, want every example", len(in.TrainJobs), examples)
	}
	fw, err := dryrun.NewFramework(ctx, &config.Flags{}, nil, &dryrun.Inputs{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tj := range in.TrainJobs {
		file := filepath.Base(in.Sources[tj].File)
		t.Run(file, func(t *testing.T) {
			res, err := dryrun.Render(ctx, fw, tj, in.Runtimes, pipeline.BuildOptions{})
			if refused[file] {
				if err == nil {
					t.Fatal("render admitted an example the webhook refuses")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var js *jobsetv1alpha2.JobSet
			for _, o := range res.Objects {
				if j, ok := o.(*jobsetv1alpha2.JobSet); ok {
					js = j
				}
			}
			if js == nil {
				t.Fatal("render built no JobSet")
			}
			_, gpus, _ := cells(context.Background(), fw, nil, tj, res.Runtime)
			if want := strconv.FormatInt(jobSetGPUs(js), 10); gpus != want {
				t.Errorf("list shows GPUS %s, the JobSet render builds asks for %s", gpus, want)
			}
		})
	}
}

// jobSetGPUs is the number of GPUs all pods of js ask for.
func jobSetGPUs(js *jobsetv1alpha2.JobSet) int64 {
	var n int64
	for _, rj := range js.Spec.ReplicatedJobs {
		pods := int64(rj.Replicas) * int64(ptr.Deref(rj.Template.Spec.Parallelism, 1))
		n += pods * pipeline.PodGPUs(&rj.Template.Spec.Template.Spec, nil)
	}
	return n
}
