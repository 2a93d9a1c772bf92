package snapshot

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/utils/ptr"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/scheme"
)

// FuzzDecodeSnapshot feeds Decode any bytes as a snapshot's content: anyone who may write ConfigMaps
// in the namespace can write them. Errors are fine; a panic is not, and a runtime it returns is the one the
// TrainJob references. `make fuzz` runs it; its seeds run in every `go test`.
func FuzzDecodeSnapshot(f *testing.F) {
	for _, seed := range []string{
		"apiVersion: trainer.kubeflow.org/v1alpha1\nkind: ClusterTrainingRuntime\nmetadata: {name: torch}\nspec: {template: {spec: {replicatedJobs: [{name: node}]}}}\n",
		"apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainingRuntime\nmetadata: {name: torch, namespace: team}\nspec: {mlPolicy: {numNodes: 2, torch: {}}}\n",
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"torch"}}`,
		"kind: [\n",
		"",
	} {
		f.Add(seed)
	}
	decoder := serializer.NewCodecFactory(scheme.New()).UniversalDeserializer()
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "alpha", UID: "uid-1"}}
	tj.Spec.RuntimeRef.Name = "torch"
	owner := []metav1.OwnerReference{{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind, Name: "alpha", UID: "uid-1", Controller: ptr.To(true)}}
	f.Fuzz(func(t *testing.T, content string) {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: Name(tj), OwnerReferences: owner},
			Data:       map[string]string{Key: content},
		}
		rt, err := Decode(decoder, cm, tj)
		if err != nil {
			return
		}
		if rt.Object.GetName() != "torch" || rt.GroupKind().Kind != trainer.ClusterTrainingRuntimeKind {
			t.Errorf("Decode returned %s %q for a TrainJob of ClusterTrainingRuntime torch", rt.GroupKind(), rt.Object.GetName())
		}
	})
}
