package statusserver

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/scheme"
)

// tokenOf is a JWT claiming the audience of TrainJob team/name, namespace
// ns and, unless pod is "", a pod: what the server looks at before a review.
func tokenOf(ns, name, pod, salt string) string {
	enc := base64.RawURLEncoding.EncodeToString
	k8s := map[string]any{"namespace": ns}
	if pod != "" {
		k8s["pod"] = map[string]string{"name": pod}
	}
	claims, _ := json.Marshal(map[string]any{"aud": []string{"trainer.kubeflow.org/v1alpha1/namespaces/team/trainjobs/" + name + "/status"}, "kubernetes.io": k8s})
	return enc([]byte(`{"alg":"RS256"}`)) + "." + enc(claims) + "." + enc([]byte(salt))
}

const trainJobUID = "uid-of-alpha"

var (
	validToken    = tokenOf("team", "alpha", "alpha-node-0-0", "")
	forgedToken   = tokenOf("team", "alpha", "alpha-node-0-0", "forged")
	otherNSToken  = tokenOf("rival", "alpha", "alpha-node-0-0", "")
	userToken     = tokenOf("team", "alpha", "alpha-node-0-0", "user")
	unboundToken  = tokenOf("team", "alpha", "", "")
	betaPodToken  = tokenOf("team", "alpha", "beta-node-0-0", "")
	lonePodToken  = tokenOf("team", "alpha", "loner", "")
	betaJobToken  = tokenOf("team", "beta", "alpha-node-0-0", "")
	ownerRefsOfUs = []metav1.OwnerReference{{APIVersion: "trainer.kubeflow.org/v1alpha1", Kind: "TrainJob", Name: "alpha", UID: trainJobUID, Controller: ptr.To(true)}}
)

// chain is a pod of a Job of a JobSet controlled by TrainJob owner, as
// the JobSet and Job controllers make them.
func chain(prefix string, owner metav1.OwnerReference) []client.Object {
	controlledBy := func(apiVersion, kind, name string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID(name + "-uid"), Controller: ptr.To(true)}}
	}
	return []client.Object{
		&jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: prefix, UID: types.UID(prefix + "-uid"), OwnerReferences: []metav1.OwnerReference{owner}}},
		&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: prefix + "-node-0", UID: types.UID(prefix + "-node-0-uid"),
			OwnerReferences: controlledBy("jobset.x-k8s.io/v1alpha2", "JobSet", prefix)}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: prefix + "-node-0-0", UID: types.UID(prefix + "-node-0-0-uid"),
			OwnerReferences: controlledBy("batch/v1", "Job", prefix+"-node-0")}},
	}
}

const (
	path     = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/team/trainjobs/alpha/status"
	audience = "trainer.kubeflow.org/v1alpha1/namespaces/team/trainjobs/alpha/status"
	report   = `{"trainerStatus":{"progressPercentage":42,"estimatedRemainingSeconds":120,` +
		`"metrics":[{"name":"loss","value":"0.123"}],"lastUpdatedTime":"2026-12-02T10:00:00Z"}}`
)

// apiServer stands in for the API server: it reviews tokens as a table
// says, and records or refuses status applies.
type apiServer struct {
	// users maps a token to the user it authenticates as, for audience
	// only; a ServiceAccount user bound to pod <name> is "sa@<name>".
	users     map[string]string
	reviewErr error
	applyErr  error
	// trainJobUID is the UID of TrainJob team/alpha (default the one its
	// pods belong to); "-" is no TrainJob.
	trainJobUID types.UID

	reviews int
	applied []map[string]any
	opts    []client.SubResourceApplyOptions
}

