// Package metricstest reads Prometheus metrics in tests: a registry of a test's own, or the families an operator
// served on /metrics.
package metricstest

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator/metrics"
)

// Registered is a set of the operator's metrics of the test's own, and the registry of its own that serves it.
func Registered(t testing.TB) (*metrics.Metrics, prometheus.Gatherer) {
	t.Helper()
	m := metrics.New()
	reg := prometheus.NewPedanticRegistry()
	if err := m.Register(reg); err != nil {
		t.Fatal(err)
	}
	return m, reg
}

// Gather is what g serves, by family name.
func Gather(t testing.TB, g prometheus.Gatherer) map[string]*dto.MetricFamily {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]*dto.MetricFamily, len(families))
	for _, mf := range families {
		out[mf.GetName()] = mf
	}
	return out
}

// Values are the samples of a family by their labels ("from=Pending,to=Training"): a gauge's or a counter's value,
// a histogram's sample count.
func Values(families map[string]*dto.MetricFamily, name string) map[string]float64 {
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

// Sums are the sample sums of a histogram family by labels.
func Sums(families map[string]*dto.MetricFamily, name string) map[string]float64 {
	out := map[string]float64{}
	for _, m := range families[name].GetMetric() {
		out[labelsOf(m)] = m.GetHistogram().GetSampleSum()
	}
	return out
}

// labelsOf is a sample's labels as one string: "from=Pending,to=Training".
func labelsOf(m *dto.Metric) string {
	pairs := make([]string, 0, len(m.GetLabel()))
	for _, l := range m.GetLabel() {
		pairs = append(pairs, l.GetName()+"="+l.GetValue())
	}
	return strings.Join(pairs, ",")
}
