package statusserver

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
)

// FuzzUpdateStatus posts any body, with any Authorization header, to the
// status server's one route, as any pod that can reach the server may. Its
// promises:
//   - no panic, and no 500: every refusal is the caller's (401, 403, 413,
//     422, 429), answered with a metav1.Status naming what is wrong;
//   - a body over MaxBodyBytes is refused (413) before it is decoded;
//   - an accepted report is applied as it was sent and nothing else: the
//     apply holds status.trainerStatus alone, and decoding it gives back the
//     report that was decoded from the body (decode, encode, decode), an
//     empty list as none.
//
// `make fuzz` runs it; its seeds run in every `go test`.
func FuzzUpdateStatus(f *testing.F) {
	bearer := "Bearer " + validToken
	for _, seed := range []struct{ auth, body string }{
		{bearer, report},
		{bearer, `{}`},
		{bearer, `{"trainerStatus":{}}`},
		{bearer, `{"trainerStatus":{"progressPercentage":100,"metrics":[{"name":"loss","value":"0.1"},{"name":"acc","value":"0.9"}]}}`},
		{bearer, `{"trainerStatus":{"progressPercentage":42}} {}`},
		{bearer, `{"trainerStatus":{"progress":42}}`},
		{bearer, `{"trainerStatus":{"lastUpdatedTime":"yesterday"}}`},
		{bearer, `[1,2,3]`},
		{bearer, ``},
		{bearer, strings.Repeat(" ", MaxBodyBytes) + `{}`},
		{"Bearer " + forgedToken, report},
		{"Bearer " + betaPodToken, report},
		{"Bearer a.eyJhdWQiOltdfQ.b", report},
		{"Basic dXNlcjpwYXNz", report},
		{"", report},
	} {
		f.Add(seed.auth, []byte(seed.body))
	}
	api := &apiServer{users: map[string]string{
		validToken:   "system:serviceaccount:team:trainer@alpha-node-0-0",
		betaPodToken: "system:serviceaccount:team:trainer@beta-node-0-0",
	}}
	s := New(Options{Client: api.client()})
	f.Fuzz(func(t *testing.T, auth string, body []byte) {
		api.applied = nil
		req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		rec := httptest.NewRecorder()
		s.handler.ServeHTTP(rec, req)

		if rec.Code != http.StatusOK {
			status := &metav1.Status{}
			if err := json.Unmarshal(rec.Body.Bytes(), status); err != nil || status.Kind != "Status" || status.Message == "" {
				t.Fatalf("answer %d is not a Status with a message: %v\n%s", rec.Code, err, rec.Body)
			}
			switch rec.Code {
			case http.StatusUnauthorized, http.StatusForbidden, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity, http.StatusTooManyRequests:
			default:
				t.Fatalf("answer %d (%s) to the body %q", rec.Code, status.Message, body)
			}
			if len(api.applied) > 0 {
				t.Errorf("refused with %d, but applied %v", rec.Code, api.applied)
			}
			return
		}
		if len(body) > MaxBodyBytes {
			t.Fatalf("a body of %d bytes accepted, over MaxBodyBytes %d", len(body), MaxBodyBytes)
		}
		var sent trainer.UpdateTrainJobStatusRequest
		if err := decodeStrict(body, &sent); err != nil {
			t.Fatalf("accepted a body decodeStrict refuses (%v): %q", err, body)
		}
		if sent.TrainerStatus == nil {
			if len(api.applied) > 0 {
				t.Errorf("a request without trainerStatus applied %v", api.applied)
			}
			return
		}
		if len(api.applied) != 1 {
			t.Fatalf("accepted report applied %d times, want once", len(api.applied))
		}
		applied := api.applied[0]
		status, _ := applied["status"].(map[string]any)
		if len(applied) != 4 || len(status) != 1 || status["trainerStatus"] == nil {
			t.Fatalf("the apply holds more than metadata and status.trainerStatus: %v", applied)
		}
		raw, err := json.Marshal(status["trainerStatus"])
		if err != nil {
			t.Fatal(err)
		}
		var got trainer.TrainerStatus
		if err := decodeStrict(raw, &got); err != nil {
			t.Fatalf("the applied trainerStatus does not decode: %v\n%s", err, raw)
		}
		// An empty list of metrics is sent as none: the apply omits it.
		if diff := cmp.Diff(sent.TrainerStatus, &got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("applied trainerStatus differs from the report (-sent +applied):\n%s", diff)
		}
	})
}
