package dashboard

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

const (
	testToken = "s3cret-token"
	testHost  = "127.0.0.1:8123"
)

// request is one request to the dashboard's handler, as a browser on the page would send it: to testHost,
// with the token's cookie unless cookie is false, and with origin as its Origin header when set.
type request struct {
	method, target string
	host           string
	cookie         bool
	origin         string
}

func serve(t *testing.T, s *Server, r request) *http.Response {
	t.Helper()
	req := httptest.NewRequest(r.method, r.target, nil)
	req.Host = testHost
	if r.host != "" {
		req.Host = r.host
	}
	if r.cookie {
		req.AddCookie(&http.Cookie{Name: cookieName, Value: testToken})
	}
	if r.origin != "" {
		req.Header.Set("Origin", r.origin)
	}
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, req)
	return rec.Result()
}

func body(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// readOnly is a server without a cluster: the guard's refusals never reach one.
func readOnly() *Server { return &Server{Token: testToken, Namespace: "team-a"} }

// TestGuard: every request is refused unless it carries the token (in the URL once, then the cookie), names
// the dashboard by a loopback name or an IP address (DNS rebinding), and comes from the dashboard's own page
// (cross-site requests); a write is refused unless the dashboard was started with --allow-writes.
func TestGuard(t *testing.T) {
	for _, tc := range []struct {
		name   string
		server *Server
		req    request
		want   int
	}{
		{"no token", readOnly(), request{method: "GET", target: "/"}, http.StatusUnauthorized},
		{"no token for the API", readOnly(), request{method: "GET", target: "/api/config"}, http.StatusUnauthorized},
		{"no token for an asset", readOnly(), request{method: "GET", target: "/assets/app.js"}, http.StatusUnauthorized},
		{"wrong token in the URL", readOnly(), request{method: "GET", target: "/?token=guess"}, http.StatusUnauthorized},
		{"token in the URL", readOnly(), request{method: "GET", target: "/?token=" + testToken}, http.StatusSeeOther},
		{"cookie", readOnly(), request{method: "GET", target: "/", cookie: true}, http.StatusOK},
		{"cookie for the API", readOnly(), request{method: "GET", target: "/api/config", cookie: true}, http.StatusOK},
		{"cookie for an asset", readOnly(), request{method: "GET", target: "/assets/app.js", cookie: true}, http.StatusOK},
		{"localhost", readOnly(), request{method: "GET", target: "/", cookie: true, host: "localhost:8123"}, http.StatusOK},
		{"IPv6 loopback", readOnly(), request{method: "GET", target: "/", cookie: true, host: "[::1]:8123"}, http.StatusOK},
		{"rebound DNS name", readOnly(), request{method: "GET", target: "/api/config", cookie: true, host: "attacker.example:8123"}, http.StatusForbidden},
		{"rebound DNS name with the token", readOnly(), request{method: "GET", target: "/?token=" + testToken, host: "attacker.example:8123"}, http.StatusForbidden},
		{"same origin", readOnly(), request{method: "GET", target: "/api/config", cookie: true, origin: "http://" + testHost}, http.StatusOK},
		{"cross-site origin", readOnly(), request{method: "GET", target: "/api/config", cookie: true, origin: "http://attacker.example"}, http.StatusForbidden},
		{"cross-site origin with the token", readOnly(), request{method: "GET", target: "/?token=" + testToken, origin: "http://attacker.example"}, http.StatusForbidden},
		{"write without --allow-writes", readOnly(), request{method: "POST", target: "/api/trainjobs/team-a/llama/suspend", cookie: true, origin: "http://" + testHost}, http.StatusForbidden},
		{"write without an origin", &Server{Token: testToken, AllowWrites: true}, request{method: "POST", target: "/api/trainjobs/team-a/llama/suspend", cookie: true}, http.StatusForbidden},
		{"write cross-site", &Server{Token: testToken, AllowWrites: true}, request{method: "POST", target: "/api/trainjobs/team-a/llama/suspend", cookie: true, origin: "http://attacker.example"}, http.StatusForbidden},
		{"write without the token", &Server{Token: testToken, AllowWrites: true}, request{method: "POST", target: "/api/trainjobs/team-a/llama/suspend", origin: "http://" + testHost}, http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := serve(t, tc.server, tc.req)
			if resp.StatusCode != tc.want {
				t.Errorf("%s %s (Host %q, Origin %q, cookie %t): status %d, want %d: %s", tc.req.method, tc.req.target,
					tc.req.host, tc.req.origin, tc.req.cookie, resp.StatusCode, tc.want, body(t, resp))
			}
		})
	}
}

