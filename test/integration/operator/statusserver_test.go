package operator_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/config"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator/statusserver"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/plugins"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/plugins/trainjobstatus"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/integration/operator/internal/optest"
)

// The status server runs on every replica, leader or not. The package's
// operator runs with the TrainJobStatus gate off (the other tests compare
// JobSets without the plugin's additions), so these tests start a second
// operator with the gate on: a standby replica behind the same Lease, which
// reconciles nothing while the first one leads, and serves the status
// server with the certificate of the first (the same Secret).

var (
	standbyOnce sync.Once
	standby     *optest.Operator
	standbyErr  error
)

// statusServerReplica starts the standby operator once and waits until it
// is ready, its status server included.
func statusServerReplica(t *testing.T) *optest.Operator {
	t.Helper()
	standbyOnce.Do(func() {
		// The standby lives as long as the package's API server: Main stops it.
		standby, standbyErr = startStatusServerReplica(context.Background())
	})
	if standbyErr != nil {
		t.Fatalf("operator with the TrainJobStatus gate: %v", standbyErr)
	}
	return standby
}

// stopStandby stops the standby of statusServerReplica, if it runs, so
// that it does not take the Lease while the package's operator is restarted
// (restartOperator); the next test that needs it starts another.
func stopStandby(t *testing.T) {
	t.Helper()
	if standby != nil {
		if err := standby.Stop(); err != nil {
			t.Logf("the status server's standby stopped with %v", err)
		}
	}
	standbyOnce, standby, standbyErr = sync.Once{}, nil, nil
}

// TestRestartWithStandbyUp: the package's operator, restarted while the
// status server's standby replica runs, leads again. The standby reconciles
// with the TrainJobStatus gate on: had it taken the Lease while the operator
// was down (a loaded CI's restart lost the race to it), every later test
// would have seen its JobSets and waited on the wrong replica's metrics.
func TestRestartWithStandbyUp(t *testing.T) {
	replica := statusServerReplica(t)
	restartOperator(t, func() {
		optest.Eventually(t, "the standby is stopped or leads", func(context.Context) error {
			select {
			case <-replica.Done():
				return nil
			case <-replica.Elected():
				return nil
			default:
				return errors.New("the standby runs and does not lead")
			}
		})
	})
	statusServerReplica(t) // another standby, behind the restarted operator
}

// ownStatusServerReplica starts a standby operator like
// statusServerReplica's for test t alone, and stops it when t ends: its
// token-review budget is spent by t's reports only, as a test of that
// budget requires.
func ownStatusServerReplica(t *testing.T) *optest.Operator {
	t.Helper()
	replica, err := startStatusServerReplica(t.Context())
	if err != nil {
		t.Fatalf("operator with the TrainJobStatus gate: %v", err)
	}
	t.Cleanup(func() { _ = replica.Stop() })
	return replica
}

// startStatusServerReplica starts a standby operator with the
// TrainJobStatus gate, behind the first operator's Lease and with its
// certificate, and waits until it is ready, its status server included.
func startStatusServerReplica(ctx context.Context) (*optest.Operator, error) {
	select {
	case <-op.Elected():
	case <-time.After(optest.Timeout):
		return nil, errors.New("the first operator does not lead")
	}
	cfg := &config.Configuration{
		Namespace:    optest.Namespace,
		Webhook:      config.Webhook{Enable: ptr.To(false)},
		FeatureGates: map[string]bool{config.FeatureTrainJobStatus: true},
		// A standby in the test process: warmed, its queue would count in optest.Settled's process-wide metrics.
		Controller: config.Controller{Warmup: ptr.To(false)},
	}
	if err := optest.InProcess(cfg, env.LogDir); err != nil {
		return nil, err
	}
	cfg.Webhook.CertDir = op.Config.Webhook.CertDir
	replica, err := optest.StartOperator(ctx, env.Cluster.Config, cfg)
	if err != nil {
		return nil, err
	}
	return replica, optest.Poll(ctx, time.Minute, replica.Ready)
}

// statusClient reports to a status server as a trainer does, trusting the
// CA the TrainJobStatus plugin gives the trainers.
type statusClient struct {
	base string
	http *http.Client
}

func newStatusClient(t *testing.T, replica *optest.Operator, caPEM []byte) *statusClient {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatalf("no CA certificate in %q", caPEM)
	}
	port := strconv.Itoa(int(*replica.Config.StatusServer.Port))
	return &statusClient{
		base: "https://" + replica.Config.Webhook.Host + ":" + port,
		// The serving certificate is valid for localhost (see optest.InProcess).
		http: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "localhost", MinVersion: tls.VersionTLS12},
		}},
	}
}

