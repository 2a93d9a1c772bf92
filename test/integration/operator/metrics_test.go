package operator_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator/metrics"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/integration/operator/internal/optest"
)

// scrape reads and parses the operator's /metrics.
func scrape(ctx context.Context) (map[string]*dto.MetricFamily, error) {
	text, err := op.Scrape(ctx)
	if err != nil {
		return nil, err
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(strings.NewReader(text))
}

// sample finds the sample of a family with exactly these labels.
func sample(families map[string]*dto.MetricFamily, name string, labels map[string]string) (*dto.Metric, error) {
	mf, ok := families[name]
	if !ok {
		return nil, fmt.Errorf("no metric %s", name)
	}
	for _, m := range mf.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		if cmp.Equal(labels, got) {
			return m, nil
		}
	}
	return nil, fmt.Errorf("no %s sample with labels %v", name, labels)
}

// labelsOf is a sample's labels as one string: "from=Pending,to=Training".
func labelsOf(m *dto.Metric) string {
	var pairs []string
	for _, l := range m.GetLabel() {
		pairs = append(pairs, l.GetName()+"="+l.GetValue())
	}
	return strings.Join(pairs, ",")
}

// values are the samples of a family by labels (labelsOf): a gauge's or a
// counter's value, a histogram's sample count.
func values(families map[string]*dto.MetricFamily, name string) map[string]float64 {
	out := map[string]float64{}
	for _, m := range families[name].GetMetric() {
		switch {
		case m.GetHistogram() != nil:
			out[labelsOf(m)] = float64(m.GetHistogram().GetSampleCount())
		case m.GetGauge() != nil:
			out[labelsOf(m)] = m.GetGauge().GetValue()
		default:
			out[labelsOf(m)] = m.GetCounter().GetValue()
		}
	}
	return out
}

// moved is after - before for every sample that changed.
func moved(before, after map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// TestMetrics: three TrainJobs go through their stages; /metrics moves by
// exactly what they did. The metrics are the process's: earlier tests'
// TrainJobs are counted too, and stay as they are (tests run one at a time,
// and no JobSet controller moves them), so the test compares differences.
func TestMetrics(t *testing.T) {
	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	createTrainingRuntime(t, ns, "torch", torchSpec())
	optest.Settled(t)
	before, err := scrape(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()

	suspendedJob := newTrainJob(ns, "suspended", trainer.TrainingRuntimeKind, "torch")
	suspendedJob.Spec.Suspend = ptr.To(true)
	training := newTrainJob(ns, "training", trainer.TrainingRuntimeKind, "torch")
	complete := newTrainJob(ns, "complete", trainer.TrainingRuntimeKind, "torch")
	for _, tj := range []*trainer.TrainJob{suspendedJob, training, complete} {
		create(t, tj)
		jobSetOf(t, tj)
	}
	trainJobMatches(t, suspendedJob, "Suspended", hasConditions(componentsCreated, suspended))
	cluster.SetJobSetStatus(t, env.Client, key(training), optest.Timeout, func(s *jobsetv1alpha2.JobSetStatus) {
		s.ReplicatedJobsStatus = []jobsetv1alpha2.ReplicatedJobStatus{{Name: trainer.Node, Ready: 1, Active: 1}}
	})
	trainJobMatches(t, training, "the trainer's pod is ready", func(tj *trainer.TrainJob) error {
		for _, js := range tj.Status.JobsStatus {
			if js.Name == trainer.Node && ptr.Deref(js.Ready, 0) == 1 {
				return nil
			}
		}
		return fmt.Errorf("jobsStatus %+v", tj.Status.JobsStatus)
	})
	cluster.SetJobSetStatus(t, env.Client, key(complete), optest.Timeout, func(s *jobsetv1alpha2.JobSetStatus) {
		s.ReplicatedJobsStatus = []jobsetv1alpha2.ReplicatedJobStatus{{Name: trainer.Node, Succeeded: 1}}
		s.Conditions = append(s.Conditions, jobSetCondition(jobsetv1alpha2.JobSetCompleted, "AllJobsCompleted", "jobset completed successfully"))
	})
	trainJobMatches(t, complete, "Complete", hasConditions(componentsCreated, condition{trainer.TrainJobComplete, "True", "AllJobsCompleted", "jobset completed successfully"}))
	settle(t, ns)
	// The time in Pending runs from creationTimestamp, in whole seconds.
	elapsed := time.Since(began.Truncate(time.Second))
	after, err := scrape(t.Context())
	if err != nil {
		t.Fatal(err)
	}

	// The gauge, from the operator's cache at this scrape.
	if diff := cmp.Diff(map[string]float64{"stage=Suspended": 1, "stage=Training": 1, "stage=Complete": 1},
		moved(values(before, metrics.TrainJobsName), values(after, metrics.TrainJobsName))); diff != "" {
		t.Errorf("%s moved (-want +got):\n%s", metrics.TrainJobsName, diff)
	}
	// The suspended TrainJob was Suspended from its creation on: no
	// transition.
	if diff := cmp.Diff(map[string]float64{"from=Pending,to=Training": 1, "from=Pending,to=Complete": 1},
		moved(values(before, metrics.StageTransitionName), values(after, metrics.StageTransitionName))); diff != "" {
		t.Errorf("%s moved (-want +got):\n%s", metrics.StageTransitionName, diff)
	}
	for _, transition := range []map[string]string{{"from": "Pending", "to": "Training"}, {"from": "Pending", "to": "Complete"}} {
		sum := func(families map[string]*dto.MetricFamily) float64 {
			m, err := sample(families, metrics.StageTransitionName, transition)
			if err != nil {
				return 0
			}
			return m.GetHistogram().GetSampleSum()
		}
		if d := sum(after) - sum(before); d < 0 || d > elapsed.Seconds() {
			t.Errorf("%s%v: %.3fs spent in Pending, want between 0 and the %v since the test began (from the second it began in)", metrics.StageTransitionName, transition, d, elapsed)
		}
	}
	// Reconciles: at least one per creation and one per JobSet status
	// written, 5 in all; how many more depends on when the cache sees the
	// operator's own writes. Neither histogram has a namespace: TrainJobs of
	// earlier tests that keep failing (their namespace is being deleted, and
	// no namespace controller runs here) add errors, so errors are not
	// counted here.
	reconciles := moved(values(before, metrics.ReconcileDurationName), values(after, metrics.ReconcileDurationName))
	if reconciles["result=success"] < 5 {
		t.Errorf("%s moved by %v, want at least 5 successes", metrics.ReconcileDurationName, reconciles)
	}
	// controller-runtime's counter counts those reconciles too (by result:
	// success, requeue or requeue_after when not an error), and those that
	// return before the work (another controller's TrainJob, a stale cache).
	counted := moved(values(before, "controller_runtime_reconcile_total"), values(after, "controller_runtime_reconcile_total"))
	var notFailed float64
	for _, result := range []string{"success", "requeue", "requeue_after"} {
		notFailed += counted["controller=trainjob_controller,result="+result]
	}
	if notFailed < reconciles["result=success"] {
		t.Errorf("controller_runtime_reconcile_total moved by %v, want at least the %v reconciles the operator timed", counted, reconciles["result=success"])
	}
}