func (a *apiServer) client() client.Client {
	beta := ownerRefsOfUs[0]
	beta.Name, beta.UID = "beta", "uid-of-beta"
	objs := append(chain("alpha", ownerRefsOfUs[0]), chain("beta", beta)...)
	objs = append(objs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "loner", UID: "loner-uid"}})
	switch a.trainJobUID {
	case "":
		objs = append(objs, &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "alpha", UID: trainJobUID}})
	case "-":
	default:
		objs = append(objs, &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "alpha", UID: a.trainJobUID}})
	}
	return fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.CreateOption) error {
			review, ok := obj.(*authenticationv1.TokenReview)
			if !ok {
				return errors.New("only TokenReviews are created")
			}
			a.reviews++
			if a.reviewErr != nil {
				return a.reviewErr
			}
			user, ok := a.users[review.Spec.Token]
			if ok && len(review.Spec.Audiences) == 1 && review.Spec.Audiences[0] == audience {
				username, pod, bound := strings.Cut(user, "@")
				info := authenticationv1.UserInfo{Username: username}
				if bound {
					info.Extra = map[string]authenticationv1.ExtraValue{extraPodName: {pod}, extraPodUID: {pod + "-uid"}}
				}
				review.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: info, Audiences: review.Spec.Audiences}
			}
			return nil
		},
		SubResourceApply: func(_ context.Context, _ client.Client, sub string, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
			if sub != "status" {
				return errors.New("only status is applied, not " + sub)
			}
			if a.applyErr != nil {
				return a.applyErr
			}
			data, err := json.Marshal(obj)
			if err != nil {
				return err
			}
			var m map[string]any
			if err := json.Unmarshal(data, &m); err != nil {
				return err
			}
			a.applied = append(a.applied, m)
			a.opts = append(a.opts, *(&client.SubResourceApplyOptions{}).ApplyOpts(opts))
			return nil
		},
	}).Build()
}

