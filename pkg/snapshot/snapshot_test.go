package snapshot

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/scheme"
)

func trainJob(runtimeKind string) *trainer.TrainJob {
	return &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: "alpha", Namespace: "ns", UID: "uid-1", Generation: 2},
		Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{
			Name: "torch", APIGroup: ptr.To(trainer.GroupVersion.Group), Kind: ptr.To(runtimeKind),
		}},
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	s := scheme.New()
	decoder := serializer.NewCodecFactory(s).UniversalDeserializer()
	for _, obj := range []pipeline.Runtime{
		{Object: &trainer.ClusterTrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "torch", ResourceVersion: "7",
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}}},
		{Object: &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "torch", Namespace: "ns"}}},
	} {
		rt, err := pipeline.RuntimeOf(obj.Object)
		if err != nil {
			t.Fatal(err)
		}
		tj := trainJob(rt.GroupKind().Kind)
		rt.Spec.MLPolicy = &trainer.MLPolicy{NumNodes: ptr.To[int32](3)}
		content, err := Encode(s, rt)
		if err != nil {
			t.Fatal(err)
		}
		cm := NewConfigMap(content, tj)
		if got := cm.Labels[pipeline.TrainJobNameLabel]; got != "alpha" || cm.Name != "alpha-runtime-snapshot" {
			t.Errorf("snapshot %s labelled %q, want alpha-runtime-snapshot labelled alpha", cm.Name, got)
		}
		if owner := metav1.GetControllerOf(cm); owner == nil || owner.UID != tj.UID || !ptr.Deref(owner.BlockOwnerDeletion, false) {
			t.Errorf("snapshot owner %+v, want the TrainJob as blocking controller", owner)
		}
		if strings.Contains(cm.Data[Key], "managedFields") {
			t.Errorf("snapshot keeps managed fields:\n%s", cm.Data[Key])
		}
		got, err := Decode(decoder, cm, tj)
		if err != nil {
			t.Fatalf("%s: %v", rt.GroupKind(), err)
		}
		if diff := cmp.Diff(rt.Spec, got.Spec); diff != "" {
			t.Errorf("%s spec after round trip (-want +got):\n%s", rt.GroupKind(), diff)
		}
	}
}

// TestEncodingCache: a runtime version is encoded once; another version,
// UID or kind is encoded again; a runtime without UID or resourceVersion
// every time; and the cache keeps at most VersionCacheSize versions.
func TestEncodingCache(t *testing.T) {
	c := &encodingCache{}
	calls := 0
	encode := func(obj client.Object) string {
		t.Helper()
		got, err := c.encode(obj, func() (string, error) { calls++; return fmt.Sprint("content ", calls), nil })
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	v7 := &trainer.ClusterTrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "torch", UID: "u", ResourceVersion: "7"}}
	first := encode(v7)
	if again := encode(v7.DeepCopy()); again != first || calls != 1 {
		t.Fatalf("the same version encoded %d times (%q, then %q), want once", calls, first, again)
	}
	v8 := v7.DeepCopy()
	v8.ResourceVersion = "8"
	otherUID := v7.DeepCopy()
	otherUID.UID = "w"
	otherKind := &trainer.TrainingRuntime{ObjectMeta: v7.ObjectMeta}
	for _, obj := range []client.Object{v8, otherUID, otherKind} {
		before := calls
		if got := encode(obj); got == first || calls != before+1 {
			t.Errorf("%T %s rv %s: %q after %d encodes, want a new encode", obj, obj.GetUID(), obj.GetResourceVersion(), got, calls-before)
		}
	}
	unversioned := &trainer.ClusterTrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "torch"}}
	before := calls
	encode(unversioned)
	encode(unversioned)
	if calls != before+2 {
		t.Errorf("a runtime without UID and resourceVersion was encoded %d times in 2 snapshots, want 2", calls-before)
	}
	for i := range 2 * VersionCacheSize {
		encode(&trainer.ClusterTrainingRuntime{ObjectMeta: metav1.ObjectMeta{UID: "u", ResourceVersion: fmt.Sprint(100 + i)}})
	}
	if n := c.encoded.Len(); n > VersionCacheSize {
		t.Errorf("keeps %d versions, want at most %d", n, VersionCacheSize)
	}
}

