package statusserver

import (
	"context"
	"crypto/sha256"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/plugins/trainjobstatus"
)

// serviceAccountPrefix starts the user name of a ServiceAccount:
// system:serviceaccount:<namespace>:<name>.
const serviceAccountPrefix = "system:serviceaccount:"

// authenticate checks the Authorization header of a report on the TrainJob
// namespace/name. The token must be one the API server issued for the
// TrainJob's audience (the one the TrainJobStatus plugin projects into its
// pods), and belong to a ServiceAccount of the TrainJob's namespace.
//
// Upstream verifies the token as an OIDC ID token against the cluster's
// issuer, discovered from the operator's own token. A TokenReview asks the
// API server instead: it works wherever the API server authenticates
// ServiceAccount tokens, also when its issuer URL is not reachable from the
// operator, and it sees revoked tokens (deleted pods and ServiceAccounts)
// within reviewTTL: an accepted token is not reviewed again for that long,
// so a trainer reporting often costs one API call a report, as upstream's.
//
// It returns 0 when the caller may report, else the HTTP code, the reason
// and the message of the refusal.
func (s *Server) authenticate(ctx context.Context, header, namespace, name string) (int, metav1.StatusReason, string) {
	token, ok := strings.CutPrefix(header, "Bearer ")
	token = strings.TrimSpace(token)
	if !ok || token == "" {
		return http.StatusUnauthorized, metav1.StatusReasonUnauthorized, "an Authorization: Bearer <token> header is required"
	}
	audience := trainjobstatus.TokenAudience(namespace, name)
	username, ok := s.reviews.get(token, audience)
	if !ok {
		review := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: []string{audience}}}
		if err := s.opts.Client.Create(ctx, review); err != nil {
			return http.StatusInternalServerError, metav1.StatusReasonInternalError, err.Error()
		}
		st := review.Status
		if !st.Authenticated || !slices.Contains(st.Audiences, audience) {
			return http.StatusUnauthorized, metav1.StatusReasonUnauthorized,
				"the token is not valid for audience " + audience
		}
		username = st.User.Username
		s.reviews.put(token, audience, username)
	}
	tokenNamespace, _, isServiceAccount := strings.Cut(strings.TrimPrefix(username, serviceAccountPrefix), ":")
	if !strings.HasPrefix(username, serviceAccountPrefix) || !isServiceAccount {
		return http.StatusForbidden, metav1.StatusReasonForbidden,
			"only a ServiceAccount token of namespace " + namespace + " may report, not " + username
	}
	if tokenNamespace != namespace {
		return http.StatusForbidden, metav1.StatusReasonForbidden,
			"a token of namespace " + tokenNamespace + " may not report for TrainJobs of namespace " + namespace
	}
	return 0, "", ""
}

// Bounds of the cache of accepted tokens. The API server's webhook token
// authenticator caches its answers for two minutes by default.
const (
	reviewTTL        = time.Minute
	maxCachedReviews = 4096
)

// reviewCache remembers, for reviewTTL, the user of each token the API
// server accepted for an audience. It keys entries by a hash: it never
// holds a token.
type reviewCache struct {
	mu      sync.Mutex
	now     func() time.Time
	entries map[[sha256.Size]byte]cachedReview
}

type cachedReview struct {
	username string
	expires  time.Time
}

func newReviewCache() *reviewCache {
	return &reviewCache{now: time.Now, entries: map[[sha256.Size]byte]cachedReview{}}
}

func reviewKey(token, audience string) [sha256.Size]byte {
	return sha256.Sum256([]byte(audience + "\x00" + token))
}

func (c *reviewCache) get(token, audience string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[reviewKey(token, audience)]
	if !ok || !c.now().Before(e.expires) {
		return "", false
	}
	return e.username, true
}

// put remembers an accepted token; when the cache is full it first drops
// the expired entries, and all of them if none has expired.
func (c *reviewCache) put(token, audience, username string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if len(c.entries) >= maxCachedReviews {
		maps.DeleteFunc(c.entries, func(_ [sha256.Size]byte, e cachedReview) bool { return !now.Before(e.expires) })
		if len(c.entries) >= maxCachedReviews {
			clear(c.entries)
		}
	}
	c.entries[reviewKey(token, audience)] = cachedReview{username: username, expires: now.Add(reviewTTL)}
}
