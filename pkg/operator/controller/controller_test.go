package controller

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator/metrics"
)

func trainJob(runtimeKind string) *trainer.TrainJob {
	return &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: "alpha", Namespace: "ns", UID: "uid-1", Generation: 2},
		Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{
			Name: "torch", APIGroup: ptr.To(trainer.GroupVersion.Group), Kind: ptr.To(runtimeKind),
		}},
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
	c := newStageClock(metrics.New())
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
