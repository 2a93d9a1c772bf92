package statusserver

import (
	"context"
	"net/http"
	"slices"
	"strings"

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
// operator, and it sees revoked tokens (deleted pods and ServiceAccounts).
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
	review := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: []string{audience}}}
	if err := s.opts.Client.Create(ctx, review); err != nil {
		return http.StatusInternalServerError, metav1.StatusReasonInternalError, err.Error()
	}
	st := review.Status
	if !st.Authenticated || !slices.Contains(st.Audiences, audience) {
		return http.StatusUnauthorized, metav1.StatusReasonUnauthorized,
			"the token is not valid for audience " + audience
	}
	tokenNamespace, _, isServiceAccount := strings.Cut(strings.TrimPrefix(st.User.Username, serviceAccountPrefix), ":")
	if !strings.HasPrefix(st.User.Username, serviceAccountPrefix) || !isServiceAccount {
		return http.StatusForbidden, metav1.StatusReasonForbidden,
			"only a ServiceAccount token of namespace " + namespace + " may report, not " + st.User.Username
	}
	if tokenNamespace != namespace {
		return http.StatusForbidden, metav1.StatusReasonForbidden,
			"a token of namespace " + tokenNamespace + " may not report for TrainJobs of namespace " + namespace
	}
	return 0, "", ""
}
