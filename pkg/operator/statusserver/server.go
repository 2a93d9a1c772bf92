// Package statusserver is the operator's status server of KEP-2779
// (feature gate TrainJobStatus): trainers POST their progress to
// /apis/trainer.kubeflow.org/v1alpha1/namespaces/{ns}/trainjobs/{name}/status
// and the server writes it into the TrainJob's status.trainerStatus. It
// serves HTTPS with the webhook certificate, on every replica. A caller
// proves who it is with a ServiceAccount token bound to the TrainJob's
// audience, which the API server reviews (TokenReview); the server must
// never write anything but status.trainerStatus.
package statusserver

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/plugins/trainjobstatus"
)

// FieldManager owns status.trainerStatus: each report replaces the last.
const FieldManager = "trainer-status"

// Limits of a request, as upstream sets them: a report is small, and a
// slow or endless one must not hold a connection.
const (
	MaxBodyBytes = 64 << 10
	readTimeout  = 10 * time.Second
	writeTimeout = 10 * time.Second
	idleTimeout  = 120 * time.Second

	shutdownTimeout = 5 * time.Second
	// certPoll is how often Start looks for the certificate until it
	// exists (the operator writes it once rotation has made it).
	certPoll = 200 * time.Millisecond
)

// The certificate files in the webhook's folder.
const (
	certFile = "tls.crt"
	keyFile  = "tls.key"
)

// Options configure a Server.
type Options struct {
	// Host and Port are where the server listens (Host "" is every interface).
	Host string
	Port int32
	// CertDir holds tls.crt and tls.key: the webhook's serving certificate,
	// reloaded when it changes.
	CertDir string
	// Client writes the TrainJob status. Its rate limit is the status
	// writes' own, apart from the controllers' and the reviews'.
	Client client.Client
	// Reviewer reviews tokens and reads the pods, Jobs and JobSets they are
	// bound to; Client when nil.
	Reviewer client.Client
	// TrainJobs reads the TrainJob a report is for, to compare its UID
	// with the one the token's pod belongs to: the manager's cache, which
	// watches TrainJobs on every replica. Reviewer when nil.
	TrainJobs client.Reader
	// ReviewBudget bounds the reads of the API server that checking
	// tokens costs, each namespace to a share of it; a token that finds
	// it spent is answered 429. Nil is no limit.
	ReviewBudget *ReviewBudget
}

// Server is the status server, a manager.Runnable on every replica.
type Server struct {
	opts    Options
	handler http.Handler
	log     logr.Logger
	// accepted and refused remember verdicts on tokens, apart, so that
	// refusals never evict what was accepted.
	accepted, refused *verdictCache
	budgets           *reviewBudgets
}

var (
	_ manager.Runnable               = (*Server)(nil)
	_ manager.LeaderElectionRunnable = (*Server)(nil)
)

// New builds the server; it listens once started.
func New(opts Options) *Server {
	if opts.Reviewer == nil {
		opts.Reviewer = opts.Client
	}
	if opts.TrainJobs == nil {
		opts.TrainJobs = opts.Reviewer
	}
	s := &Server{opts: opts, log: log.Log.WithName("status-server"),
		accepted: newVerdictCache(reviewTTL), refused: newVerdictCache(refusedTTL), budgets: newReviewBudgets(opts.ReviewBudget)}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+statusPattern, s.updateStatus)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound,
			fmt.Sprintf("%s %s is not served; POST %s", r.Method, r.URL.Path, statusPattern))
	})
	s.handler = s.recoverPanics(mux)
	return s
}

// statusPattern is the one route, in http.ServeMux syntax: the URL the
// TrainJobStatus plugin gives the trainers.
var statusPattern = trainjobstatus.StatusPath("{namespace}", "{name}")

// Addr is the address the server listens on.
func (s *Server) Addr() string {
	return net.JoinHostPort(s.opts.Host, strconv.Itoa(int(s.opts.Port)))
}

// NeedLeaderElection is false: trainers reach any replica through the Service.
func (s *Server) NeedLeaderElection() bool { return false }

// Start serves until ctx ends. It first waits for the certificate.
func (s *Server) Start(ctx context.Context) error {
	watcher, err := s.waitForCertificate(ctx)
	if err != nil || watcher == nil {
		return err
	}
	go func() {
		if err := watcher.Start(ctx); err != nil {
			s.log.Error(err, "Watching the serving certificate")
		}
	}()
	srv := &http.Server{
		Addr:         s.Addr(),
		Handler:      s.handler,
		TLSConfig:    &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: watcher.GetCertificate, NextProtos: []string{"http/1.1"}},
		ReadTimeout:  readTimeout,
		WriteTimeout: writeTimeout,
		IdleTimeout:  idleTimeout,
		ErrorLog:     slog.NewLogLogger(logr.ToSlogHandler(s.log), slog.LevelInfo),
	}
	listener, err := tls.Listen("tcp", srv.Addr, srv.TLSConfig)
	if err != nil {
		return fmt.Errorf("status server: %w", err)
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		if err := srv.Shutdown(shutdownCtx); err != nil {
			s.log.Error(err, "Shutting down the status server")
		}
	}()
	s.log.Info("Serving trainer status reports", "address", listener.Addr().String())
	if err := srv.Serve(listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("status server: %w", err)
	}
	<-stopped
	return nil
}

// waitForCertificate polls CertDir until the certificate loads; it returns
// nil, nil when ctx ends first.
func (s *Server) waitForCertificate(ctx context.Context) (*certwatcher.CertWatcher, error) {
	certPath, keyPath := filepath.Join(s.opts.CertDir, certFile), filepath.Join(s.opts.CertDir, keyFile)
	for {
		watcher, err := certwatcher.New(certPath, keyPath)
		if err == nil {
			return watcher, nil
		}
		s.log.V(2).Info("Waiting for the serving certificate", "dir", s.opts.CertDir, "reason", err.Error())
		select {
		case <-ctx.Done():
			return nil, nil
		case <-time.After(certPoll):
		}
	}
}

