package snapshot

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/scheme"
)

type countingDecoder struct {
	runtime.Decoder
	calls int
}

func (d *countingDecoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	d.calls++
	return d.Decoder.Decode(data, defaults, into)
}

func runtimeYAML(name string) []byte {
	return fmt.Appendf(nil, `apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata: {name: %s, resourceVersion: "7"}
spec: {mlPolicy: {numNodes: 2}}
`, name)
}

func TestDecodingCache(t *testing.T) {
	inner := &countingDecoder{Decoder: serializer.NewCodecFactory(scheme.New()).UniversalDeserializer()}
	c := newDecodingCache(inner)

	first, gvk, err := c.Decode(runtimeYAML("torch"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if gvk.Kind != "ClusterTrainingRuntime" {
		t.Fatalf("kind %s", gvk.Kind)
	}
	// The caller may change what it got: the next decode is not affected.
	first.(*trainer.ClusterTrainingRuntime).Spec.MLPolicy.NumNodes = nil
	second, _, err := c.Decode(runtimeYAML("torch"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if inner.calls != 1 {
		t.Errorf("the same content decoded %d times, want once", inner.calls)
	}
	got := second.(*trainer.ClusterTrainingRuntime)
	if got.Name != "torch" || got.Spec.MLPolicy == nil || got.Spec.MLPolicy.NumNodes == nil || *got.Spec.MLPolicy.NumNodes != 2 {
		t.Errorf("second decode %+v: changed by the caller of the first", got.Spec)
	}
	third, _, _ := c.Decode(runtimeYAML("torch"), nil, nil)
	if third == second || !equality.Semantic.DeepEqual(third, second) {
		t.Error("each decode must be an equal copy of its own")
	}

	if _, _, err := c.Decode(runtimeYAML("mpi"), nil, nil); err != nil || inner.calls != 2 {
		t.Errorf("other content: %d decodes, %v; want a second decode", inner.calls, err)
	}
	if _, _, err := c.Decode(runtimeYAML("torch"), nil, &trainer.ClusterTrainingRuntime{}); err != nil || inner.calls != 3 {
		t.Errorf("a decode into an object is not cached: %d decodes, %v", inner.calls, err)
	}
	if _, _, err := c.Decode([]byte("{not yaml"), nil, nil); err == nil {
		t.Error("bad content decoded without error")
	}
	for i := range 2 * VersionCacheSize {
		if _, _, err := c.Decode(runtimeYAML(fmt.Sprintf("r%d", i)), nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.decoded.Len(); n > VersionCacheSize {
		t.Errorf("%d decoded runtimes kept, want at most %d", n, VersionCacheSize)
	}
}
