package admission

import (
	"context"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/pipelinetest"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/plugins"
)

// TestAdmitName: a TrainJob whose name leaves no room for the names JobSet derives from it is refused, with the
// limit for its runtime and node count; the longest name is that of the last pod, `<name>-node-0-<last
// index>-<5 random characters>`, which JobSet's webhook holds to 63 characters.
func TestAdmitName(t *testing.T) {
	fw, err := plugins.NewFramework(context.Background(), plugins.Config{}, pipeline.OfflineHandle(pipeline.OperatorInfo{}))
	if err != nil {
		t.Fatal(err)
	}
	rt := pipelinetest.TrainerRuntime{Name: "torch", MLPolicy: "{numNodes: 1, torch: {}}", Pod: "{containers: [{name: node, image: app:v1}]}"}.Runtime(t)
	resolver := ResolverFunc(func(context.Context, *trainer.TrainJob, *trainer.TrainJob) (*pipeline.Runtime, error) { return rt, nil })
	for _, tc := range []struct {
		name    string
		length  int
		nodes   int32
		wantErr string
	}{
		{name: "48 characters, 10 nodes: pod <name>-node-0-9-abcde has 63", length: 48, nodes: 10},
		{name: "48 characters, 11 nodes: pod <name>-node-0-10-abcde would have 64", length: 48, nodes: 11,
			wantErr: `must be no more than 47 characters with runtime "torch", and is 48: the longest name JobSet derives from it, pod "` + strings.Repeat("a", 48) + `-node-0-10-abcde", must be no more than 63 characters; shorten the name by 1`},
		{name: "63 characters, 1 node", length: 63, nodes: 1,
			wantErr: `must be no more than 48 characters with runtime "torch", and is 63: the longest name JobSet derives from it, pod "` + strings.Repeat("a", 63) + `-node-0-0-abcde", must be no more than 63 characters; shorten the name by 15`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tj := pipelinetest.TrainJobOn(t, "torch", "")
			tj.Name = strings.Repeat("a", tc.length)
			tj.Spec.Trainer = &trainer.Trainer{NumNodes: ptr.To(tc.nodes)}
			_, err := Admit(context.Background(), fw, resolver, nil, tj)
			want := ""
			if tc.wantErr != "" {
				want = `metadata.name: Invalid value: "` + tj.Name + `": ` + tc.wantErr
			}
			if got := errString(err); got != want {
				t.Errorf("Admit: %s\nwant: %s", got, want)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestAdmitPodCount: a TrainJob that asks for more pods of a replicated job than Kubernetes runs in an Indexed Job
// (100 000) is refused at admission, naming the field and the limit: admitted, an MPI TrainJob of numNodes
// 2 000 000 000 had the operator write a hostfile of two billion lines, and every other one failed at JobSet's
// Jobs after it was stored.
func TestAdmitPodCount(t *testing.T) {
	fw, err := plugins.NewFramework(context.Background(), plugins.Config{}, pipeline.OfflineHandle(pipeline.OperatorInfo{}))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		runtime  string
		nodes    *int32
		wantPath string
		wantErr  string
	}{
		{name: "100 000 nodes", runtime: "{numNodes: 1, torch: {}}", nodes: ptr.To[int32](100000)},
		{name: "100 001 nodes", runtime: "{numNodes: 1, torch: {}}", nodes: ptr.To[int32](100001), wantPath: "spec.trainer.numNodes",
			wantErr: `Invalid value: 100001: must be no more than 100000: Kubernetes runs at most 100000 pods of an Indexed Job, and the replicated job "node" would have 100001`},
		{name: "2 000 000 000 nodes", runtime: "{numNodes: 1, torch: {}}", nodes: ptr.To[int32](2000000000), wantPath: "spec.trainer.numNodes",
			wantErr: `Invalid value: 2000000000: must be no more than 100000: Kubernetes runs at most 100000 pods of an Indexed Job, and the replicated job "node" would have 2000000000`},
		{name: "the runtime's numNodes, unset in the TrainJob", runtime: "{numNodes: 200000, torch: {}}", wantPath: "spec.trainer.numNodes",
			wantErr: `Invalid value: 200000: must be no more than 100000: Kubernetes runs at most 100000 pods of an Indexed Job, and the replicated job "node" would have 200000 (runtime "torch"'s numNodes: set spec.trainer.numNodes)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := pipelinetest.TrainerRuntime{Name: "torch", MLPolicy: tc.runtime, Pod: "{containers: [{name: node, image: app:v1}]}"}.Runtime(t)
			resolver := ResolverFunc(func(context.Context, *trainer.TrainJob, *trainer.TrainJob) (*pipeline.Runtime, error) { return rt, nil })
			tj := pipelinetest.TrainJobOn(t, "torch", "")
			tj.Name = "a"
			if tc.nodes != nil {
				tj.Spec.Trainer = &trainer.Trainer{NumNodes: tc.nodes}
			}
			_, err := Admit(context.Background(), fw, resolver, nil, tj)
			want := ""
			if tc.wantErr != "" {
				want = tc.wantPath + ": " + tc.wantErr
			}
			if got := errString(err); got != want {
				t.Errorf("Admit: %s\nwant: %s", got, want)
			}
		})
	}
}
