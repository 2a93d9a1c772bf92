package statusserver

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/plugins/trainjobstatus"
)

// serviceAccountPrefix starts the user name of a ServiceAccount:
// system:serviceaccount:<namespace>:<name>.
const serviceAccountPrefix = "system:serviceaccount:"

// The keys of a TokenReview's user.extra that name the pod a token is
// bound to (the kubelet projects pod-bound tokens).
const (
	extraPodName = "authentication.kubernetes.io/pod-name"
	extraPodUID  = "authentication.kubernetes.io/pod-uid"
)

// verdict is the outcome of authenticating a token for a TrainJob: the
// UID of the TrainJob its pod belongs to, or a refusal (code != 0).
type verdict struct {
	trainJobUID types.UID
	pod         string
	podUID      types.UID
	code        int
	reason      metav1.StatusReason
	message     string
}

func refuse(code int, reason metav1.StatusReason, format string, args ...any) verdict {
	return verdict{code: code, reason: reason, message: fmt.Sprintf(format, args...)}
}

func forbid(format string, args ...any) verdict {
	return refuse(http.StatusForbidden, metav1.StatusReasonForbidden, format, args...)
}

// authenticate checks the Authorization header of a report on the TrainJob
// namespace/name. The token must be one the API server issued for the
// TrainJob's audience (the one the TrainJobStatus plugin projects into its
// pods), bound to a pod whose controller chain (pod, Job, JobSet) ends at a
// TrainJob of that name: the verdict carries that TrainJob's UID, which the
// status write requires, so the pod of an earlier TrainJob of the same name
// cannot report for the current one.
//
// Upstream verifies the token as an OIDC ID token against the cluster's
// issuer, discovered from the operator's own token. A TokenReview asks the
// API server instead: it works wherever the API server authenticates
// ServiceAccount tokens, also when its issuer URL is not reachable from the
// operator. An accepted token is not reviewed again for reviewTTL, so a
// trainer reporting often costs one review a minute; but each report reads
// the pod the token is bound to again (one read, not a review's four), so
// that a token whose pod is deleted is refused from then on, as the API
// server refuses it. A refused one is remembered for refusedTTL, in a
// cache of its own, so that a flood of bad tokens neither reviews each
// token again nor evicts the accepted ones.
func (s *Server) authenticate(ctx context.Context, header, namespace, name string) verdict {
	token, ok := strings.CutPrefix(header, "Bearer ")
	token = strings.TrimSpace(token)
	if !ok || token == "" {
		return refuse(http.StatusUnauthorized, metav1.StatusReasonUnauthorized, "an Authorization: Bearer <token> header is required")
	}
	audience := trainjobstatus.TokenAudience(namespace, name)
	k := reviewKey(token, audience)
	if v, ok := s.accepted.get(k); ok {
		v, final := s.podStillThere(ctx, v, namespace, name)
		if final && v.code != 0 {
			s.accepted.forget(k)
			s.refused.put(k, v)
		}
		return v
	}
	if v, ok := s.refused.get(k); ok {
		return v
	}
	v, final := s.review(ctx, token, audience, namespace, name)
	switch {
	case !final:
	case v.code == 0:
		s.accepted.put(k, v)
	default:
		s.refused.put(k, v)
	}
	return v
}

