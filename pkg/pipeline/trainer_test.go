package pipeline_test

import (
	"testing"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/pipelinetest"
)

func TestSizeTrainer(t *testing.T) {
	cases := map[string]struct {
		job, container string
		trainer        string // spec.trainer as a flow mapping, "" for none
		wantCount      int32
		wantContainer  bool
	}{
		"numNodes sizes the trainer step":               {trainer: "{numNodes: 4}", wantCount: 4, wantContainer: true},
		"without numNodes the runtime's count stays":    {trainer: "{image: custom}", wantCount: 2, wantContainer: true},
		"without spec.trainer no container is returned": {wantCount: 2},
		"a trainer step without a node container":       {container: "main", trainer: "{numNodes: 3}", wantCount: 3},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			doc := "{metadata: {name: alpha}, spec: {runtimeRef: {name: plain}}}"
			if tc.trainer != "" {
				doc = "{metadata: {name: alpha}, spec: {runtimeRef: {name: plain}, trainer: " + tc.trainer + "}}"
			}
			tj := pipelinetest.TrainJob(t, doc)
			container := "node"
			if tc.container != "" {
				container = tc.container
			}
			rt := pipelinetest.TrainerRuntime{Name: "plain", MLPolicy: "{numNodes: 2}", Pod: "{containers: [{name: " + container + ", image: app:v1}]}"}
			info := pipelinetest.Info(t, tj, rt.Runtime(t))
			ps, c := info.SizeTrainer(tj)
			if ps != info.TrainerPodSet() || ps.Count != tc.wantCount {
				t.Errorf("pod set %v of count %d, want the trainer's of count %d", ps, ps.Count, tc.wantCount)
			}
			if (c != nil) != tc.wantContainer || (c != nil && c != ps.Container("node")) {
				t.Errorf("container = %v, want the node container: %v", c, tc.wantContainer)
			}
		})
	}
}

func TestSizeTrainerWithoutTrainerStep(t *testing.T) {
	tj := pipelinetest.TrainJob(t, "{metadata: {name: alpha}, spec: {runtimeRef: {name: plain}, trainer: {numNodes: 4}}}")
	rt := pipelinetest.TrainerRuntime{Name: "plain", Step: "dataset-initializer", Pod: "{containers: [{name: node, image: app:v1}]}"}
	info := pipelinetest.Info(t, tj, rt.Runtime(t))
	if ps, c := info.SizeTrainer(tj); ps != nil || c != nil || info.PodSets[0].Count != 1 {
		t.Errorf("SizeTrainer = %v, %v and count %d, want nothing sized", ps, c, info.PodSets[0].Count)
	}
}
