package plugins_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/dryrun"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
)

// TestBuildRuntimeOfManyReplicatedJobs (issue 17, item 10): neither the
// JobSet API nor the runtimes' CRDs bound the number of replicated jobs
// (only the API server's request size does), so every ML policy and gang
// scheduler must give a bounded answer for a runtime of 1000 of them: the
// API server and the webhook's rules admit it, Build keeps checkBuilt's promises, and what it
// builds grows with the number of jobs, not faster (nothing per job lists
// all the others). `render` of such a runtime is tested in plugin/render.
func TestBuildRuntimeOfManyReplicatedJobs(t *testing.T) {
	fw := newFramework(t)
	ctx := context.Background()
	// A runtime of policy (fuzzRuntime's) with jobs replicated jobs: the
	// runtime's own, then copies of its trainer job.
	runtime := func(policy uint8, jobs int) *pipeline.Runtime {
		rt := fuzzRuntime(policy, policy%podGroupPolicies, false, 0)
		spec := &rt.Spec.Template.Spec
		last := spec.ReplicatedJobs[len(spec.ReplicatedJobs)-1]
		for i := len(spec.ReplicatedJobs); i < jobs; i++ {
			rj := last.DeepCopy()
			rj.Name = fmt.Sprintf("extra-%d", i)
			spec.ReplicatedJobs = append(spec.ReplicatedJobs, *rj)
		}
		return rt
	}
	crds, err := dryrun.NewSchema()
	if err != nil {
		t.Fatal(err)
	}
	if !admitted(ctx, crds, runtime(0, 1000).Object) {
		t.Fatal("the CRD's schema or CEL rules refuse a runtime of 1000 replicated jobs")
	}
	built := func(t *testing.T, policy uint8, jobs int) int {
		rt := runtime(policy, jobs)
		tj := fuzzTrainJob(fuzzInput{nodes: 2, nproc: 1, gpus: 1, cpuMilli: 1000, command: "train"})
		if _, errs := fw.Validate(ctx, rt, nil, tj); len(errs) > 0 {
			t.Fatalf("%d replicated jobs: the webhook refuses: %v", jobs, errs)
		}
		objs, _, err := fw.Build(ctx, tj, rt, pipeline.BuildOptions{})
		if err != nil {
			t.Fatalf("%d replicated jobs: %v", jobs, err)
		}
		for _, problem := range checkBuilt(tj, objs) {
			t.Errorf("%d replicated jobs: %s", jobs, problem)
		}
		var size int
		for _, obj := range objs {
			if js, ok := obj.(*jobsetv1alpha2.JobSet); ok && len(js.Spec.ReplicatedJobs) != jobs {
				t.Errorf("the JobSet has %d replicated jobs, want %d", len(js.Spec.ReplicatedJobs), jobs)
			}
			data, err := json.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			size += len(data)
		}
		return size
	}
	for _, policy := range []uint8{0, 1, 2, 3, 4, 5} {
		name := []string{"Torch", "MPI", "JAX", "XGBoost", "PlainML", "Flux"}[policy]
		t.Run(name, func(t *testing.T) {
			half, full := built(t, policy, 500), built(t, policy, 1000)
			// Twice the jobs, twice the output, give or take what is built
			// once per TrainJob.
			if full > 2*half+half/10 {
				t.Errorf("500 replicated jobs built %d bytes, 1000 built %d: more than twice as much", half, full)
			}
		})
	}
}