// review decides on a token no cache knows. final is false when the
// verdict is not the token's but the moment's (the API server could not
// answer, or the review budget is spent) and must not be remembered.
func (s *Server) review(ctx context.Context, token, audience, namespace, name string) (v verdict, final bool) {
	notValid := refuse(http.StatusUnauthorized, metav1.StatusReasonUnauthorized, "the token is not valid for audience %s", audience)
	// What the token claims, unverified, refuses at no cost what the
	// review could only refuse: a flood of garbage costs no API call.
	claims, ok := unverifiedClaims(token)
	if !ok || !slices.Contains(claims.Audiences, audience) {
		return notValid, true
	}
	if claims.Kubernetes.Namespace != "" && claims.Kubernetes.Namespace != namespace {
		return forbid("a token of namespace %s may not report for TrainJobs of namespace %s", claims.Kubernetes.Namespace, namespace), true
	}
	if claims.Kubernetes.Pod.Name == "" {
		return forbid("only a token bound to a pod of TrainJob %s/%s may report; this one is bound to no pod", namespace, name), true
	}

	// Reviews have a budget of their own, apart from the status writes',
	// shared fairly between namespaces, and do not queue for it: a token
	// that finds it spent is told to come back, and a flood of tokens
	// holds no request open.
	if !s.budgets.take(namespace, readsPerReview) {
		return refuse(http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests, "too many tokens to review; retry later"), false
	}
	review := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: []string{audience}}}
	if err := s.opts.Reviewer.Create(ctx, review); err != nil {
		return unavailable(err), false
	}
	st := review.Status
	if !st.Authenticated || !slices.Contains(st.Audiences, audience) {
		return notValid, true
	}
	username := st.User.Username
	tokenNamespace, _, isServiceAccount := strings.Cut(strings.TrimPrefix(username, serviceAccountPrefix), ":")
	if !strings.HasPrefix(username, serviceAccountPrefix) || !isServiceAccount {
		return forbid("only a ServiceAccount token of namespace %s may report, not %s", namespace, username), true
	}
	if tokenNamespace != namespace {
		return forbid("a token of namespace %s may not report for TrainJobs of namespace %s", tokenNamespace, namespace), true
	}
	podName, podUID := first(st.User.Extra[extraPodName]), first(st.User.Extra[extraPodUID])
	if podName == "" || podUID == "" {
		return forbid("only a token bound to a pod of TrainJob %s/%s may report; this one is bound to no pod", namespace, name), true
	}
	return s.trainJobOfPod(ctx, namespace, name, podName, types.UID(podUID))
}

// trainJobOfPod follows the controllers of the pod up to the TrainJob
// name: pod → Job → JobSet → TrainJob, each by UID, as the garbage
// collector would.
func (s *Server) trainJobOfPod(ctx context.Context, namespace, name, podName string, podUID types.UID) (verdict, bool) {
	notOurs := func(format string, args ...any) (verdict, bool) {
		return forbid("pod %s/%s is not a pod of TrainJob %s/%s: %s", namespace, podName, namespace, name, fmt.Sprintf(format, args...)), true
	}
	pod, gone, err := s.boundPod(ctx, namespace, podName, podUID)
	switch {
	case err != nil:
		return unavailable(err), false
	case gone != "":
		return notOurs("%s", gone)
	}
	// Each link: the controller of the object below, of the wanted kind,
	// read and checked by UID.
	links := []struct {
		obj  client.Object
		kind string
		what string
	}{
		{&batchv1.Job{}, batchv1.SchemeGroupVersion.WithKind("Job").GroupKind().String(), "Job"},
		{&jobsetv1alpha2.JobSet{}, jobsetv1alpha2.GroupVersion.WithKind("JobSet").GroupKind().String(), "JobSet"},
	}
	var below client.Object = pod
	belowWhat := "it"
	for _, link := range links {
		ref := metav1.GetControllerOf(below)
		if ref == nil {
			return notOurs("%s has no controller", belowWhat)
		}
		if groupKind(ref) != link.kind {
			return notOurs("%s is controlled by %s %s, not a %s", belowWhat, ref.Kind, ref.Name, link.what)
		}
		if err := s.opts.Reviewer.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, link.obj); err != nil {
			if apierrors.IsNotFound(err) {
				return notOurs("its %s %s is gone", link.what, ref.Name)
			}
			return unavailable(err), false
		}
		if link.obj.GetUID() != ref.UID {
			return notOurs("its %s %s is gone", link.what, ref.Name)
		}
		below, belowWhat = link.obj, "its "+link.what+" "+ref.Name
	}
	ref := metav1.GetControllerOf(below)
	switch {
	case ref == nil:
		return notOurs("%s has no controller", belowWhat)
	case groupKind(ref) != trainer.GroupVersion.WithKind(trainer.TrainJobKind).GroupKind().String():
		return notOurs("%s is controlled by %s %s, not a TrainJob", belowWhat, ref.Kind, ref.Name)
	case ref.Name != name:
		return notOurs("%s is controlled by TrainJob %s", belowWhat, ref.Name)
	}
	return verdict{trainJobUID: ref.UID, pod: podName, podUID: podUID}, true
}