// snapshotFixture is a decoder, and a TrainJob with the snapshot of a
// ClusterTrainingRuntime it controls.
func snapshotFixture(t *testing.T) (runtime.Decoder, *corev1.ConfigMap, *trainer.TrainJob) {
	t.Helper()
	s := scheme.New()
	rt, _ := pipeline.RuntimeOf(&trainer.ClusterTrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "torch"}})
	tj := trainJob(trainer.ClusterTrainingRuntimeKind)
	content, err := Encode(s, rt)
	if err != nil {
		t.Fatal(err)
	}
	return serializer.NewCodecFactory(s).UniversalDeserializer(), NewConfigMap(content, tj), tj
}

// TestDecodeSnapshotNotControlled: a snapshot the TrainJob does not control
// (another TrainJob's, or nobody's) is not read.
func TestDecodeSnapshotNotControlled(t *testing.T) {
	decoder, earlier, tj := snapshotFixture(t)
	orphan := earlier.DeepCopy()
	orphan.OwnerReferences = nil
	now := tj.DeepCopy()
	now.UID = "uid-2"
	for _, tc := range []struct {
		name string
		cm   *corev1.ConfigMap
		want string
	}{
		{"an earlier TrainJob's", earlier, `ConfigMap ns/alpha-runtime-snapshot exists and is not controlled by TrainJob "alpha": its controller is an earlier TrainJob "alpha" (uid uid-1), not yet garbage-collected`},
		{"an orphan", orphan, `ConfigMap ns/alpha-runtime-snapshot exists and is not controlled by TrainJob "alpha": it has no controller`},
	} {
		_, err := Decode(decoder, tc.cm, now)
		var nc *pipeline.NotControlledError
		if !errors.As(err, &nc) || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want a NotControlledError starting %q", tc.name, err, tc.want)
		}
	}
}

func TestDecodeSnapshotErrors(t *testing.T) {
	decoder, good, tj := snapshotFixture(t)
	cases := []struct {
		name    string
		edit    func(*corev1.ConfigMap, *trainer.TrainJob)
		wantErr string
	}{
		{name: "no runtime key", edit: func(cm *corev1.ConfigMap, _ *trainer.TrainJob) { cm.Data = map[string]string{"x": ""} }, wantErr: `has no "runtime" key`},
		{name: "not YAML of an object", edit: func(cm *corev1.ConfigMap, _ *trainer.TrainJob) { cm.Data[Key] = "{{" }, wantErr: "invalid runtime snapshot: ConfigMap alpha-runtime-snapshot:"},
		{name: "not a runtime", edit: func(cm *corev1.ConfigMap, _ *trainer.TrainJob) {
			cm.Data[Key] = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: torch}\n"
		}, wantErr: "holds a ConfigMap, not a runtime"},
		{name: "other kind", edit: func(_ *corev1.ConfigMap, tj *trainer.TrainJob) {
			tj.Spec.RuntimeRef.Kind = ptr.To(trainer.TrainingRuntimeKind)
		},
			wantErr: `holds ClusterTrainingRuntime.trainer.kubeflow.org "torch", but the TrainJob references TrainingRuntime.trainer.kubeflow.org "torch"`},
		{name: "other name", edit: func(_ *corev1.ConfigMap, tj *trainer.TrainJob) { tj.Spec.RuntimeRef.Name = "jax" }, wantErr: `the TrainJob references ClusterTrainingRuntime.trainer.kubeflow.org "jax"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cm, tj := good.DeepCopy(), tj.DeepCopy()
			tc.edit(cm, tj)
			_, err := Decode(decoder, cm, tj)
			if err == nil || !strings.HasPrefix(err.Error(), "invalid runtime snapshot: ") || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want an invalid runtime snapshot error containing %q", err, tc.wantErr)
			}
		})
	}
}
