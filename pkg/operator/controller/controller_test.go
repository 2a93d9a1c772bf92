package controller

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator/runtimes"
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
		content, err := encodeSnapshot(s, rt)
		if err != nil {
			t.Fatal(err)
		}
		cm := newSnapshot(content, tj)
		if got := cm.Labels[TrainJobNameLabel]; got != "alpha" || cm.Name != "alpha-runtime-snapshot" {
			t.Errorf("snapshot %s labelled %q, want alpha-runtime-snapshot labelled alpha", cm.Name, got)
		}
		if owner := metav1.GetControllerOf(cm); owner == nil || owner.UID != tj.UID || !ptr.Deref(owner.BlockOwnerDeletion, false) {
			t.Errorf("snapshot owner %+v, want the TrainJob as blocking controller", owner)
		}
		if strings.Contains(cm.Data[runtimes.SnapshotKey], "managedFields") {
			t.Errorf("snapshot keeps managed fields:\n%s", cm.Data[runtimes.SnapshotKey])
		}
		got, err := runtimes.DecodeSnapshot(decoder, cm, tj)
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
// every time; and the cache keeps at most runtimes.MaxVersions versions.
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
	for i := range 2 * runtimes.MaxVersions {
		encode(&trainer.ClusterTrainingRuntime{ObjectMeta: metav1.ObjectMeta{UID: "u", ResourceVersion: fmt.Sprint(100 + i)}})
	}
	if n := c.encoded.Len(); n > runtimes.MaxVersions {
		t.Errorf("keeps %d versions, want at most %d", n, runtimes.MaxVersions)
	}
}

// TestOmitsAny: content leaves out a managed field when a map field, a list
// item by key, by value or by index, or anything below one, is missing.
func TestOmitsAny(t *testing.T) {
	content := map[string]any{
		"metadata": map[string]any{"labels": map[string]any{"a": "1"}},
		"spec": map[string]any{
			"replicatedJobs": []any{map[string]any{"name": "node", "replicas": int64(2)}},
			"finalizers":     []any{"x"},
			"args":           []any{"--a"},
		},
	}
	u := &unstructured.Unstructured{Object: content}
	for _, tc := range []struct {
		fields string
		want   bool
	}{
		{`{"f:metadata":{"f:labels":{".":{},"f:a":{}}}}`, false},
		{`{"f:metadata":{"f:labels":{"f:b":{}}}}`, true},
		{`{"f:spec":{"f:replicatedJobs":{"k:{\"name\":\"node\"}":{".":{},"f:replicas":{}}}}}`, false},
		{`{"f:spec":{"f:replicatedJobs":{"k:{\"name\":\"node\"}":{"f:parallelism":{}}}}}`, true},
		{`{"f:spec":{"f:replicatedJobs":{"k:{\"name\":\"launcher\"}":{}}}}`, true},
		{`{"f:spec":{"f:finalizers":{"v:\"x\"":{}}}}`, false},
		{`{"f:spec":{"f:finalizers":{"v:\"y\"":{}}}}`, true},
		{`{"f:spec":{"f:args":{"i:0":{}}}}`, false},
		{`{"f:spec":{"f:args":{"i:1":{}}}}`, true},
		{`{"f:status":{}}`, true},
	} {
		got, err := omitsAny(u, &metav1.FieldsV1{Raw: []byte(tc.fields)})
		if err != nil || got != tc.want {
			t.Errorf("omitsAny(%s) = %v, %v; want %v", tc.fields, got, err, tc.want)
		}
	}
	if _, err := omitsAny(u, &metav1.FieldsV1{Raw: []byte(`{"x":`)}); err == nil {
		t.Error("omitsAny of broken managed fields: no error")
	}
}

