package dashboard

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/subtle"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	"sigs.k8s.io/yaml"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/snapshot"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/create"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/describe"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/fit"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/kueue"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/lifecycle"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/list"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/printers"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/status"
)

// The page: plain HTML, CSS and JavaScript written by hand, embedded in the binary; nothing is fetched from
// anywhere else at run time.
//
//go:embed assets
var assets embed.FS

// cookieName holds the token after the first visit.
const cookieName = "kubectl-trainjob-dashboard"

// contentSecurityPolicy lets the page load its own script, style and data only: no inline script (a message
// from the cluster that reached the page as HTML could not run), no other origin, no framing.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// readOnlyMessage answers a write, or a delete's listing, without --allow-writes.
const readOnlyMessage = "the dashboard is read-only: start it with --allow-writes to suspend, resume, delete and rerun TrainJobs"

// Batch is how long a page's changes are gathered into one push: a pod's several updates, several TrainJobs
// changed at once.
const Batch = 200 * time.Millisecond

// Resync is how often the page is pushed again while nothing changes, so that ages and durations move.
const Resync = 30 * time.Second

// Server is the dashboard's HTTP handler: the guard, the page and its JSON API, read with the user's own
// client, so that the user's RBAC decides what it shows.
type Server struct {
	// Token is the secret of the URL the command prints; every request must carry it, as a cookie after the
	// first.
	Token string
	// AllowWrites lets the page suspend, resume, delete and rerun TrainJobs; without it every write is refused.
	AllowWrites bool
	// Namespace is the namespace shown; "" is every namespace.
	Namespace string

	Client client.WithWatch
	Kueue  *kueue.Client
	Logs   kubernetes.Interface
	// Rows makes the list's rows as `list` does.
	Rows *list.Rows
	// Pipeline builds TrainJobs as the binary's operator does, for describe-pipeline's table.
	Pipeline *cmdutil.Pipeline
	Clock    clock.PassiveClock
	// Resync is how often the page is pushed again while nothing changes (Resync); 0 is never.
	Resync time.Duration
	// Batch is how long changes are gathered into one push (Batch); 0 pushes each at once.
	Batch time.Duration

	// cache is the watch of the TrainJobs every page reads (Start); nil lists them at every read.
	cache *trainJobCache
}

// Handler is the guarded dashboard.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(assets, "assets")
	mux.Handle("GET /assets/", http.StripPrefix("/assets/", http.FileServerFS(static)))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFileFS(w, r, static, "index.html")
	})
	mux.HandleFunc("GET /api/config", s.config)
	mux.HandleFunc("GET /api/trainjobs", s.trainJobs)
	mux.HandleFunc("GET /api/trainjobs/{namespace}/{name}", s.trainJob)
	mux.HandleFunc("GET /api/trainjobs/{namespace}/{name}/log", s.log)
	mux.HandleFunc("GET /api/trainjobs/{namespace}/{name}/metric", s.metric)
	mux.HandleFunc("GET /api/trainjobs/{namespace}/{name}/pipeline", s.pipeline)
	mux.HandleFunc("GET /api/gpus", s.gpus)
	mux.HandleFunc("POST /api/fit", s.fit)
	mux.HandleFunc("GET /api/trainjobs/{namespace}/{name}/delete", s.deleteListing)
	mux.HandleFunc("GET /api/watch", s.watchTrainJobs)
	mux.HandleFunc("GET /api/watch/{namespace}/{name}", s.watchTrainJob)
	mux.HandleFunc("POST /api/trainjobs/{namespace}/{name}/{action}", s.act)
	return s.guard(mux)
}

