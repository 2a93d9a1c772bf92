package operator_test

import (
	"context"
	"errors"
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
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/stage"
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

// TestMetrics: after a few TrainJobs go through their stages, /metrics has
// the operator's metrics with values that match the cluster.
func TestMetrics(t *testing.T) {
	ns := optest.NewNamespace(t, env.Client)
	createTrainingRuntime(t, ns, "torch", torchSpec())
	suspendedJob := newTrainJob(ns, "suspended", trainer.TrainingRuntimeKind, "torch")
	suspendedJob.Spec.Suspend = ptr.To(true)
	training := newTrainJob(ns, "training", trainer.TrainingRuntimeKind, "torch")
	complete := newTrainJob(ns, "complete", trainer.TrainingRuntimeKind, "torch")
	for _, tj := range []*trainer.TrainJob{suspendedJob, training, complete} {
		create(t, tj)
		jobSetOf(t, tj)
	}
	setJobSetStatus(t, training, func(s *jobsetv1alpha2.JobSetStatus) {
		s.ReplicatedJobsStatus = []jobsetv1alpha2.ReplicatedJobStatus{{Name: trainer.Node, Ready: 1, Active: 1}}
	})
	trainJobMatches(t, training, "Training", func(tj *trainer.TrainJob) error {
		if s := stage.Of(tj); s != stage.Training {
			return fmt.Errorf("stage %s", s)
		}
		return nil
	})
	setJobSetStatus(t, complete, func(s *jobsetv1alpha2.JobSetStatus) {
		s.ReplicatedJobsStatus = []jobsetv1alpha2.ReplicatedJobStatus{{Name: trainer.Node, Succeeded: 1}}
		s.Conditions = append(s.Conditions, jobSetCondition(jobsetv1alpha2.JobSetCompleted, "AllJobsCompleted", "jobset completed successfully"))
	})
	trainJobMatches(t, complete, "Complete", hasConditions(componentsCreated, condition{trainer.TrainJobComplete, "True", "AllJobsCompleted", "jobset completed successfully"}))

	optest.Eventually(t, "trainjobs by stage matches the cluster", func(ctx context.Context) error {
		var list trainer.TrainJobList
		if err := env.Client.List(ctx, &list); err != nil {
			return err
		}
		want := map[string]float64{}
		for _, s := range stage.All {
			want[string(s)] = 0
		}
		for k := range list.Items {
			want[string(stage.Of(&list.Items[k]))]++
		}
		families, err := scrape(ctx)
		if err != nil {
			return err
		}
		got := map[string]float64{}
		for _, s := range stage.All {
			m, err := sample(families, metrics.TrainJobsName, map[string]string{"stage": string(s)})
			if err != nil {
				return err
			}
			got[string(s)] = m.GetGauge().GetValue()
		}
		if diff := cmp.Diff(want, got); diff != "" {
			return fmt.Errorf("trainjobs (-cluster +metric):\n%s", diff)
		}
		return nil
	})

	families, err := scrape(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var errs []error
	check := func(name string, labels map[string]string, ok func(*dto.Metric) bool, want string) {
		m, err := sample(families, name, labels)
		if err == nil && !ok(m) {
			err = fmt.Errorf("%s%v = %v, want %s", name, labels, m, want)
		}
		errs = append(errs, err)
	}
	check(metrics.ReconcileDurationName, map[string]string{"result": "success"},
		func(m *dto.Metric) bool { return m.GetHistogram().GetSampleCount() >= 3 }, "at least 3 reconciles")
	check(metrics.StageTransitionName, map[string]string{"from": "Pending", "to": "Training"},
		func(m *dto.Metric) bool {
			return m.GetHistogram().GetSampleCount() >= 1 && m.GetHistogram().GetSampleSum() >= 0
		}, "a Pending → Training transition")
	check(metrics.StageTransitionName, map[string]string{"from": "Pending", "to": "Complete"},
		func(m *dto.Metric) bool { return m.GetHistogram().GetSampleCount() >= 1 }, "a Pending → Complete transition")
	check("controller_runtime_reconcile_total", map[string]string{"controller": "trainjob_controller", "result": "success"},
		func(m *dto.Metric) bool { return m.GetCounter().GetValue() >= 3 }, "controller-runtime's own reconcile counter")
	if err := errors.Join(errs...); err != nil {
		t.Error(err)
	}
}

// TestMetricsUncompressed: /metrics is served uncompressed, even to a client
// that accepts gzip (promhttp's pooled gzip writers cost the operator more
// memory than the response is long).
func TestMetricsUncompressed(t *testing.T) {
	encoding, err := op.MetricsEncoding(t.Context(), "gzip")
	if err != nil {
		t.Fatal(err)
	}
	if encoding != "" {
		t.Errorf("/metrics Content-Encoding %q for a client accepting gzip, want none", encoding)
	}
}