// boundPod reads the pod a token is bound to. gone says why the token
// no longer stands for it: the pod is gone, or its name is a later pod's.
func (s *Server) boundPod(ctx context.Context, namespace, podName string, podUID types.UID) (pod *corev1.Pod, gone string, err error) {
	pod = &corev1.Pod{}
	if err := s.opts.Reviewer.Get(ctx, client.ObjectKey{Namespace: namespace, Name: podName}, pod); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, "it is gone", nil
		}
		return nil, "", err
	}
	if pod.UID != podUID {
		return nil, "the token is bound to an earlier pod of that name", nil
	}
	return pod, "", nil
}

// podStillThere checks again, for a token accepted earlier (v), that the
// pod it is bound to is there: the API server refuses a pod-bound token
// once its pod is deleted, and so does the server, at the first report
// after, not once reviewTTL has passed. The read comes out of the total
// review budget only: a token accepted earlier is a real pod's, and the
// bad tokens that spend its namespace's share must not keep its reports out.
func (s *Server) podStillThere(ctx context.Context, v verdict, namespace, name string) (verdict, bool) {
	if !s.budgets.takeTotal(1) {
		return refuse(http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests, "too many reports to check; retry later"), false
	}
	_, gone, err := s.boundPod(ctx, namespace, v.pod, v.podUID)
	switch {
	case err != nil:
		return unavailable(err), false
	case gone != "":
		return forbid("pod %s/%s is not a pod of TrainJob %s/%s: %s", namespace, v.pod, namespace, name, gone), true
	}
	return v, true
}

// ReviewBudget bounds what checking tokens may cost the API server, in
// reads a second (a review is readsPerReview of them, a pod read again
// one) and in a burst of them.
type ReviewBudget struct {
	QPS   float64
	Burst int
}

// reviewBudgets spend a ReviewBudget, and each namespace's share of it: a
// half, so that the tokens of one namespace, however many, valid or not,
// leave the other half to the reports of the others. A namespace is the
// one the request names, which the token's own must be.
type reviewBudgets struct {
	mu         sync.Mutex
	now        func() time.Time
	total      *rate.Limiter
	share      rate.Limit
	shareBurst int
	namespaces map[string]*rate.Limiter
}

// newReviewBudgets are the budgets of b; nil (no limit) when b is.
func newReviewBudgets(b *ReviewBudget) *reviewBudgets {
	if b == nil {
		return nil
	}
	return &reviewBudgets{now: time.Now, total: rate.NewLimiter(rate.Limit(b.QPS), b.Burst),
		share: rate.Limit(b.QPS / 2), shareBurst: max(b.Burst/2, readsPerReview), namespaces: map[string]*rate.Limiter{}}
}