func TestDecodeSnapshotErrors(t *testing.T) {
	s := scheme.New()
	decoder := serializer.NewCodecFactory(s).UniversalDeserializer()
	rt, _ := pipeline.RuntimeOf(&trainer.ClusterTrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "torch"}})
	tj := trainJob(trainer.ClusterTrainingRuntimeKind)
	content, err := encodeSnapshot(s, rt)
	if err != nil {
		t.Fatal(err)
	}
	good := newSnapshot(content, tj)
	cases := []struct {
		name    string
		edit    func(*corev1.ConfigMap, *trainer.TrainJob)
		wantErr string
	}{
		{name: "owned by another TrainJob", edit: func(_ *corev1.ConfigMap, tj *trainer.TrainJob) { tj.UID = "other" }, wantErr: "is not controlled by TrainJob alpha (uid other)"},
		{name: "no owner", edit: func(cm *corev1.ConfigMap, _ *trainer.TrainJob) { cm.OwnerReferences = nil }, wantErr: "is not controlled by"},
		{name: "no runtime key", edit: func(cm *corev1.ConfigMap, _ *trainer.TrainJob) { cm.Data = map[string]string{"x": ""} }, wantErr: `has no "runtime" key`},
		{name: "not YAML of an object", edit: func(cm *corev1.ConfigMap, _ *trainer.TrainJob) { cm.Data[runtimes.SnapshotKey] = "{{" }, wantErr: "invalid runtime snapshot: ConfigMap alpha-runtime-snapshot:"},
		{name: "not a runtime", edit: func(cm *corev1.ConfigMap, _ *trainer.TrainJob) {
			cm.Data[runtimes.SnapshotKey] = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: torch}\n"
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
			_, err := runtimes.DecodeSnapshot(decoder, cm, tj)
			if err == nil || !strings.HasPrefix(err.Error(), "invalid runtime snapshot: ") || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want an invalid runtime snapshot error containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestApplyObject(t *testing.T) {
	s := scheme.New()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "alpha-mpi-hostfile", Namespace: "ns", Labels: map[string]string{"a": "b"}}}
	u, err := applyObject(s, cm, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "alpha-mpi-hostfile", "namespace": "ns",
			"labels": map[string]any{"a": "b", TrainJobNameLabel: "alpha"}},
	}
	if diff := cmp.Diff(want, u.Object); diff != "" {
		t.Errorf("ConfigMap (-want +got):\n%s", diff)
	}
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "alpha", Namespace: "ns"}}
	u, err = applyObject(s, js, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := u.Object["status"]; ok || u.GetLabels() != nil || u.GetKind() != "JobSet" || u.GetAPIVersion() != "jobset.x-k8s.io/v1alpha2" {
		t.Errorf("JobSet: %v; want apiVersion and kind, no status, no label", u.Object)
	}
}

func TestBuiltObject(t *testing.T) {
	s := scheme.New()
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "alpha", Namespace: "ns", Annotations: map[string]string{"a": "b"}},
		Spec: jobsetv1alpha2.JobSetSpec{Suspend: ptr.To(true)}}
	orig := js.DeepCopy()
	built, gvk, hash, err := builtObject(s, js, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(orig, js); diff != "" {
		t.Errorf("builtObject changed the object the Build phase returned (-before +after):\n%s", diff)
	}
	if gvk.Kind != "JobSet" || built.GetObjectKind().GroupVersionKind() != gvk {
		t.Errorf("kind %v, object kind %v; want JobSet on both", gvk, built.GetObjectKind().GroupVersionKind())
	}
	if want := map[string]string{"a": "b", AppliedHashAnnotation: hash}; !maps.Equal(built.GetAnnotations(), want) || len(hash) != 32 {
		t.Errorf("annotations %v, want %v (a 32-digit hash)", built.GetAnnotations(), want)
	}
	_, _, again, err := builtObject(s, js.DeepCopy(), "alpha")
	if err != nil || again != hash {
		t.Errorf("the same object hashed %q then %q (%v)", hash, again, err)
	}
	js.Spec.Suspend = ptr.To(false)
	if _, _, resumed, _ := builtObject(s, js, "alpha"); resumed == hash {
		t.Error("a resumed JobSet has the suspended one's hash")
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "alpha-mpi-hostfile", Namespace: "ns"}}
	builtCM, _, cmHash, err := builtObject(s, cm, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if builtCM.GetLabels()[TrainJobNameLabel] != "alpha" || cm.Labels != nil || cmHash == hash {
		t.Errorf("ConfigMap labels %v (the Build phase's %v), hash %q; want the TrainJob's name label on the copy only", builtCM.GetLabels(), cm.Labels, cmHash)
	}
}

