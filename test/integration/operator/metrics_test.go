package operator_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator/metrics"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator/metrics/metricstest"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/stage"
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

// TestMetrics: the operator serves its own metrics on /metrics, next to controller-runtime's: once a TrainJob of
// the test's has been reconciled and has moved from Pending to Training, the reconcile and stage-transition
// histograms, and the trainjobs gauge with every stage, which the leader serves. What they count, per TrainJob, is
// TestReconcileMetrics's and the metrics package's to check, each with a registry of its own: this process's
// registry counts every test's TrainJobs.
func TestMetrics(t *testing.T) {
	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	createTrainingRuntime(t, ns, "torch", torchSpec())
	training := newTrainJob(ns, "training", trainer.TrainingRuntimeKind, "torch")
	create(t, training)
	jobSetOf(t, training)
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
	optest.Eventually(t, "the operator serves its metrics", func(ctx context.Context) error {
		families, err := scrape(ctx)
		if err != nil {
			return err
		}
		for _, name := range []string{metrics.ReconcileDurationName, metrics.StageTransitionName, "controller_runtime_reconcile_total"} {
			if _, ok := families[name]; !ok {
				return fmt.Errorf("no %s", name)
			}
		}
		if _, err := sample(families, metrics.StageTransitionName, map[string]string{"from": "Pending", "to": "Training"}); err != nil {
			return err
		}
		stages := metricstest.Values(families, metrics.TrainJobsName)
		for _, s := range stage.All {
			if _, ok := stages["stage="+string(s)]; !ok {
				return fmt.Errorf("%s has no stage %s: %v", metrics.TrainJobsName, s, stages)
			}
		}
		return nil
	})
}