// guard refuses what did not come from the page the command's URL opened: a request without the token,
// one that names the server by a DNS name (a name of the attacker's that now resolves to loopback: DNS
// rebinding), one from another site's page (its Origin), and a write unless --allow-writes, from the page
// itself. The token comes in the URL once and is exchanged for a cookie that only this origin's requests carry.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "no-store")
		if !loopbackOrIP(r.Host) {
			refuse(w, http.StatusForbidden, fmt.Sprintf("the dashboard is reached by IP address or localhost, not as %q", r.Host))
			return
		}
		origin := r.Header.Get("Origin")
		if origin != "" && origin != "http://"+r.Host {
			refuse(w, http.StatusForbidden, fmt.Sprintf("requests from %s are refused: only the dashboard's own page may ask", origin))
			return
		}
		if token := r.URL.Query().Get("token"); token != "" && r.Method == http.MethodGet && s.valid(token) {
			http.SetCookie(w, &http.Cookie{Name: cookieName, Value: s.Token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
			// Loaded again without the token, the URL in the address bar and the history holds none.
			u := *r.URL
			q := u.Query()
			q.Del("token")
			u.RawQuery = q.Encode()
			http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
			return
		}
		if c, err := r.Cookie(cookieName); err != nil || !s.valid(c.Value) {
			refuse(w, http.StatusUnauthorized, "open the URL that kubectl trainjob dashboard printed: it holds the token")
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			switch {
			case !s.AllowWrites && !readsOnly(r):
				refuse(w, http.StatusForbidden, readOnlyMessage)
				return
			case origin == "":
				refuse(w, http.StatusForbidden, "a write must come from the dashboard's page (no Origin)")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// readsOnly tells whether a request that is not a GET writes nothing: a TrainJob posted to /api/fit, which is
// only placed on the nodes.
func readsOnly(r *http.Request) bool {
	return r.Method == http.MethodPost && r.URL.Path == "/api/fit"
}

func (s *Server) valid(token string) bool {
	return s.Token != "" && subtle.ConstantTimeCompare([]byte(token), []byte(s.Token)) == 1
}

// loopbackOrIP tells whether host (of a Host header) is localhost or an IP address: names no one else's DNS can
// point at the server.
func loopbackOrIP(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return host == "localhost" || net.ParseIP(host) != nil
}

func refuse(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, errorBody{Error: msg, Forbidden: code == http.StatusForbidden})
}

// errorBody is what the API answers instead of its data: the API server's message, and whether it was the
// user's RBAC that refused, which the page shows as such rather than as nothing.
type errorBody struct {
	Error     string `json:"error"`
	Forbidden bool   `json:"forbidden,omitempty"`
	NotFound  bool   `json:"notFound,omitempty"`
}

func errorOf(err error) errorBody {
	return errorBody{Error: cmdutil.APIMessage(err), Forbidden: apierrors.IsForbidden(err), NotFound: apierrors.IsNotFound(err)}
}

// writeError answers err with the API server's status code and message.
func writeError(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	var st apierrors.APIStatus
	if errors.As(err, &st) && st.Status().Code != 0 {
		code = int(st.Status().Code)
	}
	writeJSON(w, code, errorOf(err))
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// Config is what the page needs to know of the command's flags.
type Config struct {
	Namespace   string `json:"namespace"`
	AllowWrites bool   `json:"allowWrites"`
}

func (s *Server) config(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, Config{Namespace: s.Namespace, AllowWrites: s.AllowWrites})
}

// TrainJobs is the list the page shows: list's rows, each a JSON array of the cells Columns names (short, for
// 10 000 rows).
type TrainJobs struct {
	Namespace string            `json:"namespace"`
	Columns   []string          `json:"columns"`
	Items     []json.RawMessage `json:"items"`
}

// Cells are the rows of l, each its cells by the name of their column, as the page reads them.
func (l *TrainJobs) Cells() ([]map[string]any, error) {
	rows := make([]map[string]any, 0, len(l.Items))
	for _, item := range l.Items {
		var cells []any
		if err := json.Unmarshal(item, &cells); err != nil {
			return nil, err
		}
		if len(cells) != len(l.Columns) {
			return nil, fmt.Errorf("row %s has %d cells for the %d columns %v", item, len(cells), len(l.Columns), l.Columns)
		}
		r := make(map[string]any, len(cells))
		for i, c := range l.Columns {
			r[c] = cells[i]
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// readTrainJobs is the list's rows, of the TrainJobs of the dashboard's watch (Start); listed from the API
// server when it has none, or none to tell (the user may not watch them: the list says why). The rows of the
// TrainJobs in a Kueue LocalQueue are completed from their Workloads now.
func (s *Server) readTrainJobs(ctx context.Context) (*TrainJobs, error) {
	rows, ok := s.cache.list(ctx)
	if !ok {
		var l trainer.TrainJobList
		if err := s.Client.List(ctx, &l, client.InNamespace(s.Namespace)); err != nil {
			return nil, err
		}
		rows = make([]*row, 0, len(l.Items))
		for i := range l.Items {
			r, err := newRow(ctx, s.Rows, &l.Items[i])
			if err != nil {
				return nil, err
			}
			rows = append(rows, r)
		}
	}
	out := &TrainJobs{Namespace: s.Namespace, Columns: columnNames, Items: make([]json.RawMessage, len(rows))}
	var (
		queued   []trainer.TrainJob
		complete []list.Row
		at       []int
	)
	for i, r := range rows {
		out.Items[i] = r.json
		if r.queue != nil {
			queued, complete, at = append(queued, *r.queue), append(complete, r.row), append(at, i)
		}
	}
	if err := s.Rows.Queue(ctx, queued, complete); err != nil {
		return nil, err
	}
	for k, i := range at {
		var err error
		if out.Items[i], err = rowJSON(&complete[k]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (s *Server) trainJobs(w http.ResponseWriter, r *http.Request) {
	tjs, err := s.readTrainJobs(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, tjs)
}

// TrainJob is the page of one TrainJob: status's summary, and the TrainJob and its JobSet as YAML.
type TrainJob struct {
	Summary *status.Summary `json:"summary"`
	// FirstFailureText says how the first failure happened, as status says it.
	FirstFailureText string `json:"firstFailureText,omitempty"`
	// FirstFailureNoLog says why the first failure card shows no log, in words.
	FirstFailureNoLog string `json:"firstFailureNoLog,omitempty"`
	// TrainJobYAML and JobSetYAML are the objects as `kubectl get -o yaml` prints them, without managedFields;
	// JobSetError says why the JobSet is not shown (not built yet, or not readable).
	TrainJobYAML string `json:"trainJobYAML"`
	JobSetYAML   string `json:"jobSetYAML,omitempty"`
	JobSetError  string `json:"jobSetError,omitempty"`
	// Jobs are the JobSet's Jobs.
	Jobs []Job `json:"jobs"`
	// WorkloadYAML is the TrainJob's Kueue Workload, when it is in a LocalQueue and Kueue has made it.
	WorkloadYAML string `json:"workloadYAML,omitempty"`
	// RuntimeYAML is the runtime the TrainJob runs from, as its runtime snapshot holds it; RuntimeError says
	// why it is not shown (not taken yet: upstream Trainer takes none).
	RuntimeYAML  string `json:"runtimeYAML,omitempty"`
	RuntimeError string `json:"runtimeError,omitempty"`
}

// Job is one of the JobSet's Jobs.
type Job struct {
	Name          string `json:"name"`
	ReplicatedJob string `json:"replicatedJob"`
	// Completions is spec.completions, "-" when unset.
	Completions string `json:"completions"`
	Active      int32  `json:"active"`
	Succeeded   int32  `json:"succeeded"`
	Failed      int32  `json:"failed"`
	// Status is the Job's True condition (Complete, Failed, Suspended), else Running.
	Status string `json:"status"`
}

func (s *Server) readTrainJob(ctx context.Context, namespace, name string) (*TrainJob, error) {
	if !s.shows(namespace) {
		return nil, apierrors.NewNotFound(trainer.GroupVersion.WithResource("trainjobs").GroupResource(), name)
	}
	in, err := status.Fetch(ctx, status.Reader{Client: s.Client, Kueue: s.Kueue, Logs: s.Logs}, namespace, name)
	if err != nil {
		return nil, err
	}
	out := &TrainJob{Summary: status.Summarize(in, s.Clock.Now())}
	if f := out.Summary.FirstFailure; f != nil {
		out.FirstFailureText = f.Text()
		if f.LogUnavailable != "" {
			out.FirstFailureNoLog = noLog(in.FailureLog, f.LogUnavailable)
		}
	}
	if out.TrainJobYAML, err = s.yaml(in.TrainJob); err != nil {
		return nil, err
	}
	js := &jobsetv1alpha2.JobSet{}
	if err := s.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, js); err != nil {
		out.JobSetError = cmdutil.APIMessage(err)
	} else if out.JobSetYAML, err = s.yaml(js); err != nil {
		return nil, err
	}
	out.Jobs = jobsOf(in.Jobs)
	if in.Queue != nil && in.Queue.Workload != nil {
		wl := *in.Queue.Workload
		wl.ManagedFields = nil
		b, err := yaml.Marshal(&wl)
		if err != nil {
			return nil, err
		}
		out.WorkloadYAML = string(b)
	}
	out.RuntimeYAML, out.RuntimeError = s.runtimeSnapshot(ctx, in.TrainJob)
	return out, nil
}

// noLog says why the first failure's log, l, is not shown, as status says it.
func noLog(l *status.FailureLog, why string) string {
	if l != nil && l.Err != nil {
		return "This pod's log could not be read: " + why
	}
	return "No log: " + why
}

// runtimeSnapshot is the runtime tj runs from, as its runtime snapshot holds it, or why it is not shown.
func (s *Server) runtimeSnapshot(ctx context.Context, tj *trainer.TrainJob) (yaml, why string) {
	cm := &corev1.ConfigMap{}
	err := s.Client.Get(ctx, client.ObjectKey{Namespace: tj.Namespace, Name: snapshot.Name(tj)}, cm)
	switch {
	case apierrors.IsNotFound(err):
		return "", "no runtime snapshot: the TrainJob runs from " + pipeline.RuntimeRefGroupKind(tj).Kind + " " + tj.Spec.RuntimeRef.Name +
			" (the operator has not taken it yet, or upstream Trainer's controller, which takes none, runs it)"
	case err != nil:
		return "", cmdutil.APIMessage(err)
	}
	if err := pipeline.CheckControlled(cm, "ConfigMap", tj); err != nil {
		return "", err.Error()
	}
	return cm.Data[snapshot.Key], ""
}

// jobsOf are the JobSet's Jobs as the page shows them.
func jobsOf(jobs []batchv1.Job) []Job {
	out := make([]Job, 0, len(jobs))
	for _, j := range jobs {
		row := Job{Name: j.Name, ReplicatedJob: j.Labels[jobsetv1alpha2.ReplicatedJobNameKey], Completions: printers.None,
			Active: j.Status.Active, Succeeded: j.Status.Succeeded, Failed: j.Status.Failed, Status: "Running"}
		if j.Spec.Completions != nil {
			row.Completions = strconv.Itoa(int(*j.Spec.Completions))
		}
		for _, c := range j.Status.Conditions {
			if c.Status == corev1.ConditionTrue && (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed || c.Type == batchv1.JobSuspended) {
				row.Status = string(c.Type)
			}
		}
		out = append(out, row)
	}
	slices.SortFunc(out, func(a, b Job) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// pipeline answers describe-pipeline's description of the TrainJob: what each plugin of each extension point
// changed, as the binary's operator builds it now.
func (s *Server) pipeline(w http.ResponseWriter, r *http.Request) {
	namespace, name := r.PathValue("namespace"), r.PathValue("name")
	if !s.shows(namespace) {
		writeError(w, apierrors.NewNotFound(trainer.GroupVersion.WithResource("trainjobs").GroupResource(), name))
		return
	}
	decoder := serializer.NewCodecFactory(s.Client.Scheme()).UniversalDeserializer()
	d, err := describe.Live(r.Context(), s.Client, decoder, s.Pipeline, namespace, name)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

// shows tells whether the dashboard shows namespace: the one of the command, or every one with -A.
func (s *Server) shows(namespace string) bool { return s.Namespace == "" || s.Namespace == namespace }

// yaml is obj as kubectl get -o yaml prints it, without managedFields.
func (s *Server) yaml(obj client.Object) (string, error) {
	obj = obj.DeepCopyObject().(client.Object)
	obj.SetManagedFields(nil)
	gvk, err := apiutil.GVKForObject(obj, s.Client.Scheme())
	if err != nil {
		return "", err
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	b, err := yaml.Marshal(obj)
	return string(b), err
}

func (s *Server) trainJob(w http.ResponseWriter, r *http.Request) {
	tj, err := s.readTrainJob(r.Context(), r.PathValue("namespace"), r.PathValue("name"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, tj)
}

// log streams the log of one pod of the TrainJob (its container of the trainer, the first), the last lines
// of it and, with follow=1, what it writes next; of its previous container with previous=1; with grep=REGEXP
// only the lines that match.
func (s *Server) log(w http.ResponseWriter, r *http.Request) {
	grep, ok := queryRegexp(w, r, "grep", "")
	if !ok {
		return
	}
	opts := &corev1.PodLogOptions{Follow: r.URL.Query().Get("follow") == "1", TailLines: ptr.To[int64](500),
		Previous: r.URL.Query().Get("previous") == "1"}
	stream, err := s.podLog(r, opts)
	if err != nil {
		writeError(w, err)
		return
	}
	defer func() { _ = stream.Close() }()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	flusher, _ := w.(http.Flusher)
	flush := func() {
		if flusher != nil {
			flusher.Flush()
		}
	}
	if grep != nil {
		// Line by line: only the lines that match, each as soon as it is written.
		lines := logLines(stream)
		for lines.Scan() {
			if grep.Match(lines.Bytes()) {
				if _, err := fmt.Fprintf(w, "%s\n", lines.Bytes()); err != nil {
					return
				}
				flush()
			}
		}
		return
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := stream.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			flush()
		}
		if err != nil {
			return
		}
	}
}

// podLog opens the log of the pod the request names (pod=POD) if it is the TrainJob's: its JobSet's label is
// not enough, the controller chain to the JobSet the TrainJob controls must hold (cmdutil.Lineage), as for
// every pod the CLI shows.
func (s *Server) podLog(r *http.Request, opts *corev1.PodLogOptions) (io.ReadCloser, error) {
	ctx := r.Context()
	namespace, name, podName := r.PathValue("namespace"), r.PathValue("name"), r.URL.Query().Get("pod")
	if !s.shows(namespace) {
		return nil, apierrors.NewNotFound(trainer.GroupVersion.WithResource("trainjobs").GroupResource(), name)
	}
	pod, tj := &corev1.Pod{}, &trainer.TrainJob{}
	if err := s.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: podName}, pod); err != nil {
		return nil, err
	}
	notOurs := apierrors.NewNotFound(corev1.Resource("pods"), podName)
	if pod.Labels[jobsetv1alpha2.JobSetNameKey] != name {
		return nil, notOurs
	}
	if err := s.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, tj); err != nil {
		return nil, err
	}
	lineage, err := cmdutil.ReadLineage(ctx, s.Client, tj)
	if err != nil {
		return nil, err
	}
	if owns, err := lineage.Owns(ctx, pod); err != nil {
		return nil, err
	} else if !owns {
		return nil, notOurs
	}
	return s.Logs.CoreV1().Pods(namespace).GetLogs(podName, opts).Stream(r.Context())
}

// queryRegexp is the regular expression of the request's parameter param (def when it is not given; nil when
// neither is); an invalid one is answered 400 and ok is false.
func queryRegexp(w http.ResponseWriter, r *http.Request, param, def string) (re *regexp.Regexp, ok bool) {
	expr := r.URL.Query().Get(param)
	if expr == "" {
		expr = def
	}
	if expr == "" {
		return nil, true
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody{Error: fmt.Sprintf("%s: invalid regular expression: %v", param, err)})
		return nil, false
	}
	return re, true
}

// logLines reads a log line by line, a line up to 1 MiB.
func logLines(r io.Reader) *bufio.Scanner {
	lines := bufio.NewScanner(r)
	lines.Buffer(nil, 1<<20)
	return lines
}

// DefaultMetric is the metric the charts parse from the logs unless asked for another: the loss, as the demo's
// trainer prints it (`step 12 loss 0.4321`).
const DefaultMetric = "loss"

// metricLines is how many of a log's last lines the charts parse.
const metricLines = 2000

// Metric is a metric of one pod, parsed from the last metricLines lines of its log.
type Metric struct {
	Pod    string  `json:"pod"`
	Regexp string  `json:"regexp"`
	Points []Point `json:"points"`
}

// Point is the metric's value on one line of the log, at a step of the training.
type Point struct {
	Step  int64   `json:"step"`
	Value float64 `json:"value"`
}

var (
	// number is a decimal number, as training loops print them: 2, -0.5, 6.25e-01.
	number = regexp.MustCompile(`^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?`)
	// stepOf finds a line's step: the number after "step".
	stepOf = regexp.MustCompile(`(?i)\bstep\b[\s:=#]*(\d+)`)
	// separator is what may stand between a metric's name and its value: `loss 0.5`, `loss=0.5`, `loss: 0.5`.
	separator = regexp.MustCompile(`^[\s:=]*`)
)

// metric answers the metric regexp=REGEXP (DefaultMetric unless given) of one pod of the TrainJob, parsed from
// its log by parseMetric.
func (s *Server) metric(w http.ResponseWriter, r *http.Request) {
	re, ok := queryRegexp(w, r, "regexp", DefaultMetric)
	if !ok {
		return
	}
	stream, err := s.podLog(r, &corev1.PodLogOptions{TailLines: ptr.To[int64](metricLines)})
	if err != nil {
		writeError(w, err)
		return
	}
	defer func() { _ = stream.Close() }()
	points, err := parseMetric(stream, re)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, Metric{Pod: r.URL.Query().Get("pod"), Regexp: re.String(), Points: points})
}

// parseMetric is the points of the lines of log that re matches: its value is re's first group, or without
// one the number right after the match (after spaces, ":" or "="); its step is the number after "step" on the
// line, or else the one after the previous point's. A line without a value, or whose value is not a finite
// number, is no point.
func parseMetric(log io.Reader, re *regexp.Regexp) ([]Point, error) {
	points := []Point{}
	lines := logLines(log)
	for lines.Scan() {
		line := lines.Text()
		m := re.FindStringSubmatchIndex(line)
		if m == nil {
			continue
		}
		var text string
		if len(m) > 2 && m[2] >= 0 {
			text = line[m[2]:m[3]]
		} else {
			rest := line[m[1]:]
			text = number.FindString(rest[len(separator.FindString(rest)):])
		}
		v, err := strconv.ParseFloat(text, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		step := int64(1)
		if len(points) > 0 {
			step = points[len(points)-1].Step + 1
		}
		if sm := stepOf.FindStringSubmatch(line); sm != nil {
			if n, err := strconv.ParseInt(sm[1], 10, 64); err == nil {
				step = n
			}
		}
		points = append(points, Point{Step: step, Value: v})
	}
	return points, lines.Err()
}

// GPUs is the GPUs view: every node's GPUs and who holds them, as fit counts them, and what fit notes of what
// it could not read.
type GPUs struct {
	Nodes []fit.NodeGPUs `json:"nodes"`
	Notes []string       `json:"notes,omitempty"`
}

// gpus answers the GPUs view: fit's read of the cluster (its nodes, the pods on them, the DRA devices and
// claims), every node's GPUs counted by fit.GPUs.
func (s *Server) gpus(w http.ResponseWriter, r *http.Request) {
	cl, err := fit.ReadCluster(r.Context(), s.Client, fit.ReadOptions{Pods: true, Claims: true, TrainJobs: true})
	if err != nil {
		writeFitError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, GPUs{Nodes: fit.GPUs(cl), Notes: cl.Notes})
}

// FitResult is where a pasted TrainJob would fit now: fit -o json's document, and the pipeline's warnings.
type FitResult struct {
	Fit      *fit.Fit `json:"fit"`
	Warnings []string `json:"warnings,omitempty"`
}

// maxFitBody bounds the YAML a page may post to /api/fit.
const maxFitBody = 1 << 20

// fit answers where the TrainJob of the posted YAML (with its runtime, if the cluster has not it) would fit
// now, as fit -f says it; a TrainJob without a namespace is of the dashboard's (default with -A).
func (s *Server) fit(w http.ResponseWriter, r *http.Request) {
	namespace := cmp.Or(s.Namespace, metav1.NamespaceDefault)
	f, warnings, err := fit.File(r.Context(), s.Client, s.Pipeline, namespace, http.MaxBytesReader(w, r.Body, maxFitBody))
	if err != nil {
		writeFitError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, FitResult{Fit: f, Warnings: warnings})
}

// writeFitError answers an error of fit: the API server's as writeError does, one that says the user may not
// list nodes as forbidden, and any other (the YAML) as a bad request.
func writeFitError(w http.ResponseWriter, err error) {
	var st apierrors.APIStatus
	switch {
	case errors.Is(err, fit.ErrNodesForbidden):
		writeJSON(w, http.StatusForbidden, errorBody{Error: err.Error(), Forbidden: true})
	case errors.As(err, &st):
		writeError(w, err)
	default:
		writeJSON(w, http.StatusBadRequest, errorBody{Error: err.Error()})
	}
}

// act suspends or resumes a TrainJob as `suspend` and `resume` do; the guard has let it through only with
// --allow-writes.
// act runs an action on a TrainJob with the CLI's code: suspend and resume as `suspend` and `resume` do,
// delete as `delete -y` does (of the TrainJob whose listing the user confirmed: ?uid=), rerun as `rerun` does
// (a JSON body {"name", "set"}: NEW and the --set changes). The guard has let it through only with
// --allow-writes, from the page.
func (s *Server) act(w http.ResponseWriter, r *http.Request) {
	namespace, name, action := r.PathValue("namespace"), r.PathValue("name"), r.PathValue("action")
	if !slices.Contains([]string{"suspend", "resume", "delete", "rerun"}, action) {
		writeJSON(w, http.StatusNotFound, errorBody{Error: fmt.Sprintf("no action %q: suspend, resume, delete or rerun", action)})
		return
	}
	if !s.shows(namespace) {
		writeError(w, apierrors.NewNotFound(trainer.GroupVersion.WithResource("trainjobs").GroupResource(), name))
		return
	}
	var out, errOut bytes.Buffer
	streams := cmdutil.Streams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}
	answer := Action{}
	var err error
	switch action {
	case "suspend", "resume":
		o := &lifecycle.SuspendOptions{Streams: streams, Suspend: action == "suspend", Names: []string{name}, Namespace: namespace,
			Client: s.Client, Kueue: s.Kueue}
		err = o.Run(r.Context())
	case "delete":
		uid := types.UID(r.URL.Query().Get("uid"))
		if uid == "" {
			writeJSON(w, http.StatusBadRequest, errorBody{Error: "delete needs the uid of the TrainJob whose listing was confirmed (GET …/delete lists it)"})
			return
		}
		err = s.deleteOptions(streams, namespace, name, uid).Run(r.Context())
	case "rerun":
		var req RerunRequest
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&req); err != nil {
			writeJSON(w, http.StatusBadRequest, errorBody{Error: fmt.Sprintf("rerun takes a JSON body {\"name\", \"set\"}: %v", err)})
			return
		}
		var tj *trainer.TrainJob
		if tj, err = create.RerunWith(r.Context(), streams, s.Client, s.Kueue, *s.Pipeline, namespace, name, req.Name, req.Set); err == nil {
			answer.Name = tj.Name
		}
	}
	if err != nil {
		if !errors.As(err, new(apierrors.APIStatus)) {
			writeJSON(w, http.StatusUnprocessableEntity, errorBody{Error: err.Error()})
			return
		}
		writeError(w, err)
		return
	}
	answer.Message = strings.TrimSpace(out.String() + errOut.String())
	writeJSON(w, http.StatusOK, answer)
}

// Action is what an action answers: what the command printed, and the TrainJob a rerun created.
type Action struct {
	Message string `json:"message"`
	Name    string `json:"name,omitempty"`
}

// RerunRequest is the body of a rerun: NEW ("" lets rerun choose) and the --set changes, FLAG=VALUE each.
type RerunRequest struct {
	Name string   `json:"name"`
	Set  []string `json:"set"`
}

// DeleteListing is what delete lists before it asks, as it prints it, and the UID of the TrainJob listed, which
// the delete that follows requires.
type DeleteListing struct {
	Listing string    `json:"listing"`
	UID     types.UID `json:"uid"`
}

// deleteOptions are `delete NAME -y` in namespace (the default cascade, not waiting: the page sees the
// TrainJob go), of the TrainJob of UID uid when it is given.
func (s *Server) deleteOptions(streams cmdutil.Streams, namespace, name string, uid types.UID) *lifecycle.DeleteOptions {
	o := lifecycle.NewDeleteOptions(streams)
	o.Names, o.Namespace, o.Client, o.Yes, o.Wait, o.UID = []string{name}, namespace, s.Client, true, false, uid
	return o
}

// deleteListing answers what `delete NAME` lists before it asks: the TrainJob with its stage and what it owns.
// A listing is the first step of a delete: refused without --allow-writes, as the delete is.
func (s *Server) deleteListing(w http.ResponseWriter, r *http.Request) {
	namespace, name := r.PathValue("namespace"), r.PathValue("name")
	if !s.AllowWrites {
		refuse(w, http.StatusForbidden, readOnlyMessage)
		return
	}
	if !s.shows(namespace) {
		writeError(w, apierrors.NewNotFound(trainer.GroupVersion.WithResource("trainjobs").GroupResource(), name))
		return
	}
	listing, targets, err := s.deleteOptions(cmdutil.Streams{}, namespace, name, "").Listing(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, DeleteListing{Listing: listing, UID: targets[0].UID})
}

// watchTrainJobs pushes the list (event "trainjobs") at once and after every change to the TrainJobs shown,
// and to their Kueue Workloads where Kueue is installed (a Queued TrainJob's admission and reason change only
// there), as server-sent events, until the page goes; a read that fails is pushed as event "error".
func (s *Server) watchTrainJobs(w http.ResponseWriter, r *http.Request) {
	var watches []cmdutil.Watch
	if s.cache == nil {
		watches = append(watches, cmdutil.Watch{Object: &trainer.TrainJob{}, Namespace: s.Namespace})
	}
	if s.Kueue != nil {
		watches = append(watches, s.Kueue.Watches(r.Context(), s.Namespace)...)
	}
	s.push(w, r, "trainjobs", watches, func(ctx context.Context) (any, error) { return s.readTrainJobs(ctx) })
}

// watchTrainJob pushes the page of one TrainJob (event "trainjob") at once and after every change that
// status -w follows.
func (s *Server) watchTrainJob(w http.ResponseWriter, r *http.Request) {
	namespace, name := r.PathValue("namespace"), r.PathValue("name")
	s.push(w, r, "trainjob", status.Watches(namespace, name),
		func(ctx context.Context) (any, error) { return s.readTrainJob(ctx, namespace, name) })
}

// push writes read's value as event name at once and after each change of watches, with the CLI's one
// watcher (cmdutil.Changes); changes that come together are pushed once. The first read waits for the
// watches' first lists (a refused watch does not hold it back), so that what they list is no change: a page
// that does not change is read and drawn once.
func (s *Server) push(w http.ResponseWriter, r *http.Request, event string, watches []cmdutil.Watch, read func(context.Context) (any, error)) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeJSON(w, http.StatusInternalServerError, errorBody{Error: "streaming is not supported"})
		return
	}
	ctx := r.Context()
	// Watch first, then read: no change can fall between the two.
	changes, err := cmdutil.Changes(ctx, s.Client, s.Resync, watches...)
	if err != nil {
		writeError(w, err)
		return
	}
	if event == "trainjobs" && s.cache != nil {
		changes = s.cache.changes(ctx, changes)
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	for {
		v, err := read(ctx)
		name := event
		if err != nil {
			name, v = "error", errorOf(err)
		}
		if ctx.Err() != nil {
			return
		}
		if err := writeEvent(w, name, v); err != nil {
			return
		}
		flusher.Flush()
		select {
		case <-ctx.Done():
			return
		case <-changes:
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(s.Batch):
		}
	}
}

// writeEvent writes one server-sent event: its name and its data, JSON on one line.
func writeEvent(w io.Writer, name string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, data)
	return err
}