func TestTransitions(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	tj := trainJob(trainer.ClusterTrainingRuntimeKind)
	tj.Spec.Suspend = ptr.To(true)
	tj.Status.Conditions = []metav1.Condition{
		{Type: trainer.TrainJobSuspended, Status: metav1.ConditionTrue, Reason: trainer.TrainJobSuspendedReason, Message: trainer.TrainJobSuspendedMessage},
		{Type: trainer.TrainJobComponentsCreated, Status: metav1.ConditionFalse, Reason: trainer.TrainJobJobsBuildFailedReason, Message: "old"},
	}
	u := newStatusUpdate(tj, now)
	setSuspended(u) // still suspended: no transition
	u.setCondition(trainer.TrainJobComponentsCreated, metav1.ConditionFalse, trainer.TrainJobJobsBuildFailedReason, "new message")
	if got := u.transitions(); len(got) != 0 {
		t.Errorf("a message change is not a transition; got %+v", got)
	}
	u.setCondition(trainer.TrainJobComponentsCreated, metav1.ConditionTrue, trainer.TrainJobJobsCreatedReason, ComponentsCreatedMessage)
	u.setCondition(trainer.TrainJobFailed, metav1.ConditionTrue, trainer.TrainJobDeadlineExceededReason, trainer.TrainJobDeadlineExceededMessage)
	want := []trainJobEvent{
		{Type: corev1.EventTypeNormal, Reason: trainer.TrainJobJobsCreatedReason, Action: trainer.TrainJobComponentsCreated, Note: ComponentsCreatedMessage},
		{Type: corev1.EventTypeWarning, Reason: trainer.TrainJobDeadlineExceededReason, Action: trainer.TrainJobFailed, Note: trainer.TrainJobDeadlineExceededMessage},
	}
	if diff := cmp.Diff(want, u.transitions()); diff != "" {
		t.Errorf("transitions (-want +got):\n%s", diff)
	}
	if !u.changed() {
		t.Error("status changed but changed() is false")
	}
	if c := u.tj.Status.Conditions[2]; c.ObservedGeneration != 2 || !c.LastTransitionTime.Equal(&now) {
		t.Errorf("new condition %+v, want generation 2 and transition time %v", c, now)
	}
}

func TestEventNote(t *testing.T) {
	if got := eventNote("short"); got != "short" {
		t.Errorf("eventNote(short) = %q", got)
	}
	got := eventNote(strings.Repeat("é", 600))
	if len(got) > 1024 || !strings.HasSuffix(got, " ...") || !strings.HasPrefix(got, "éé") || strings.ContainsRune(got, '\uFFFD') {
		t.Errorf("eventNote of a long message: %d bytes %q", len(got), got[len(got)-10:])
	}
}

func TestStageClock(t *testing.T) {
	c := &stageClock{seen: map[types.NamespacedName]stageSince{}}
	tj := trainJob(trainer.ClusterTrainingRuntimeKind)
	created := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	tj.CreationTimestamp = metav1.NewTime(created)
	c.observe(tj, created.Add(time.Second))
	key := types.NamespacedName{Namespace: "ns", Name: "alpha"}
	if got := c.seen[key]; got.stage != "Pending" || !got.since.Equal(created) {
		t.Errorf("first seen: %+v, want Pending since creation", got)
	}
	tj.Status.JobsStatus = []trainer.JobStatus{{Name: "node", Ready: ptr.To[int32](1), Active: ptr.To[int32](1)}}
	c.observe(tj, created.Add(time.Minute))
	if got := c.seen[key]; got.stage != "Training" || !got.since.Equal(created.Add(time.Minute)) {
		t.Errorf("after the JobSet runs: %+v, want Training since then", got)
	}
	c.forget(key)
	if _, ok := c.seen[key]; ok {
		t.Error("forget kept the TrainJob")
	}
}