func TestUpdateStatus(t *testing.T) {
	invalid := apierrors.NewInvalid(schema.GroupKind{Group: "trainer.kubeflow.org", Kind: "TrainJob"}, "alpha", field.ErrorList{
		field.Invalid(field.NewPath("status", "trainerStatus", "progressPercentage"), 101, "should be less than or equal to 100"),
	})
	failure := func(code int32, reason metav1.StatusReason, message string) *metav1.Status {
		return &metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: metav1.StatusFailure, Code: code, Reason: reason, Message: message}
	}
	wantApplied := map[string]any{
		"apiVersion": "trainer.kubeflow.org/v1alpha1",
		"kind":       "TrainJob",
		"metadata":   map[string]any{"name": "alpha", "namespace": "team"},
		"status": map[string]any{"trainerStatus": map[string]any{
			"progressPercentage":        float64(42),
			"estimatedRemainingSeconds": float64(120),
			"metrics":                   []any{map[string]any{"name": "loss", "value": "0.123"}},
			"lastUpdatedTime":           "2026-12-02T10:00:00Z",
		}},
	}
	cases := []struct {
		name   string
		method string
		path   string
		auth   string
		body   string
		api    apiServer
		// budget is the review budget (nil: none).
		budget *ReviewBudget
		// wantReviews, when set, is the number of TokenReviews.
		wantReviews *int
		// wantCode and wantStatus are the answer; wantBody the echoed
		// request when it succeeds.
		wantCode    int
		wantStatus  *metav1.Status
		wantBody    string
		wantApplied []map[string]any
	}{
		{
			name:        "report applied",
			body:        report,
			wantCode:    http.StatusOK,
			wantBody:    report,
			wantApplied: []map[string]any{wantApplied},
		},
		{
			name:     "empty request is accepted and applies nothing",
			body:     `{}`,
			wantCode: http.StatusOK,
			wantBody: `{}`,
		},
		{
			name:       "no token",
			auth:       "-",
			body:       report,
			wantCode:   http.StatusUnauthorized,
			wantStatus: failure(401, metav1.StatusReasonUnauthorized, "an Authorization: Bearer <token> header is required"),
		},
		{
			name:       "token the API server does not know",
			auth:       "Bearer " + forgedToken,
			body:       report,
			wantCode:   http.StatusUnauthorized,
			wantStatus: failure(401, metav1.StatusReasonUnauthorized, "the token is not valid for audience "+audience),
		},
		{
			name:        "not a JWT: refused without a review",
			auth:        "Bearer garbage",
			body:        report,
			wantCode:    http.StatusUnauthorized,
			wantStatus:  failure(401, metav1.StatusReasonUnauthorized, "the token is not valid for audience "+audience),
			wantReviews: ptr.To(0),
		},
		{
			name:        "claims another TrainJob's audience: refused without a review",
			auth:        "Bearer " + betaJobToken,
			body:        report,
			wantCode:    http.StatusUnauthorized,
			wantStatus:  failure(401, metav1.StatusReasonUnauthorized, "the token is not valid for audience "+audience),
			wantReviews: ptr.To(0),
		},
		{
			name:       "token of another namespace",
			auth:       "Bearer " + otherNSToken,
			body:       report,
			wantCode:   http.StatusForbidden,
			wantStatus: failure(403, metav1.StatusReasonForbidden, "a token of namespace rival may not report for TrainJobs of namespace team"),
		},
		{
			name:       "token of a user, not a ServiceAccount",
			auth:       "Bearer " + userToken,
			body:       report,
			wantCode:   http.StatusForbidden,
			wantStatus: failure(403, metav1.StatusReasonForbidden, "only a ServiceAccount token of namespace team may report, not jane"),
		},
		{
			name:        "token bound to no pod",
			auth:        "Bearer " + unboundToken,
			body:        report,
			wantCode:    http.StatusForbidden,
			wantStatus:  failure(403, metav1.StatusReasonForbidden, "only a token bound to a pod of TrainJob team/alpha may report; this one is bound to no pod"),
			wantReviews: ptr.To(0),
		},
		{
			name:       "token of a pod of another TrainJob",
			auth:       "Bearer " + betaPodToken,
			body:       report,
			wantCode:   http.StatusForbidden,
			wantStatus: failure(403, metav1.StatusReasonForbidden, "pod team/beta-node-0-0 is not a pod of TrainJob team/alpha: its JobSet beta is controlled by TrainJob beta"),
		},
		{
			name:       "token of a pod nothing controls",
			auth:       "Bearer " + lonePodToken,
			body:       report,
			wantCode:   http.StatusForbidden,
			wantStatus: failure(403, metav1.StatusReasonForbidden, "pod team/loner is not a pod of TrainJob team/alpha: it has no controller"),
		},
		{
			name:       "TrainJob of that name is a later one",
			body:       report,
			api:        apiServer{trainJobUID: "uid-of-a-later-alpha"},
			wantCode:   http.StatusForbidden,
			wantStatus: failure(403, metav1.StatusReasonForbidden, "pod team/alpha-node-0-0 is not a pod of TrainJob team/alpha: it belongs to an earlier TrainJob of that name"),
		},
		{
			name:        "review budget spent",
			body:        report,
			budget:      &ReviewBudget{},
			wantCode:    http.StatusTooManyRequests,
			wantStatus:  failure(429, metav1.StatusReasonTooManyRequests, "too many tokens to review; retry later"),
			wantReviews: ptr.To(0),
		},
		{
			name:       "token review fails",
			body:       report,
			api:        apiServer{reviewErr: apierrors.NewServiceUnavailable("etcd is away")},
			wantCode:   http.StatusInternalServerError,
			wantStatus: failure(500, metav1.StatusReasonInternalError, "the token could not be reviewed"),
		},
		{
			name:       "body over 64 KiB",
			body:       `{"trainerStatus":{"metrics":[` + strings.Repeat(`{"name":"loss","value":"0.1"},`, 3000) + `]}}`,
			wantCode:   http.StatusRequestEntityTooLarge,
			wantStatus: failure(413, metav1.StatusReasonRequestEntityTooLarge, "the request body is larger than 65536 bytes"),
		},
		{
			name:       "not JSON",
			body:       `progress=42`,
			wantCode:   http.StatusUnprocessableEntity,
			wantStatus: failure(422, metav1.StatusReasonInvalid, `invalid request body, want {"trainerStatus": {...}}: invalid character 'p' looking for beginning of value`),
		},
		{
			name:       "empty body",
			body:       ``,
			wantCode:   http.StatusUnprocessableEntity,
			wantStatus: failure(422, metav1.StatusReasonInvalid, `invalid request body, want {"trainerStatus": {...}}: the body is empty`),
		},
		{
			name:       "misspelt field",
			body:       `{"trainerStatus":{"progress":42}}`,
			wantCode:   http.StatusUnprocessableEntity,
			wantStatus: failure(422, metav1.StatusReasonInvalid, `invalid request body, want {"trainerStatus": {...}}: json: unknown field "progress"`),
		},
		{
			name:       "API server finds the report invalid",
			body:       report,
			api:        apiServer{applyErr: invalid},
			wantCode:   http.StatusUnprocessableEntity,
			wantStatus: failure(422, metav1.StatusReasonInvalid, invalid.ErrStatus.Message),
		},
		{
			name:       "API server finds the request bad",
			body:       report,
			api:        apiServer{applyErr: apierrors.NewBadRequest("status.trainerStatus.metrics: too many")},
			wantCode:   http.StatusUnprocessableEntity,
			wantStatus: failure(422, metav1.StatusReasonInvalid, "status.trainerStatus.metrics: too many"),
		},
		{
			name:       "TrainJob does not exist",
			body:       report,
			api:        apiServer{trainJobUID: "-"},
			wantCode:   http.StatusNotFound,
			wantStatus: failure(404, metav1.StatusReasonNotFound, "Train job not found"),
		},
		{
			name:       "other API error",
			body:       report,
			api:        apiServer{applyErr: apierrors.NewServiceUnavailable("etcd is away")},
			wantCode:   http.StatusInternalServerError,
			wantStatus: failure(500, metav1.StatusReasonInternalError, "Internal error"),
		},
		{
			name:       "GET of the status path",
			method:     http.MethodGet,
			wantCode:   http.StatusNotFound,
			wantStatus: failure(404, metav1.StatusReasonNotFound, "GET "+path+" is not served; POST /apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs/{name}/status"),
		},
		{
			name:       "another path",
			path:       "/apis/trainer.kubeflow.org/v1alpha1/namespaces/team/trainjobs/alpha",
			body:       report,
			wantCode:   http.StatusNotFound,
			wantStatus: failure(404, metav1.StatusReasonNotFound, "POST /apis/trainer.kubeflow.org/v1alpha1/namespaces/team/trainjobs/alpha is not served; POST /apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs/{name}/status"),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			api := tc.api
			api.users = map[string]string{
				validToken:   "system:serviceaccount:team:trainer@alpha-node-0-0",
				otherNSToken: "system:serviceaccount:rival:trainer@alpha-node-0-0",
				userToken:    "jane",
				betaPodToken: "system:serviceaccount:team:trainer@beta-node-0-0",
				lonePodToken: "system:serviceaccount:team:trainer@loner",
			}
			s := New(Options{Client: api.client(), ReviewBudget: tc.budget})
			method, p, auth := tc.method, tc.path, tc.auth
			if method == "" {
				method = http.MethodPost
			}
			if p == "" {
				p = path
			}
			req := httptest.NewRequest(method, p, strings.NewReader(tc.body))
			switch auth {
			case "":
				req.Header.Set("Authorization", "Bearer "+validToken)
			case "-":
			default:
				req.Header.Set("Authorization", auth)
			}
			rec := httptest.NewRecorder()
			s.handler.ServeHTTP(rec, req)

			if rec.Code != tc.wantCode {
				t.Errorf("code = %d, want %d; body %s", rec.Code, tc.wantCode, rec.Body)
			}
			if got := rec.Header().Get("Content-Type"); got != "application/json" {
				t.Errorf("Content-Type = %q, want application/json", got)
			}
			if tc.wantStatus != nil {
				got := &metav1.Status{}
				if err := json.Unmarshal(rec.Body.Bytes(), got); err != nil {
					t.Fatalf("answer is not a Status: %v\n%s", err, rec.Body)
				}
				if diff := cmp.Diff(tc.wantStatus, got); diff != "" {
					t.Errorf("answer (-want +got):\n%s", diff)
				}
			} else if diff := cmp.Diff(tc.wantBody, strings.TrimSpace(rec.Body.String())); diff != "" {
				t.Errorf("answer (-want +got):\n%s", diff)
			}
			if tc.wantReviews != nil && api.reviews != *tc.wantReviews {
				t.Errorf("%d TokenReviews, want %d", api.reviews, *tc.wantReviews)
			}
			if diff := cmp.Diff(tc.wantApplied, api.applied); diff != "" {
				t.Errorf("applied (-want +got):\n%s", diff)
			}
			for _, o := range api.opts {
				if o.FieldManager != "trainer-status" || o.Force == nil || !*o.Force {
					t.Errorf("applied as %q force %v, want trainer-status with force", o.FieldManager, o.Force)
				}
			}
		})
	}
}

