package controller

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator/apply"
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
		if got := cm.Labels[apply.TrainJobNameLabel]; got != "alpha" || cm.Name != "alpha-runtime-snapshot" {
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
// every time; and the cache keeps at most runtimes.VersionCacheSize versions.
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
	for i := range 2 * runtimes.VersionCacheSize {
		encode(&trainer.ClusterTrainingRuntime{ObjectMeta: metav1.ObjectMeta{UID: "u", ResourceVersion: fmt.Sprint(100 + i)}})
	}
	if n := c.encoded.Len(); n > runtimes.VersionCacheSize {
		t.Errorf("keeps %d versions, want at most %d", n, runtimes.VersionCacheSize)
	}
}

// snapshotFixture is a decoder, and a TrainJob with the snapshot of a
// ClusterTrainingRuntime it controls.
func snapshotFixture(t *testing.T) (runtime.Decoder, *corev1.ConfigMap, *trainer.TrainJob) {
	t.Helper()
	s := scheme.New()
	rt, _ := pipeline.RuntimeOf(&trainer.ClusterTrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "torch"}})
	tj := trainJob(trainer.ClusterTrainingRuntimeKind)
	content, err := encodeSnapshot(s, rt)
	if err != nil {
		t.Fatal(err)
	}
	return serializer.NewCodecFactory(s).UniversalDeserializer(), newSnapshot(content, tj), tj
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
		_, err := runtimes.DecodeSnapshot(decoder, tc.cm, now)
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

func TestTransitions(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	tj := trainJob(trainer.ClusterTrainingRuntimeKind)
	tj.Spec.Suspend = ptr.To(true)
	tj.Status.Conditions = []metav1.Condition{
		{Type: trainer.TrainJobSuspended, Status: metav1.ConditionTrue, Reason: trainer.TrainJobSuspendedReason, Message: trainer.TrainJobSuspendedMessage},
		{Type: trainer.TrainJobComponentsCreated, Status: metav1.ConditionFalse, Reason: trainer.TrainJobJobsBuildFailedReason, Message: "old"},
	}
	u := newStatusUpdate(tj, now)
	setSuspended(u, true) // still suspended: no transition
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

// TestRetryRateLimiter: the retries of a new leader's first reconciles (two
// for each of 500 TrainJobs, all at once) wait for no shared budget, and a
// TrainJob that fails again and again is retried within maxRetryDelay.
func TestRetryRateLimiter(t *testing.T) {
	limiter := retryRateLimiter()
	request := func(name string) reconcile.Request {
		return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}}
	}
	var latest time.Duration
	for range 2 {
		for i := range 500 {
			latest = max(latest, limiter.When(request(fmt.Sprintf("tj-%03d", i))))
		}
	}
	if latest > time.Second {
		t.Errorf("the last of 1000 retries of 500 TrainJobs waits %v, want at most a second", latest)
	}
	var delay time.Duration
	for range 30 {
		delay = limiter.When(request("failing"))
	}
	if delay > maxRetryDelay {
		t.Errorf("a TrainJob that failed 30 times is retried after %v, want at most %v", delay, maxRetryDelay)
	}
}
