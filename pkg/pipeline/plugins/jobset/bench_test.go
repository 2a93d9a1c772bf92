package jobset

import (
	"context"
	"testing"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/pipelinetest"
)

const benchTrainJob = `
metadata: {name: bench}
spec:
  runtimeRef: {name: torch-with-initializers}
  initializer:
    dataset: {storageUri: "hf://tatsu-lab/alpaca"}
    model: {storageUri: "hf://meta-llama/Llama-3.2-1B"}
  trainer:
    numNodes: 64
    image: pytorch:v2
    command: [torchrun, train.py]
    env: [{name: TRAIN_JOB, value: "yes"}]
    resourcesPerNode: {limits: {nvidia.com/gpu: "8"}}`

// BenchmarkPreBuildSyncAndBuild measures the JobSet plugin's share of a
// build: RuntimeInfo from a torch runtime with both initializers, 64 nodes
// of 8 GPUs, then PreBuildSync and Build.
func BenchmarkPreBuildSyncAndBuild(b *testing.B) {
	tj := pipelinetest.TrainJob(b, benchTrainJob)
	rt := pipelinetest.Runtime(b, torchRuntime)
	p := cluster{offline: true}.plugin(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		info, err := pipeline.NewRuntimeInfo(tj, rt)
		if err != nil {
			b.Fatal(err)
		}
		info.TrainerPodSet().Count = 64
		if err := p.PreBuildSync(info, tj); err != nil {
			b.Fatal(err)
		}
		if _, err := p.Build(ctx, info, tj); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBuild measures Build alone.
func BenchmarkBuild(b *testing.B) {
	tj := pipelinetest.TrainJob(b, benchTrainJob)
	info := pipelinetest.Info(b, tj, pipelinetest.Runtime(b, torchRuntime))
	p := cluster{offline: true}.plugin(b)
	if err := p.PreBuildSync(info, tj); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Build(ctx, info, tj); err != nil {
			b.Fatal(err)
		}
	}
}
