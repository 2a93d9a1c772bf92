package metrics

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache/informertest"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/scheme"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/stage"
)

// byStage collects the trainjobs gauge: its value by stage, or the collection's error.
func byStage() (map[string]float64, error) {
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(trainJobs); err != nil {
		return nil, err
	}
	families, err := reg.Gather()
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, mf := range families {
		for _, m := range mf.GetMetric() {
			out[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
		}
	}
	return out, nil
}

func trainJob(name string, edit func(*trainer.TrainJob)) *trainer.TrainJob {
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
	edit(tj)
	return tj
}

func done(typ string) func(*trainer.TrainJob) {
	return func(tj *trainer.TrainJob) {
		tj.Status.Conditions = []metav1.Condition{{Type: typ, Status: metav1.ConditionTrue, Reason: "Test", LastTransitionTime: metav1.Now()}}
	}
}

// TestTrainJobsByStage: the gauge counts the TrainJobs of the informer, by stage, every stage present, as they
// are added, change stage and are deleted; nothing while no informer is served (a replica
// that does not lead).
func TestTrainJobsByStage(t *testing.T) {
	informers := &informertest.FakeInformers{Scheme: scheme.New()}
	informer, err := informers.FakeInformerFor(t.Context(), &trainer.TrainJob{})
	if err != nil {
		t.Fatal(err)
	}
	samples := func() map[string]float64 {
		t.Helper()
		got, err := byStage()
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := samples(); len(got) != 0 {
		t.Fatalf("%v before an informer is served, want nothing", got)
	}
	ctx, cancel := context.WithCancel(t.Context())
	stopped := make(chan error, 1)
	go func() { stopped <- ServeTrainJobs(ctx, informers) }()
	// ServeTrainJobs adds its handler, then blocks: wait until the gauge reports.
	err = wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		got, err := byStage()
		return err != nil || len(got) > 0, nil
	})
	if err != nil {
		t.Fatalf("ServeTrainJobs serves nothing: %v", err)
	}

	pending := trainJob("pending", func(*trainer.TrainJob) {})
	training := trainJob("training", func(tj *trainer.TrainJob) {
		tj.Status.JobsStatus = []trainer.JobStatus{{Name: trainer.Node, Ready: ptr.To[int32](2)}}
	})
	for _, tj := range []*trainer.TrainJob{
		pending,
		trainJob("suspended", func(tj *trainer.TrainJob) { tj.Spec.Suspend = ptr.To(true) }),
		training,
		trainJob("initializing", func(tj *trainer.TrainJob) {
			tj.Status.JobsStatus = []trainer.JobStatus{{Name: "dataset-initializer", Ready: ptr.To[int32](1)}, {Name: trainer.Node}}
		}),
		trainJob("complete-1", done(trainer.TrainJobComplete)),
		trainJob("complete-2", done(trainer.TrainJobComplete)),
	} {
		informer.Add(tj)
	}
	want := map[string]float64{"Pending": 1, "Suspended": 1, "Initializing": 1, "Training": 1, "Complete": 2, "Failed": 0}
	if diff := cmp.Diff(want, samples()); diff != "" {
		t.Errorf("trainjobs by stage (-want +got):\n%s", diff)
	}

	failed := training.DeepCopy()
	done(trainer.TrainJobFailed)(failed)
	informer.Update(training, failed)
	informer.Delete(pending)
	want = map[string]float64{"Pending": 0, "Suspended": 1, "Initializing": 1, "Training": 0, "Complete": 2, "Failed": 1}
	if diff := cmp.Diff(want, samples()); diff != "" {
		t.Errorf("trainjobs by stage after one failed and one was deleted (-want +got):\n%s", diff)
	}

	cancel()
	if err := <-stopped; err != nil {
		t.Errorf("ServeTrainJobs: %v", err)
	}
	if got := samples(); len(got) != 0 {
		t.Errorf("%v once the informer is no longer served, want nothing", got)
	}
}

// TestStageCountsTombstone: a TrainJob whose delete the informer learnt of only by listing again (a tombstone)
// leaves its stage's count, as a plain delete does; FakeInformer delivers no tombstones, so the handler is called
// directly.
func TestStageCountsTombstone(t *testing.T) {
	c := &stageCounts{counts: map[stage.Stage]int{}}
	h := c.handler()
	gone, kept := trainJob("gone", func(*trainer.TrainJob) {}), trainJob("kept", func(*trainer.TrainJob) {})
	h.OnAdd(gone, false)
	h.OnAdd(kept, false)
	h.OnDelete(toolscache.DeletedFinalStateUnknown{Key: gone.Namespace + "/" + gone.Name, Obj: gone})
	if got := c.counts[stage.Pending]; got != 1 {
		t.Errorf("Pending TrainJobs after one of two was deleted through a tombstone: %d, want 1", got)
	}
}
