package create

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
)

func TestParseResources(t *testing.T) {
	tests := []struct {
		name  string
		value string
		want  corev1.ResourceList
		err   string
	}{
		{name: "empty", value: ""},
		{name: "cpu, memory and GPUs", value: "cpu=4, memory=16Gi,nvidia.com/gpu=8", want: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"), "nvidia.com/gpu": resource.MustParse("8")}},
		{name: "not a quantity", value: "cpu=four",
			err: `invalid --resources-per-node "cpu=four": cpu=four: "four" is not a quantity; write it as --resources-per-node cpu=4,memory=16Gi,nvidia.com/gpu=8`},
		{name: "no value", value: "cpu=",
			err: `invalid --resources-per-node "cpu=": "cpu=" is not NAME=QUANTITY; write it as --resources-per-node cpu=4,memory=16Gi,nvidia.com/gpu=8`},
		{name: "twice", value: "cpu=1,cpu=2",
			err: `invalid --resources-per-node "cpu=1,cpu=2": cpu is given twice; write it as --resources-per-node cpu=4,memory=16Gi,nvidia.com/gpu=8`},
		{name: "negative", value: "memory=-1Gi",
			err: `invalid --resources-per-node "memory=-1Gi": memory=-1Gi is negative; write it as --resources-per-node cpu=4,memory=16Gi,nvidia.com/gpu=8`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseResources(tc.value)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("error = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestRuntimeRef(t *testing.T) {
	tests := []struct {
		value string
		want  trainer.RuntimeRef
		err   string
	}{
		{value: "torch-distributed", want: ref("torch-distributed", trainer.ClusterTrainingRuntimeKind)},
		{value: "trainingruntime/mine", want: ref("mine", trainer.TrainingRuntimeKind)},
		{value: "TrainingRuntimes/mine", want: ref("mine", trainer.TrainingRuntimeKind)},
		{value: "clustertrainingruntime/theirs", want: ref("theirs", trainer.ClusterTrainingRuntimeKind)},
		{value: "deployment/x", err: `invalid --runtime "deployment/x": use NAME (a ClusterTrainingRuntime) or trainingruntime/NAME`},
	}
	for _, tc := range tests {
		t.Run(tc.value, func(t *testing.T) {
			got, err := runtimeRef(tc.value)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("error = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func ref(name, kind string) trainer.RuntimeRef {
	return trainer.RuntimeRef{Name: name, APIGroup: ptr.To(trainer.GroupVersion.Group), Kind: ptr.To(kind)}
}

// TestTrainerOnlyWhenSet: a TrainJob from --runtime alone leaves spec.trainer out, so the runtime decides.
func TestTrainerOnlyWhenSet(t *testing.T) {
	tj, err := (&spec{name: "x", namespace: "ns", runtime: "torch"}).trainJob()
	if err != nil {
		t.Fatal(err)
	}
	if tj.Spec.Trainer != nil || tj.Spec.Initializer != nil || tj.Spec.Suspend != nil || tj.Labels != nil {
		t.Errorf("spec = %+v, want only runtimeRef", tj.Spec)
	}
}

// TestTopologyFlag: --topology is refused before anything is read when its kind is neither required nor
// preferred, when it names no level, or without --queue.
func TestTopologyFlag(t *testing.T) {
	tests := []struct {
		name, topology, queue, err string
	}{
		{name: "a level", topology: "rack", queue: "gpu-tas"},
		{name: "preferred", topology: "cloud.provider.com/topology-rack:preferred", queue: "gpu-tas"},
		{name: "another kind", topology: "rack:strict", queue: "gpu-tas",
			err: `invalid --topology "rack:strict": "strict" is neither required nor preferred; write LEVEL, LEVEL:required or LEVEL:preferred, e.g. --topology rack:preferred`},
		{name: "no level", topology: ":preferred", queue: "gpu-tas",
			err: `invalid --topology ":preferred": name a level, e.g. --topology rack or --topology rack:preferred`},
		{name: "no queue", topology: "rack",
			err: "--topology rack asks Kueue to place the pods: give --queue too (a LocalQueue whose ClusterQueue has a ResourceFlavor with a Topology)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &spec{name: "llama", runtime: "torch-distributed", topology: tc.topology, queue: tc.queue}
			_, err := s.trainJob()
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.err {
				t.Errorf("error = %q, want %q", got, tc.err)
			}
		})
	}
}
