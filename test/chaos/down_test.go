package chaos_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator/controller"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
)

// TestWhileDown (issue 36, item 4): what happened while no replica of the operator ran is read when one
// starts, before anything is built. Both replicas stop (the Deployment scaled to zero) with four TrainJobs
// running; meanwhile, on a runtime whose JobSets have a ttlSecondsAfterFinished, one's JobSet completes
// ("ended") and another's completes and is deleted, as its TTL would delete it ("deleted"); and the
// activeDeadlineSeconds of two others passes, one with its JobSet ("deadline"), one whose JobSet was deleted
// by hand on a runtime without a TTL ("deadline-gone", which a build would create again). Then the replicas
// start. The JobSets are watched from before the start until after barrier TrainJobs are built and the leader
// settles: none is created again or written, and the one past its deadline is deleted, of the UID it had.
// The finished TrainJobs are Complete or Failed, none Suspended, and a finished TrainJob's JobSet deleted by
// hand after its end is not created again either.
func TestWhileDown(t *testing.T) {
	ctx := t.Context()
	ns := cluster.NewNamespace(t, env.client, "chaos-", nil)
	rt := labelledRuntime(ns, "ttl")
	rt.Spec.Template.Spec.TTLSecondsAfterFinished = ptr.To[int32](3600)
	if err := env.client.Create(ctx, rt); err != nil {
		t.Fatal(err)
	}
	onTTLRuntime := func(tj *trainer.TrainJob) *trainer.TrainJob {
		tj.Spec.RuntimeRef = trainer.RuntimeRef{Name: rt.Name, Kind: ptr.To(trainer.TrainingRuntimeKind)}
		return tj
	}
	// The deadlines' clocks start at a resume, a condition's time the test can move: created suspended.
	pastDeadline := []*trainer.TrainJob{onTTLRuntime(trainJob(ns, "deadline", true)), trainJob(ns, "deadline-gone", true)}
	for _, tj := range pastDeadline {
		tj.Spec.ActiveDeadlineSeconds = 3600
	}
	for _, tj := range append([]*trainer.TrainJob{onTTLRuntime(trainJob(ns, "ended", false)), onTTLRuntime(trainJob(ns, "deleted", false))}, pastDeadline...) {
		if err := env.client.Create(ctx, tj); err != nil {
			t.Fatal(err)
		}
	}
	for _, tj := range pastDeadline {
		condition(t, ns, tj.Name, trainer.TrainJobSuspended, metav1.ConditionTrue, "")
		if err := env.client.Patch(ctx, tj, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"suspend":false}}`))); err != nil {
			t.Fatal(err)
		}
		condition(t, ns, tj.Name, trainer.TrainJobSuspended, metav1.ConditionFalse, trainer.TrainJobResumedReason)
	}
	uids := map[string]types.UID{}
	for _, name := range []string{"ended", "deleted", "deadline", "deadline-gone"} {
		condition(t, ns, name, trainer.TrainJobComponentsCreated, metav1.ConditionTrue, "")
		js := &jobsetv1alpha2.JobSet{}
		if err := env.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, js); err != nil {
			t.Fatal(err)
		}
		uids[name] = js.UID
	}

	if err := env.stack.StopReplicas(); err != nil {
		t.Fatal(err)
	}
	t.Log("every replica stopped")
	completed := func(s *jobsetv1alpha2.JobSetStatus) {
		s.Conditions = []metav1.Condition{{Type: string(jobsetv1alpha2.JobSetCompleted), Status: metav1.ConditionTrue,
			Reason: "AllJobsCompleted", Message: "jobset completed", LastTransitionTime: metav1.Now()}}
	}
	for _, name := range []string{"ended", "deleted"} {
		cluster.SetJobSetStatus(t, env.client, client.ObjectKey{Namespace: ns, Name: name}, waitTimeout, completed)
	}
	for _, name := range []string{"deleted", "deadline-gone"} {
		if err := env.client.Delete(ctx, &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	// The deadlines' hour passes: the resumes were two hours ago.
	for _, tj := range pastDeadline {
		cluster.Eventually(t, "move the resume of "+tj.Name+" back two hours", waitTimeout, func(ctx context.Context) error {
			if err := env.client.Get(ctx, client.ObjectKeyFromObject(tj), tj); err != nil {
				return err
			}
			meta.FindStatusCondition(tj.Status.Conditions, trainer.TrainJobSuspended).LastTransitionTime = metav1.NewTime(time.Now().Add(-2 * time.Hour))
			return env.client.Status().Update(ctx, tj)
		})
	}

	events := watchJobSets(t, ns)
	if n, err := env.stack.RestartExited(ctx); err != nil || n != replicas {
		t.Fatalf("start the replicas again: %d started, %v", n, err)
	}
	t.Log("every replica started again")
	// The replicas' first reconciles of the four TrainJobs were queued at the start, before the barrier's
	// creation: settled, they are over, and said what they had to.
	barrier(t, ns, "barrier")
	want := map[string]metav1.Condition{
		"ended":         {Type: trainer.TrainJobComplete, Reason: "AllJobsCompleted", Message: "jobset completed"},
		"deleted":       {Type: trainer.TrainJobFailed, Reason: controller.JobSetDeletedReason, Message: "JobSet " + ns + "/deleted was deleted before the TrainJob saw it end"},
		"deadline":      {Type: trainer.TrainJobFailed, Reason: trainer.TrainJobDeadlineExceededReason, Message: trainer.TrainJobDeadlineExceededMessage},
		"deadline-gone": {Type: trainer.TrainJobFailed, Reason: trainer.TrainJobDeadlineExceededReason, Message: trainer.TrainJobDeadlineExceededMessage},
	}
	for name, w := range want {
		tj := &trainer.TrainJob{}
		if err := env.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, tj); err != nil {
			t.Fatal(err)
		}
		c := meta.FindStatusCondition(tj.Status.Conditions, w.Type)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != w.Reason || !strings.HasPrefix(c.Message, w.Message) {
			t.Errorf("TrainJob %s: %s=True %s %q..., want it in %+v", name, w.Type, w.Reason, w.Message, tj.Status.Conditions)
		}
		if meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobSuspended) {
			t.Errorf("TrainJob %s is finished and Suspended: %+v", name, tj.Status.Conditions)
		}
	}
	// A finished TrainJob's JobSet deleted by hand is not created again either.
	if err := env.client.Delete(ctx, &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ended"}}); err != nil {
		t.Fatal(err)
	}
	barrier(t, ns, "barrier-2")

	for _, e := range events.stop(t) {
		js := e.Object.(*jobsetv1alpha2.JobSet)
		switch {
		case js.Name == "barrier" || js.Name == "barrier-2":
		case e.Type == watch.Deleted && js.UID == uids[js.Name] && (js.Name == "deadline" || js.Name == "ended"):
		case e.Type == watch.Added:
			t.Errorf("JobSet %s created again after the operator started (UID %s, was %s)", js.Name, js.UID, uids[js.Name])
		default:
			t.Errorf("JobSet %s %s after the operator started (UID %s, was %s), want only the deletions of deadline's and ended's",
				js.Name, e.Type, js.UID, uids[js.Name])
		}
	}
	for name := range want {
		if err := absent(ctx, client.ObjectKey{Namespace: ns, Name: name}); err != nil {
			t.Error(err)
		}
	}
}

// absent is nil when JobSet key is gone.
func absent(ctx context.Context, key client.ObjectKey) error {
	err := env.client.Get(ctx, key, &jobsetv1alpha2.JobSet{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return fmt.Errorf("JobSet %s is there (%v), want it gone", key, err)
}

// jobSetEvents collects the events of a watch of JobSets.
type jobSetEvents struct {
	ns     string
	w      watch.Interface
	mu     sync.Mutex
	events []watch.Event
	ended  bool
}

// watchJobSets watches the JobSets of ns from now on.
func watchJobSets(t *testing.T, ns string) *jobSetEvents {
	t.Helper()
	wc, err := client.NewWithWatch(env.stack.Cluster.Config, client.Options{Scheme: env.client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	list := &jobsetv1alpha2.JobSetList{}
	if err := env.client.List(t.Context(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(t.Context(), &jobsetv1alpha2.JobSetList{}, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
	if err != nil {
		t.Fatal(err)
	}
	e := &jobSetEvents{ns: ns, w: w}
	go func() {
		for ev := range w.ResultChan() {
			e.mu.Lock()
			e.events = append(e.events, ev)
			e.mu.Unlock()
		}
		e.mu.Lock()
		e.ended = true
		e.mu.Unlock()
	}()
	return e
}

// stop returns the events of the JobSets up to now and ends the watch. Now is a JobSet of the test's, "marker",
// created last: the watch sends events in the order of their writes, so every write before it has been seen
// once its creation is.
func (e *jobSetEvents) stop(t *testing.T) []watch.Event {
	t.Helper()
	defer e.w.Stop()
	marker := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "marker"}}
	marker.Spec.Suspend = ptr.To(true)
	marker.Spec.ReplicatedJobs = []jobsetv1alpha2.ReplicatedJob{{Name: "marker", Replicas: 1}}
	marker.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec = corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
		Containers: []corev1.Container{{Name: "marker", Image: "marker:v1"}}}
	if err := env.client.Create(t.Context(), marker); err != nil {
		t.Fatal(err)
	}
	var events []watch.Event
	cluster.Eventually(t, "the watch sees the marker JobSet", waitTimeout, func(context.Context) error {
		e.mu.Lock()
		defer e.mu.Unlock()
		for i, ev := range e.events {
			switch js, _ := ev.Object.(*jobsetv1alpha2.JobSet); {
			case ev.Type != watch.Added && ev.Type != watch.Modified && ev.Type != watch.Deleted:
				return fmt.Errorf("the watch of the JobSets passed on %s: %+v", ev.Type, ev.Object)
			case ev.Type == watch.Added && js.Name == marker.Name:
				events = e.events[:i]
				return nil
			}
		}
		if e.ended {
			return fmt.Errorf("the watch of the JobSets ended before the marker (%d events)", len(e.events))
		}
		return fmt.Errorf("%d events, none the marker's creation", len(e.events))
	})
	return events
}