// Checker is the health and readiness check: the server accepts TLS
// connections. It only dials, so it does not verify the certificate.
func (s *Server) Checker() healthz.Checker {
	host := s.opts.Host
	if host == "" {
		host = "localhost"
	}
	addr := net.JoinHostPort(host, strconv.Itoa(int(s.opts.Port)))
	return func(*http.Request) error {
		dialer := &net.Dialer{Timeout: 2 * time.Second}
		conn, err := tls.DialWithDialer(dialer, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // a probe of our own listener
		if err != nil {
			return fmt.Errorf("status server at %s: %w", addr, err)
		}
		return conn.Close()
	}
}

// updateStatus handles a report: authenticate, decode, apply.
func (s *Server) updateStatus(w http.ResponseWriter, r *http.Request) {
	namespace, name := r.PathValue("namespace"), r.PathValue("name")
	logger := s.log.WithValues("trainJob", namespace+"/"+name)
	caller := s.authenticate(r.Context(), r.Header.Get("Authorization"), namespace, name)
	if caller.code != 0 {
		msg := caller.message
		if caller.code == http.StatusInternalServerError {
			logger.Error(errors.New(msg), "Reviewing a token")
			msg = "the token could not be reviewed"
		}
		writeStatus(w, caller.code, caller.reason, msg)
		return
	}
	// The pod belongs to a TrainJob of this name; it must be this one, not
	// an earlier one whose children the garbage collector has yet to take.
	current := &trainer.TrainJob{}
	switch err := s.opts.TrainJobs.Get(r.Context(), client.ObjectKey{Namespace: namespace, Name: name}, current); {
	case apierrors.IsNotFound(err):
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, "Train job not found")
		return
	case err != nil:
		logger.Error(err, "Reading the TrainJob")
		writeStatus(w, http.StatusInternalServerError, metav1.StatusReasonInternalError, "Internal error")
		return
	case current.UID != caller.trainJobUID:
		writeStatus(w, http.StatusForbidden, metav1.StatusReasonForbidden, fmt.Sprintf(
			"pod %s/%s is not a pod of TrainJob %s/%s: it belongs to an earlier TrainJob of that name", namespace, caller.pod, namespace, name))
		return
	}

	var req trainer.UpdateTrainJobStatusRequest
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		writeStatus(w, http.StatusRequestEntityTooLarge, metav1.StatusReasonRequestEntityTooLarge,
			fmt.Sprintf("the request body is larger than %d bytes", MaxBodyBytes))
		return
	case err != nil:
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, "reading the request body: "+err.Error())
		return
	}
	if err := decodeStrict(body, &req); err != nil {
		writeStatus(w, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid,
			`invalid request body, want {"trainerStatus": {...}}: `+err.Error())
		return
	}
	if req.TrainerStatus == nil {
		writeJSON(w, http.StatusOK, &req)
		return
	}

	obj, err := trainerStatusApply(namespace, name, req.TrainerStatus)
	if err == nil {
		err = s.opts.Client.Status().Apply(r.Context(), client.ApplyConfigurationFromUnstructured(obj),
			client.FieldOwner(FieldManager), client.ForceOwnership)
	}
	var statusErr *apierrors.StatusError
	switch {
	case err == nil:
		logger.V(2).Info("Trainer status updated")
		writeJSON(w, http.StatusOK, &req)
	case (apierrors.IsInvalid(err) || apierrors.IsBadRequest(err)) && errors.As(err, &statusErr) && statusErr.ErrStatus.Message != "":
		writeStatus(w, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, statusErr.ErrStatus.Message)
	case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
		writeStatus(w, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, "validation failed: "+err.Error())
	case apierrors.IsNotFound(err):
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, "Train job not found")
	default:
		logger.Error(err, "Updating the trainer status")
		writeStatus(w, http.StatusInternalServerError, metav1.StatusReasonInternalError, "Internal error")
	}
}

// decodeStrict decodes one JSON object and rejects unknown fields, so a
// misspelt field is an error that names it instead of a silent no-op.
func decodeStrict(body []byte, into any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return errors.New("the body is empty")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one JSON value")
	}
	return nil
}

// trainerStatusApply is the apply request of a report: the TrainJob with
// status.trainerStatus alone. Applied with force by FieldManager, it
// replaces the previous report whole: fields it leaves out are removed.
func trainerStatusApply(namespace, name string, ts *trainer.TrainerStatus) (*unstructured.Unstructured, error) {
	status, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ts)
	if err != nil {
		return nil, err
	}
	obj := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"trainerStatus": status}}}
	obj.SetGroupVersionKind(trainer.GroupVersion.WithKind(trainer.TrainJobKind))
	obj.SetNamespace(namespace)
	obj.SetName(name)
	return obj, nil
}

// writeStatus answers with a metav1.Status, as the API server would.
func writeStatus(w http.ResponseWriter, code int, reason metav1.StatusReason, message string) {
	writeJSON(w, code, &metav1.Status{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"},
		Status:   metav1.StatusFailure,
		Message:  message,
		Reason:   reason,
		Code:     int32(code),
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// recoverPanics turns a panic in a handler into a 500 instead of a
// dropped connection, and logs it.
func (s *Server) recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.log.Error(fmt.Errorf("%v", p), "Panic serving a status report", "path", r.URL.Path)
				writeStatus(w, http.StatusInternalServerError, metav1.StatusReasonInternalError, "Internal error")
			}
		}()
		next.ServeHTTP(w, r)
	})
}