// TestVerdictsAreCached: a token the API server accepted for an audience
// is not reviewed again for a minute, a refused one for refusedTTL; the
// two caches are apart, so refusals never evict an accepted token.
func TestVerdictsAreCached(t *testing.T) {
	api := &apiServer{users: map[string]string{validToken: "system:serviceaccount:team:trainer@alpha-node-0-0"}}
	s := New(Options{Client: api.client()})
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	s.accepted.now = func() time.Time { return now }
	s.refused.now = s.accepted.now
	post := func(p, token string) int {
		req := httptest.NewRequest(http.MethodPost, p, strings.NewReader(`{}`))
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		s.handler.ServeHTTP(rec, req)
		return rec.Code
	}
	type step struct {
		Code    int
		Reviews int
	}
	var got []step
	record := func(code int) { got = append(got, step{code, api.reviews}) }

	record(post(path, validToken))
	record(post(path, validToken))
	record(post(path, forgedToken))
	record(post(path, forgedToken))
	now = now.Add(refusedTTL)
	record(post(path, forgedToken))
	now = now.Add(reviewTTL - refusedTTL)
	record(post(path, validToken))

	// The pod the accepted token is bound to is deleted: the next report
	// is refused, a minute or not.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "alpha-node-0-0"}}
	if err := s.opts.Reviewer.Delete(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	record(post(path, validToken))
	record(post(path, validToken))

	want := []step{{200, 1}, {200, 1}, {401, 2}, {401, 2}, {401, 3}, {200, 4}, {403, 4}, {403, 4}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("answers and reviews so far (-want +got):\n%s", diff)
	}
}

// TestReviewBudgetsPerNamespace: the tokens of one namespace spend at most
// half of the review budget, and the other namespaces have the rest.
func TestReviewBudgetsPerNamespace(t *testing.T) {
	b := newReviewBudgets(&ReviewBudget{QPS: 20, Burst: 40})
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	b.now = func() time.Time { return now }
	rival := 0
	for b.take("rival", readsPerReview) {
		rival++
	}
	if rival != 20/readsPerReview {
		t.Errorf("namespace rival had %d reviews of a full budget of 10, want 5", rival)
	}
	team := 0
	for b.take("team", readsPerReview) {
		team++
	}
	if team != 20/readsPerReview {
		t.Errorf("namespace team had %d reviews after rival spent its share, want 5", team)
	}
	// A second later rival's share has 10 reads more, and so has the whole.
	now = now.Add(time.Second)
	for b.take("rival", 1) {
	}
	if !b.take("team", readsPerReview) {
		t.Error("namespace team has no review left a second after rival spent its share again")
	}
}

// TestVerdictCacheBound: a full cache drops its expired entries first, and
// everything when none has expired, so it never holds more than its bound.
func TestVerdictCacheBound(t *testing.T) {
	c := newVerdictCache(reviewTTL)
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	c.now = func() time.Time { return now }
	k := func(token string) [sha256.Size]byte { return reviewKey(token, audience) }
	old, live := verdict{pod: "old"}, verdict{pod: "new"}
	for i := range maxCachedReviews / 2 {
		c.put(k(strconv.Itoa(i)), old)
	}
	now = now.Add(reviewTTL)
	for i := maxCachedReviews / 2; i < maxCachedReviews; i++ {
		c.put(k(strconv.Itoa(i)), live)
	}
	c.put(k("one more"), live)
	if got, want := len(c.entries), maxCachedReviews/2+1; got != want {
		t.Errorf("after dropping the expired: %d entries, want %d", got, want)
	}
	for i := len(c.entries); i < maxCachedReviews; i++ {
		c.put(k("fill "+strconv.Itoa(i)), live)
	}
	c.put(k("last"), live)
	if v, ok := c.get(k("last")); len(c.entries) != 1 || !ok || v != live {
		t.Errorf("full of live entries: %d entries, last = %+v %v; want it alone", len(c.entries), v, ok)
	}
}