// post sends body to path with the token and returns the code and body.
func (c *statusClient) post(t *testing.T, path, token, body string) (int, []byte) {
	t.Helper()
	code, data, err := c.do(t.Context(), path, token, body)
	if err != nil {
		t.Fatal(err)
	}
	return code, data
}

// do is post for any goroutine: it returns the error instead of failing.
func (c *statusClient) do(ctx context.Context, path, token, body string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("POST %s: %w", path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, fmt.Errorf("POST %s: %w", path, err)
	}
	return resp.StatusCode, data, nil
}

// refusal is what the tests compare of a metav1.Status answer.
type refusal struct {
	Code   int
	Status string
	Reason metav1.StatusReason
}

func refusalOf(t *testing.T, code int, body []byte) (refusal, string) {
	t.Helper()
	var st metav1.Status
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatalf("answer %d is not a metav1.Status: %v\n%s", code, err, body)
	}
	if int(st.Code) != code || st.Kind != "Status" {
		t.Errorf("Status %+v does not match the HTTP code %d", st, code)
	}
	return refusal{Code: code, Status: st.Status, Reason: st.Reason}, st.Message
}

// trainerToken is a token of ServiceAccount `trainer` of ns, for the
// audience of TrainJob audienceNS/name, from the TokenRequest API (as the
// kubelet gets the token it projects into the trainer pods).
func trainerToken(t *testing.T, ns, audienceNS, name string) string {
	t.Helper()
	sa := &corev1.ServiceAccount{}
	sa.Namespace, sa.Name = ns, "trainer"
	if err := env.Client.Get(t.Context(), key(sa), sa); err != nil {
		create(t, sa)
	}
	tr, err := env.Clientset.CoreV1().ServiceAccounts(ns).CreateToken(t.Context(), "trainer", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			Audiences:         []string{trainjobstatus.TokenAudience(audienceNS, name)},
			ExpirationSeconds: ptr.To[int64](3600),
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest: %v", err)
	}
	return tr.Status.Token
}

// caOfTrainers is the CA the TrainJobStatus plugin copies for the trainers
// of tj: it builds the TrainJob's objects with the pipeline of the
// replica's configuration, against the cluster, and returns the ConfigMap's
// ca.crt.
func caOfTrainers(t *testing.T, replica *optest.Operator, tj *trainer.TrainJob, rt *trainer.TrainingRuntime) []byte {
	t.Helper()
	cfg := replica.Config
	fw, err := plugins.NewFramework(t.Context(), plugins.Config{Features: cfg.Features(), OutOfTree: optest.OutOfTree(), Plugins: cfg.Plugins},
		pipeline.NewHandle(env.Client, env.Client.RESTMapper(), cfg.OperatorInfo()))
	if err != nil {
		t.Fatal(err)
	}
	runtime, err := pipeline.RuntimeOf(rt)
	if err != nil {
		t.Fatal(err)
	}
	objs, _, err := fw.Build(t.Context(), tj, runtime, pipeline.BuildOptions{})
	if err != nil {
		t.Fatalf("Build with the TrainJobStatus plugin: %v", err)
	}
	for _, obj := range objs {
		if cm, ok := obj.(*corev1.ConfigMap); ok && cm.Name == tj.Name+trainjobstatus.TLSConfigMapSuffix {
			return []byte(cm.Data[trainjobstatus.CACertKey])
		}
	}
	t.Fatalf("Build returned no %s%s ConfigMap", tj.Name, trainjobstatus.TLSConfigMapSuffix)
	return nil
}

// trainerStatusOf reads the TrainJob's trainerStatus from the API server.
func trainerStatusOf(ctx context.Context, tj *trainer.TrainJob) (*trainer.TrainerStatus, error) {
	got := &trainer.TrainJob{}
	if err := optest.Get(ctx, env.Client, key(tj), got); err != nil {
		return nil, err
	}
	return got.Status.TrainerStatus, nil
}

// hasTrainerStatus is a Poll condition.
func hasTrainerStatus(tj *trainer.TrainJob, want *trainer.TrainerStatus) func(context.Context) error {
	return func(ctx context.Context) error {
		got, err := trainerStatusOf(ctx, tj)
		if err != nil {
			return err
		}
		if diff := cmp.Diff(want, got); diff != "" {
			return fmt.Errorf("trainerStatus (-want +got):\n%s", diff)
		}
		return nil
	}
}

