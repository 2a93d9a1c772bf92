package fit

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/gpuhealth"
)

// TestPlaceAvoidsSickGPUs: a node whose GPUs are sick takes no pod that asks for GPUs, and fit names it with
// the reason SickGPUs and the signs that say so; the pods go to the healthy nodes.
func TestPlaceAvoidsSickGPUs(t *testing.T) {
	sick := map[string]*gpuhealth.Sickness{"gpu-node-0": {Node: "gpu-node-0", Signs: []string{"taint nvidia.com/gpu-error=fatal:NoSchedule"}}}
	p := place([]PodSet{trainerPods(4, eightGPUs, nil)}, nodes(), nil, nil, sick)
	if p.total != 3 {
		t.Errorf("%d of 4 pods placed, want 3: gpu-node-0's GPUs are sick", p.total)
	}
	var placedOn []string
	for _, pl := range p.placed[0] {
		placedOn = append(placedOn, pl.Node)
	}
	if diff := cmp.Diff([]string{"gpu-node-1", "gpu-node-2", "gpu-node-3"}, placedOn); diff != "" {
		t.Errorf("nodes of the placed pods (-want +got):\n%s", diff)
	}
	var found bool
	for _, b := range p.blocked[0] {
		if b.Reason == ReasonSickGPUs {
			found = true
			if diff := cmp.Diff([]string{"gpu-node-0"}, b.Nodes); diff != "" {
				t.Errorf("nodes blocked for sick GPUs (-want +got):\n%s", diff)
			}
			if want := "gpu-node-0 has sick GPUs: taint nvidia.com/gpu-error=fatal:NoSchedule"; b.Message != want {
				t.Errorf("message %q, want %q", b.Message, want)
			}
		}
	}
	if !found {
		t.Errorf("no blocker with reason %s in %+v", ReasonSickGPUs, p.blocked[0])
	}
}
