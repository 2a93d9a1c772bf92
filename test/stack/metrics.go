package stack

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/config"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator/controller"
)

// InsecureClient reads the operator's endpoints, served with a certificate it made itself.
var InsecureClient = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the operator's self-signed certificate

// Metrics reads the operator's /metrics (HTTPS with its self-signed certificate, or HTTP) with MetricsToken,
// as a scraper bound to ClusterRole kubectl-trainjob-metrics-reader does.
func (o *Operator) Metrics(ctx context.Context) (map[string]*dto.MetricFamily, error) {
	scheme := "https"
	if s := o.Config.Metrics.SecureServing; s != nil && !*s {
		scheme = "http"
	}
	body, err := Get(ctx, InsecureClient, scheme+"://"+o.Config.Metrics.BindAddress+"/metrics", "Authorization", "Bearer "+o.MetricsToken)
	if err != nil {
		return nil, err
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(strings.NewReader(string(body)))
}

// Get GETs url with client hc and the given header names and values, and returns the body of a 200 answer.
func Get(ctx context.Context, hc *http.Client, url string, header ...string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %d %s", url, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return body, nil
}

// Leads tells whether the operator holds its leader election, from controller-runtime's
// leader_election_master_status of its Lease.
func (o *Operator) Leads(ctx context.Context) (bool, error) {
	m, err := o.Metrics(ctx)
	if err != nil {
		return false, err
	}
	lease := o.Config.LeaderElection.ResourceName
	if lease == "" {
		lease = config.DefaultLeaderElectionID
	}
	for _, s := range m["leader_election_master_status"].GetMetric() {
		for _, l := range s.GetLabel() {
			if l.GetName() == "name" && l.GetValue() == lease {
				return s.GetGauge().GetValue() == 1, nil
			}
		}
	}
	return false, nil
}

// ControllerIdle is nil when families (an operator's metrics) show its controller name with no reconcile
// running (controller_runtime_active_workers) and no request ready in its queue (workqueue_depth; a request
// waiting for its RequeueAfter or back-off is not counted). Series of several operators (one process's
// registry) are summed: idle means idle in all of them.
func ControllerIdle(families []*dto.MetricFamily, name string) error {
	var active, queued float64
	for _, mf := range families {
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			switch {
			case mf.GetName() == "controller_runtime_active_workers" && labels["controller"] == name:
				active += m.GetGauge().GetValue()
			case mf.GetName() == "workqueue_depth" && labels["name"] == name:
				queued += m.GetGauge().GetValue()
			}
		}
	}
	if active != 0 || queued != 0 {
		return fmt.Errorf("the %s runs %v reconciles and has %v queued", name, active, queued)
	}
	return nil
}

// Settled returns a poll condition that is nil at the second of two polls in a row at which idle is nil. A
// worker takes a request off the queue a few instructions before it counts itself active; a request in that
// gap at the first poll is counted at the second, or done. So every request queued before the polls began
// has been reconciled to the end when it is nil. It proves nothing about events not yet queued.
func Settled(idle func(ctx context.Context) error) func(ctx context.Context) error {
	idleBefore := false
	return func(ctx context.Context) error {
		if err := idle(ctx); err != nil {
			idleBefore = false
			return err
		}
		if !idleBefore {
			idleBefore = true
			return errors.New("idle at one poll; polling again")
		}
		return nil
	}
}

// Idle is nil when the operator's TrainJob controller is idle (ControllerIdle), from its /metrics.
func (o *Operator) Idle(ctx context.Context) error {
	m, err := o.Metrics(ctx)
	if err != nil {
		return err
	}
	families := make([]*dto.MetricFamily, 0, len(m))
	for _, mf := range m {
		families = append(families, mf)
	}
	return ControllerIdle(families, controller.TrainJobControllerName)
}

// LeaderIdle is nil when the TrainJob controller of the leading replica is idle (Operator.Idle).
func (s *Stack) LeaderIdle(ctx context.Context) error {
	i, err := s.Leader(ctx)
	if err != nil {
		return err
	}
	return s.replica(i).Idle(ctx)
}