// TestStatusServer checks spec §6.2's status server behaviours and its
// refusals, with tokens the API server issued.
func TestStatusServer(t *testing.T) {
	replica := statusServerReplica(t)
	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	rt := createTrainingRuntime(t, ns, "torch", torchSpec())
	newJob := func(name string) *trainer.TrainJob {
		tj := newTrainJob(ns, name, trainer.TrainingRuntimeKind, "torch")
		tj.Spec.Suspend = ptr.To(true)
		create(t, tj)
		return tj
	}
	alpha := newJob("alpha")
	c := newStatusClient(t, replica, caOfTrainers(t, replica, alpha, rt))
	path := func(name string) string { return trainjobstatus.StatusPath(ns, name) }
	// tokenOf is the token of a pod of tj's JobSet, for its audience.
	tokenOf := func(tj *trainer.TrainJob) string {
		return podToken(t, trainerPodOf(t, jobSetOf(t, tj), tj.Name+"-node-0"), ns, tj.Name)
	}
	token := tokenOf(alpha)
	at := func(sec int) metav1.Time { return metav1.NewTime(time.Date(2026, 12, 2, 10, 0, sec, 0, time.UTC)) }
	reportOf := func(ts *trainer.TrainerStatus) string {
		data, err := json.Marshal(trainer.UpdateTrainJobStatusRequest{TrainerStatus: ts})
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	// ok posts a report that must be accepted; it is echoed back.
	ok := func(t *testing.T, name, token, body string) {
		t.Helper()
		code, got := c.post(t, path(name), token, body)
		if code != http.StatusOK {
			t.Fatalf("POST = %d, want 200: %s", code, got)
		}
		if diff := cmp.Diff(body, strings.TrimSpace(string(got))); diff != "" {
			t.Errorf("answer (-want +got):\n%s", diff)
		}
	}

	t.Run("valid report updates trainerStatus", func(t *testing.T) {
		want := &trainer.TrainerStatus{
			ProgressPercentage:        ptr.To[int32](42),
			EstimatedRemainingSeconds: ptr.To[int32](120),
			Metrics:                   []trainer.Metric{{Name: "loss", Value: "0.123"}, {Name: "accuracy", Value: "0.95"}},
			LastUpdatedTime:           at(1),
		}
		ok(t, "alpha", token, reportOf(want))
		optest.Eventually(t, "the report is in the status", hasTrainerStatus(alpha, want))
	})

	t.Run("a new report replaces the last, not merged", func(t *testing.T) {
		ok(t, "alpha", token, reportOf(&trainer.TrainerStatus{ProgressPercentage: ptr.To[int32](30), LastUpdatedTime: at(2)}))
		second := &trainer.TrainerStatus{Metrics: []trainer.Metric{{Name: "loss", Value: "0.1"}}, LastUpdatedTime: at(3)}
		ok(t, "alpha", token, reportOf(second))
		optest.Eventually(t, "only the second report is in the status", hasTrainerStatus(alpha, second))
	})

	t.Run("empty request is accepted and changes nothing", func(t *testing.T) {
		// The status server answers once its write is done: the answer is
		// the barrier. The operator's reconciles of the last report are
		// waited for, so that any write after the answer is the server's.
		settle(t, ns)
		before := &trainer.TrainJob{}
		if err := optest.Get(t.Context(), env.Client, key(alpha), before); err != nil {
			t.Fatal(err)
		}
		if before.Status.TrainerStatus == nil {
			t.Fatal("no trainerStatus before; want the last report")
		}
		ok(t, "alpha", token, `{}`)
		after := &trainer.TrainJob{}
		if err := optest.Get(t.Context(), env.Client, key(alpha), after); err != nil {
			t.Fatal(err)
		}
		if after.ResourceVersion != before.ResourceVersion {
			t.Errorf("the TrainJob was written: resourceVersion %s, then %s; trainerStatus %+v, then %+v",
				before.ResourceVersion, after.ResourceVersion, before.Status.TrainerStatus, after.Status.TrainerStatus)
		}
	})

	t.Run("progress over 100 is refused and changes nothing", func(t *testing.T) {
		beta := newJob("beta")
		code, body := c.post(t, path("beta"), tokenOf(beta),
			reportOf(&trainer.TrainerStatus{ProgressPercentage: ptr.To[int32](101), LastUpdatedTime: at(4)}))
		got, message := refusalOf(t, code, body)
		if diff := cmp.Diff(refusal{Code: 422, Status: metav1.StatusFailure, Reason: metav1.StatusReasonInvalid}, got); diff != "" {
			t.Errorf("answer (-want +got):\n%s", diff)
		}
		if !strings.Contains(message, `"beta"`) || !strings.Contains(message, "progressPercentage") {
			t.Errorf("message %q names neither the TrainJob nor the field", message)
		}
		// The server answered once the API server refused its write.
		if err := hasTrainerStatus(beta, nil)(t.Context()); err != nil {
			t.Errorf("beta: %v", err)
		}
	})

	t.Run("TrainJob that does not exist", func(t *testing.T) {
		// Its pod stays: there is no garbage collector here.
		ghost := newJob("ghost")
		ghostToken := tokenOf(ghost)
		if err := env.Client.Delete(t.Context(), ghost); err != nil {
			t.Fatal(err)
		}
		optest.Eventually(t, "ghost is gone", func(ctx context.Context) error {
			return optest.Absent(ctx, env.Client, key(ghost), &trainer.TrainJob{})
		})
		code, body := c.post(t, path("ghost"), ghostToken,
			reportOf(&trainer.TrainerStatus{ProgressPercentage: ptr.To[int32](10), LastUpdatedTime: at(5)}))
		got, message := refusalOf(t, code, body)
		if diff := cmp.Diff(refusal{Code: 404, Status: metav1.StatusFailure, Reason: metav1.StatusReasonNotFound}, got); diff != "" {
			t.Errorf("answer (-want +got):\n%s", diff)
		}
		if message != "Train job not found" {
			t.Errorf("message %q, want %q", message, "Train job not found")
		}
		// The server answered once the API server found no TrainJob to write.
		if err := optest.Absent(t.Context(), env.Client, nsName(ns, "ghost"), &trainer.TrainJob{}); err != nil {
			t.Error(err)
		}
	})

	report := reportOf(&trainer.TrainerStatus{ProgressPercentage: ptr.To[int32](99), LastUpdatedTime: at(6)})
	otherNS := cluster.NewNamespace(t, env.Client, "test-", nil)
	refusals := []struct {
		name        string
		path        string
		token       string
		body        string
		want        refusal
		wantMessage string
	}{
		{
			name:        "no token",
			path:        path("alpha"),
			body:        report,
			want:        refusal{Code: 401, Status: metav1.StatusFailure, Reason: metav1.StatusReasonUnauthorized},
			wantMessage: "an Authorization: Bearer <token> header is required",
		},
		{
			name:        "token the API server did not issue",
			path:        path("alpha"),
			token:       "not-a-token",
			body:        report,
			want:        refusal{Code: 401, Status: metav1.StatusFailure, Reason: metav1.StatusReasonUnauthorized},
			wantMessage: "the token is not valid for audience " + trainjobstatus.TokenAudience(ns, "alpha"),
		},
		{
			name:        "token of another TrainJob",
			path:        path("alpha"),
			token:       trainerToken(t, ns, ns, "beta"),
			body:        report,
			want:        refusal{Code: 401, Status: metav1.StatusFailure, Reason: metav1.StatusReasonUnauthorized},
			wantMessage: "the token is not valid for audience " + trainjobstatus.TokenAudience(ns, "alpha"),
		},
		{
			name:        "token of another namespace",
			path:        path("alpha"),
			token:       trainerToken(t, otherNS, ns, "alpha"),
			body:        report,
			want:        refusal{Code: 403, Status: metav1.StatusFailure, Reason: metav1.StatusReasonForbidden},
			wantMessage: "a token of namespace " + otherNS + " may not report for TrainJobs of namespace " + ns,
		},
		{
			name:        "body over 64 KiB",
			path:        path("alpha"),
			token:       token,
			body:        `{"trainerStatus":{"metrics":[` + strings.Repeat(`{"name":"loss","value":"0.1"},`, 3000) + `]}}`,
			want:        refusal{Code: 413, Status: metav1.StatusFailure, Reason: metav1.StatusReasonRequestEntityTooLarge},
			wantMessage: "the request body is larger than 65536 bytes",
		},
		{
			name:        "another path",
			path:        "/apis/trainer.kubeflow.org/v1alpha1/namespaces/" + ns + "/trainjobs/alpha",
			token:       token,
			body:        report,
			want:        refusal{Code: 404, Status: metav1.StatusFailure, Reason: metav1.StatusReasonNotFound},
			wantMessage: "POST /apis/trainer.kubeflow.org/v1alpha1/namespaces/" + ns + "/trainjobs/alpha is not served; POST /apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs/{name}/status",
		},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			before, err := trainerStatusOf(t.Context(), alpha)
			if err != nil {
				t.Fatal(err)
			}
			code, body := c.post(t, tc.path, tc.token, tc.body)
			got, message := refusalOf(t, code, body)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("answer (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantMessage, message); diff != "" {
				t.Errorf("message (-want +got):\n%s", diff)
			}
			if err := hasTrainerStatus(alpha, before)(t.Context()); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestStatusServerProbes: the replica's readiness includes the status
// server's check, and its liveness too.
func TestStatusServerProbes(t *testing.T) {
	replica := statusServerReplica(t)
	for endpoint, check := range map[string]string{"readyz": statusserver.ReadyzCheck, "healthz": statusserver.HealthzCheck} {
		resp, err := http.Get(replica.ProbeURL(endpoint) + "?verbose")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte("[+]"+check+" ok")) {
			t.Errorf("%s = %d, want 200 with [+]%s ok:\n%s", endpoint, resp.StatusCode, check, body)
		}
	}
}