// take spends n reads from namespace's share and from the total, or
// nothing when either has fewer left.
func (b *reviewBudgets) take(namespace string, n int) bool {
	if b == nil {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	share := b.namespaces[namespace]
	if share == nil {
		// A full share is as good as a new one. Few are not full: the
		// total refills each within seconds.
		if len(b.namespaces) >= maxCachedReviews {
			maps.DeleteFunc(b.namespaces, func(_ string, l *rate.Limiter) bool { return l.TokensAt(now) >= float64(b.shareBurst) })
		}
		share = rate.NewLimiter(b.share, b.shareBurst)
		b.namespaces[namespace] = share
	}
	if share.TokensAt(now) < float64(n) || b.total.TokensAt(now) < float64(n) {
		return false
	}
	share.AllowN(now, n)
	b.total.AllowN(now, n)
	return true
}

// takeTotal spends n reads from the total alone, or nothing when it has
// fewer left.
func (b *reviewBudgets) takeTotal(n int) bool {
	if b == nil {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total.AllowN(b.now(), n)
}

func groupKind(ref *metav1.OwnerReference) string {
	gv, _ := schema.ParseGroupVersion(ref.APIVersion)
	return gv.WithKind(ref.Kind).GroupKind().String()
}

// unavailable is the verdict when the API server did not answer.
func unavailable(err error) verdict {
	return verdict{code: http.StatusInternalServerError, reason: metav1.StatusReasonInternalError, message: err.Error()}
}

func first(values authenticationv1.ExtraValue) string {
	if len(values) == 0 {
		return ""
	}
	return values[0]
}

// tokenClaims are the claims of a ServiceAccount token that matter here.
type tokenClaims struct {
	Audiences  audiences `json:"aud"`
	Kubernetes struct {
		Namespace string `json:"namespace"`
		Pod       struct {
			Name string `json:"name"`
		} `json:"pod"`
	} `json:"kubernetes.io"`
}

// audiences is a JWT's aud: one string or a list of them.
type audiences []string

func (a *audiences) UnmarshalJSON(data []byte) error {
	var one string
	if err := json.Unmarshal(data, &one); err == nil {
		*a = audiences{one}
		return nil
	}
	return json.Unmarshal(data, (*[]string)(a))
}

// maxTokenBytes bounds what is decoded of a token: ServiceAccount tokens
// are a few KiB.
const maxTokenBytes = 16 << 10

// unverifiedClaims decodes the claims of a JWT without checking its
// signature: only to refuse early what the review would refuse.
func unverifiedClaims(token string) (tokenClaims, bool) {
	var claims tokenClaims
	if len(token) > maxTokenBytes {
		return claims, false
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return claims, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil || json.Unmarshal(payload, &claims) != nil {
		return claims, false
	}
	return claims, true
}

// Bounds of the caches of verdicts. The API server's webhook token
// authenticator caches its answers for two minutes by default.
const (
	reviewTTL        = time.Minute
	refusedTTL       = 10 * time.Second
	maxCachedReviews = 4096
)

// verdictCache remembers verdicts for a while. It keys entries by a hash:
// it never holds a token.
type verdictCache struct {
	mu      sync.Mutex
	now     func() time.Time
	ttl     time.Duration
	entries map[[sha256.Size]byte]cachedVerdict
}

type cachedVerdict struct {
	verdict
	expires time.Time
}

func newVerdictCache(ttl time.Duration) *verdictCache {
	return &verdictCache{now: time.Now, ttl: ttl, entries: map[[sha256.Size]byte]cachedVerdict{}}
}

func reviewKey(token, audience string) [sha256.Size]byte {
	return sha256.Sum256([]byte(audience + "\x00" + token))
}

func (c *verdictCache) get(k [sha256.Size]byte) (verdict, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[k]
	if !ok || !c.now().Before(e.expires) {
		return verdict{}, false
	}
	return e.verdict, true
}

// forget drops a verdict.
func (c *verdictCache) forget(k [sha256.Size]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, k)
}

// put remembers a verdict; when the cache is full it first drops the
// expired entries, and all of them if none has expired.
func (c *verdictCache) put(k [sha256.Size]byte, v verdict) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if len(c.entries) >= maxCachedReviews {
		maps.DeleteFunc(c.entries, func(_ [sha256.Size]byte, e cachedVerdict) bool { return !now.Before(e.expires) })
		if len(c.entries) >= maxCachedReviews {
			clear(c.entries)
		}
	}
	c.entries[k] = cachedVerdict{verdict: v, expires: now.Add(c.ttl)}
}
