package stack

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator/config"
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