// TestTokenBecomesCookie: the URL's token is exchanged for an HttpOnly, SameSite=Strict cookie, and the page
// is loaded again without the token in its URL.
func TestTokenBecomesCookie(t *testing.T) {
	resp := serve(t, readOnly(), request{method: "GET", target: "/?token=" + testToken})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Fatalf("status %d, Location %q; want 303 to /", resp.StatusCode, resp.Header.Get("Location"))
	}
	cookies := resp.Cookies()
	if len(cookies) != 1 {
		t.Fatalf("cookies %v, want one", cookies)
	}
	c := cookies[0]
	if c.Name != cookieName || c.Value != testToken || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" {
		t.Errorf("cookie %+v: want %s=<token>, HttpOnly, SameSite=Strict, Path=/", c, cookieName)
	}
}

// TestContentSecurityPolicy: every response, refused or not, forbids inline scripts and framing, and the page
// holds no inline script nor event handler attribute that such a policy would block.
func TestContentSecurityPolicy(t *testing.T) {
	for _, req := range []request{
		{method: "GET", target: "/"},
		{method: "GET", target: "/", cookie: true},
		{method: "GET", target: "/api/config", cookie: true},
	} {
		resp := serve(t, readOnly(), req)
		csp := resp.Header.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'none'", "script-src 'self'", "frame-ancestors 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s %s (cookie %t): Content-Security-Policy %q lacks %q", req.method, req.target, req.cookie, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
			t.Errorf("Content-Security-Policy %q allows inline scripts", csp)
		}
		if got := resp.Header.Get("Referrer-Policy"); got != "no-referrer" {
			t.Errorf("Referrer-Policy %q, want no-referrer: the page's URL may hold the token", got)
		}
	}
	page := body(t, serve(t, readOnly(), request{method: "GET", target: "/", cookie: true}))
	scripts := regexp.MustCompile(`(?s)<script([^>]*)>(.*?)</script>`).FindAllStringSubmatch(page, -1)
	if len(scripts) == 0 {
		t.Errorf("index.html loads no script:\n%s", page)
	}
	for _, m := range scripts {
		if !strings.Contains(m[1], "src=") || strings.TrimSpace(m[2]) != "" {
			t.Errorf("index.html has an inline script: %q", m[0])
		}
	}
	if m := regexp.MustCompile(`\son[a-z]+\s*=`).FindString(page); m != "" {
		t.Errorf("index.html has an event handler attribute %q", m)
	}
}

// TestConfig: the page learns from the server whether it may offer actions.
func TestConfig(t *testing.T) {
	for _, s := range []*Server{readOnly(), {Token: testToken, AllowWrites: true}} {
		got := body(t, serve(t, s, request{method: "GET", target: "/api/config", cookie: true}))
		want := `"allowWrites":` + map[bool]string{true: "true", false: "false"}[s.AllowWrites]
		if !strings.Contains(got, want) {
			t.Errorf("config %s lacks %s", got, want)
		}
	}
}

// TestForbiddenIsShown: a read the user's RBAC refuses is answered 403 with the API server's message, which the
// page shows as forbidden, never as an empty list.
func TestForbiddenIsShown(t *testing.T) {
	rec := httptest.NewRecorder()
	err := apierrors.NewForbidden(schema.GroupResource{Group: "trainer.kubeflow.org", Resource: "trainjobs"}, "",
		errorString(`User "alice" cannot list resource "trainjobs"`))
	writeError(rec, err)
	resp := rec.Result()
	got := body(t, resp)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(got, `"forbidden":true`) || !strings.Contains(got, `cannot list resource`) {
		t.Errorf("status %d, body %s; want 403 with the API server's message and forbidden:true", resp.StatusCode, got)
	}
}

type errorString string

func (e errorString) Error() string { return string(e) }
