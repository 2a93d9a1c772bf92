// Package progress reports a test trainer's progress to the operator's status server (KEP-2779, feature gate
// TrainJobStatus), where the TrainJobStatus plugin tells every trainer container to: the server's URL, the file
// of its CA and the file of a ServiceAccount token for the TrainJob's audience (KUBEFLOW_TRAINER_SERVER_*).
// It must stay a client of that contract only: what it sends is what any trainer may send.
package progress

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/plugins/trainjobstatus"
)

// Reporter posts reports to one TrainJob's status.
type Reporter struct {
	url       string
	tokenFile string
	http      *http.Client
	steps     int
	start     time.Time
}

// FromEnv is the Reporter of a trainer of steps steps that the TrainJobStatus plugin configured, or nil when
// the gate is off (no KUBEFLOW_TRAINER_SERVER_URL).
func FromEnv(getenv func(string) string, steps int) (*Reporter, error) {
	url := getenv(trainjobstatus.EnvServerURL)
	if url == "" {
		return nil, nil
	}
	caFile, tokenFile := getenv(trainjobstatus.EnvServerCACert), getenv(trainjobstatus.EnvServerToken)
	if caFile == "" || tokenFile == "" {
		return nil, fmt.Errorf("%s is set but %s or %s is not", trainjobstatus.EnvServerURL, trainjobstatus.EnvServerCACert, trainjobstatus.EnvServerToken)
	}
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("%s holds no PEM certificate", caFile)
	}
	return &Reporter{
		url:       url,
		tokenFile: tokenFile,
		http: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		}},
		steps: steps,
		start: time.Now(),
	}, nil
}

// Report posts the progress after step of the steps with the step's loss: the share done, the time left at
// the pace so far, and the step and loss as metrics.
func (r *Reporter) Report(ctx context.Context, step int, loss float64) error {
	elapsed := time.Since(r.start)
	remaining := time.Duration(int64(elapsed) / int64(step) * int64(r.steps-step))
	body, err := json.Marshal(trainer.UpdateTrainJobStatusRequest{TrainerStatus: &trainer.TrainerStatus{
		ProgressPercentage:        ptr.To(int32(step * 100 / r.steps)),
		EstimatedRemainingSeconds: ptr.To(int32(remaining.Round(time.Second).Seconds())),
		Metrics: []trainer.Metric{
			{Name: "step", Value: strconv.Itoa(step)},
			{Name: "loss", Value: strconv.FormatFloat(loss, 'f', 6, 64)},
		},
		LastUpdatedTime: metav1.Now(),
	}})
	if err != nil {
		return err
	}
	// The kubelet rotates the projected token: read it for every report.
	token, err := os.ReadFile(r.tokenFile)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	resp, err := r.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("POST %s: %s: %s", r.url, resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}

// Steps is what a trainer of steps steps calls after each step to report it, or nil when the TrainJobStatus
// gate is off. A report that fails is said on errOut and does not stop the training.
func Steps(getenv func(string) string, steps int, errOut io.Writer) (func(step int, loss float64), error) {
	r, err := FromEnv(getenv, steps)
	if r == nil || err != nil {
		return nil, err
	}
	return func(step int, loss float64) {
		if err := r.Report(context.Background(), step, loss); err != nil {
			fmt.Fprintf(errOut, "progress of step %d not reported: %v\n", step, err)
		}
	}, nil
}
