package operator_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/plugins/trainjobstatus"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/integration/operator/internal/optest"
)

// ensureServiceAccount creates ServiceAccount ns/name unless it exists.
func ensureServiceAccount(t *testing.T, ns, name string) {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := env.Client.Get(t.Context(), key(sa), sa); err != nil {
		create(t, sa)
	}
}

// trainerPodOf creates a pod of the JobSet js as the JobSet and Job
// controllers would (there are none here): a Job controlled by js, and the
// pod controlled by the Job. Nothing runs the pod; a token bound to it
// needs only the object.
func trainerPodOf(t *testing.T, js *jobsetv1alpha2.JobSet, name string) *corev1.Pod {
	t.Helper()
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: js.Namespace, Name: name,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(js, jobsetv1alpha2.SchemeGroupVersion.WithKind("JobSet"))}},
		Spec: batchv1.JobSpec{Suspend: ptr.To(true), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "node", Image: "trainer"}},
		}}},
	}
	create(t, job)
	return newTrainerPod(t, js.Namespace, name+"-0", metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job")))
}

// newTrainerPod creates a pod of ServiceAccount trainer, controlled by
// controller (nil: by nothing).
func newTrainerPod(t *testing.T, ns, name string, controller *metav1.OwnerReference) *corev1.Pod {
	t.Helper()
	ensureServiceAccount(t, ns, "trainer")
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			ServiceAccountName: "trainer",
			RestartPolicy:      corev1.RestartPolicyNever,
			Containers:         []corev1.Container{{Name: "node", Image: "trainer"}},
		},
	}
	if controller != nil {
		pod.OwnerReferences = []metav1.OwnerReference{*controller}
	}
	create(t, pod)
	return pod
}

// podToken is a token of the pod's ServiceAccount bound to the pod, for the
// audience of TrainJob audienceNS/name: the token the kubelet projects into
// a trainer pod.
func podToken(t *testing.T, pod *corev1.Pod, audienceNS, name string) string {
	t.Helper()
	tr, err := env.Clientset.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(t.Context(), pod.Spec.ServiceAccountName, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			Audiences:         []string{trainjobstatus.TokenAudience(audienceNS, name)},
			ExpirationSeconds: ptr.To[int64](3600),
			BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for pod %s: %v", pod.Name, err)
	}
	return tr.Status.Token
}

// TestStatusServerTrustsOnlyTheTrainJobsPods (issue 17, item 8): a report
// is accepted only with a token bound to a pod whose controller chain (pod,
// Job, JobSet) ends at the TrainJob's UID.
func TestStatusServerTrustsOnlyTheTrainJobsPods(t *testing.T) {
	replica := statusServerReplica(t)
	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	rt := createTrainingRuntime(t, ns, "torch", torchSpec())
	newJob := func(name string) *trainer.TrainJob {
		tj := newTrainJob(ns, name, trainer.TrainingRuntimeKind, "torch")
		tj.Spec.Suspend = ptr.To(true)
		create(t, tj)
		return tj
	}
	alpha, beta, gamma := newJob("alpha"), newJob("beta"), newJob("gamma")
	c := newStatusClient(t, replica, caOfTrainers(t, replica, alpha, rt))
	alphaPod := trainerPodOf(t, jobSetOf(t, alpha), "alpha-node-0")
	betaPod := trainerPodOf(t, jobSetOf(t, beta), "beta-node-0")
	gammaPod := trainerPodOf(t, jobSetOf(t, gamma), "gamma-node-0")
	gammaToken := podToken(t, gammaPod, ns, "gamma")

	// gamma is deleted and created again: its old JobSet, Job and pod stay
	// (there is no garbage collector here, as while it is behind).
	if err := env.Client.Delete(t.Context(), gamma); err != nil {
		t.Fatal(err)
	}
	optest.Eventually(t, "gamma is gone", func(ctx context.Context) error {
		return optest.Absent(ctx, env.Client, key(gamma), &trainer.TrainJob{})
	})
	gamma = newJob("gamma")

	report := func(progress int32) string {
		data, err := json.Marshal(trainer.UpdateTrainJobStatusRequest{TrainerStatus: &trainer.TrainerStatus{
			ProgressPercentage: ptr.To(progress), LastUpdatedTime: metav1.NewTime(time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)),
		}})
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	forbidden := refusal{Code: http.StatusForbidden, Status: metav1.StatusFailure, Reason: metav1.StatusReasonForbidden}
	cases := []struct {
		name        string
		tj          *trainer.TrainJob
		token       string
		want        refusal
		wantMessage string
	}{
		{
			name:        "a ServiceAccount token bound to no pod",
			tj:          alpha,
			token:       trainerToken(t, ns, ns, "alpha"),
			want:        forbidden,
			wantMessage: "only a token bound to a pod of TrainJob " + ns + "/alpha may report; this one is bound to no pod",
		},
		{
			name:        "a pod no Job controls",
			tj:          alpha,
			token:       podToken(t, newTrainerPod(t, ns, "loner", nil), ns, "alpha"),
			want:        forbidden,
			wantMessage: "pod " + ns + "/loner is not a pod of TrainJob " + ns + "/alpha: it has no controller",
		},
		{
			name:        "a pod of another TrainJob",
			tj:          alpha,
			token:       podToken(t, betaPod, ns, "alpha"),
			want:        forbidden,
			wantMessage: "pod " + ns + "/beta-node-0-0 is not a pod of TrainJob " + ns + "/alpha: its JobSet beta is controlled by TrainJob beta",
		},
		{
			name:        "a leftover pod of a deleted TrainJob of the same name",
			tj:          gamma,
			token:       gammaToken,
			want:        forbidden,
			wantMessage: "pod " + ns + "/gamma-node-0-0 is not a pod of TrainJob " + ns + "/gamma: it belongs to an earlier TrainJob of that name",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, body := c.post(t, trainjobstatus.StatusPath(ns, tc.tj.Name), tc.token, report(13))
			got, message := refusalOf(t, code, body)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("answer (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantMessage, message); diff != "" {
				t.Errorf("message (-want +got):\n%s", diff)
			}
			// The server answers once it has refused: nothing was written.
			if err := hasTrainerStatus(tc.tj, nil)(t.Context()); err != nil {
				t.Error(err)
			}
		})
	}

	t.Run("a pod of the TrainJob's JobSet", func(t *testing.T) {
		code, body := c.post(t, trainjobstatus.StatusPath(ns, "alpha"), podToken(t, alphaPod, ns, "alpha"), report(13))
		if code != http.StatusOK {
			t.Fatalf("POST = %d, want 200: %s", code, body)
		}
		optest.Eventually(t, "the report is in the status", func(ctx context.Context) error {
			got, err := trainerStatusOf(ctx, alpha)
			if err != nil {
				return err
			}
			if got == nil || ptr.Deref(got.ProgressPercentage, -1) != 13 {
				return fmt.Errorf("trainerStatus %+v, want progress 13", got)
			}
			return nil
		})
	})
}

// forgedToken is a JWT that claims what a pod-bound token of the TrainJob's
// audience claims, signed by nobody: only the API server's review can
// refuse it.
func forgedToken(ns, name string, i int) string {
	enc := base64.RawURLEncoding.EncodeToString
	claims, _ := json.Marshal(map[string]any{
		"aud": []string{trainjobstatus.TokenAudience(ns, name)},
		"exp": time.Now().Add(time.Hour).Unix(),
		"iss": "https://kubernetes.default.svc.cluster.local",
		"sub": "system:serviceaccount:" + ns + ":trainer",
		"kubernetes.io": map[string]any{
			"namespace":      ns,
			"pod":            map[string]string{"name": "forged-" + strconv.Itoa(i), "uid": fmt.Sprintf("00000000-0000-0000-0000-%012d", i)},
			"serviceaccount": map[string]string{"name": "trainer", "uid": "00000000-0000-0000-0000-000000000000"},
		},
	})
	return enc([]byte(`{"alg":"RS256","kid":"forged"}`)) + "." + enc(claims) + "." + enc([]byte("signature-"+strconv.Itoa(i)))
}

// heapInUse is the process's live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestStatusServerBadTokenFlood (issue 17, item 8): 1000 requests with bad
// tokens (forged ones, garbage, one of the namespace's ServiceAccount not
// bound to a pod, repeated) do not starve a real pod's report, which lands
// within 5 s, and the server's memory stays flat.
func TestStatusServerBadTokenFlood(t *testing.T) {
	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	tj, c, pod := reportingTrainJob(t, statusServerReplica(t), ns)
	path := trainjobstatus.StatusPath(ns, "alpha")
	token := podToken(t, pod, ns, "alpha")
	unbound := trainerToken(t, ns, ns, "alpha")
	report := func(progress int32) string {
		return fmt.Sprintf(`{"trainerStatus":{"progressPercentage":%d,"lastUpdatedTime":"2026-12-03T10:00:00Z"}}`, progress)
	}
	// The trainer has reported before the flood, as one does every few
	// seconds while it trains.
	if code, body := c.post(t, path, token, report(1)); code != http.StatusOK {
		t.Fatalf("first report = %d, want 200: %s", code, body)
	}
	before := heapInUse()

	const flood, workers = 1000, 32
	badToken := func(i int) string {
		switch i % 4 {
		case 0:
			return "garbage-" + strconv.Itoa(i)
		case 1:
			return unbound
		default:
			return forgedToken(ns, "alpha", i)
		}
	}
	var mu sync.Mutex
	codes := map[int]int{}
	var errs []error
	var sent sync.WaitGroup
	next := make(chan int)
	started := make(chan struct{})
	var startOnce sync.Once
	for range workers {
		sent.Go(func() {
			for i := range next {
				code, _, err := c.do(t.Context(), path, badToken(i), report(66))
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				}
				codes[code]++
				mu.Unlock()
				startOnce.Do(func() { close(started) })
			}
		})
	}
	go func() {
		defer close(next)
		for i := range flood {
			select {
			case next <- i:
			case <-t.Context().Done():
				return
			}
		}
	}()
	<-started

	// The real report, in the middle of the flood, watched by a client
	// whose own rate limit does not bound how often it looks.
	observerConfig := rest.CopyConfig(env.Cluster.Config)
	observerConfig.QPS, observerConfig.Burst = 100, 200
	observer, err := client.New(observerConfig, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), optest.Timeout)
	defer cancel()
	landed := make(chan error, 1)
	go func() {
		code, body, err := c.do(ctx, path, token, report(77))
		switch {
		case err != nil:
			landed <- err
			return
		case code != http.StatusOK:
			landed <- fmt.Errorf("the real report = %d: %s", code, body)
			return
		}
		landed <- nil
	}()
	err = optest.Poll(ctx, optest.Timeout, func(ctx context.Context) error {
		got := &trainer.TrainJob{}
		if err := optest.Get(ctx, observer, key(tj), got); err != nil {
			return err
		}
		if p := got.Status.TrainerStatus; p == nil || ptr.Deref(p.ProgressPercentage, -1) != 77 {
			return fmt.Errorf("trainerStatus %+v, want progress 77", p)
		}
		return nil
	})
	if err != nil {
		t.Errorf("the real report did not land within %v of the flood: %v", optest.Timeout, err)
	}
	sent.Wait()
	if err := <-landed; err != nil {
		t.Error(err)
	}
	// Every bad token is refused: unauthenticated, forbidden, or told to
	// come back later; none is written.
	refused := map[int]bool{http.StatusUnauthorized: true, http.StatusForbidden: true, http.StatusTooManyRequests: true}
	total := 0
	for code, n := range codes {
		total += n
		if !refused[code] {
			t.Errorf("%d bad-token requests answered %d, want 401, 403 or 429", n, code)
		}
	}
	if len(errs) > 0 {
		t.Errorf("%d bad-token requests got no answer, the first: %v", len(errs), errs[0])
	}
	if total != flood {
		t.Errorf("%d bad-token requests answered, want %d", total, flood)
	}
	t.Logf("bad-token answers by code: %v", codes)
	if got, err := trainerStatusOf(t.Context(), tj); err != nil || got == nil || ptr.Deref(got.ProgressPercentage, -1) != 77 {
		t.Errorf("after the flood: trainerStatus %+v (%v), want progress 77", got, err)
	}
	// The flood leaves nothing behind but bounded caches.
	const maxGrowth = 16 << 20
	if after := heapInUse(); after > before+maxGrowth {
		t.Errorf("live heap grew from %d to %d bytes over the flood, want at most %d more", before, after, maxGrowth)
	}
}

// TestStatusServerReviewsFairly (issue 36, item 9): tokens of one
// namespace, reviewed as fast as they come, do not spend the review budget
// of the others: a trainer of another namespace, whose token the server has
// not seen, reports at once. The status server is a replica of the test's
// own, so that the budget the flood spends is the whole of it.
func TestStatusServerReviewsFairly(t *testing.T) {
	flooder, victim := cluster.NewNamespace(t, env.Client, "test-", nil), cluster.NewNamespace(t, env.Client, "test-", nil)
	_, c, pod := reportingTrainJob(t, ownStatusServerReplica(t), victim)
	token := podToken(t, pod, victim, "alpha")

	// The flood: tokens that claim to be bound to pods of the flooder's
	// namespace, each a new one, which only a review can refuse; it goes on
	// until the victim's report is answered.
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	spent := make(chan struct{})
	var spentOnce sync.Once
	var flood sync.WaitGroup
	for w := range 16 {
		flood.Go(func() {
			for i := w; ctx.Err() == nil; i += 16 {
				code, _, _ := c.do(ctx, trainjobstatus.StatusPath(flooder, "alpha"), forgedToken(flooder, "alpha", i), `{}`)
				if code == http.StatusTooManyRequests {
					spentOnce.Do(func() { close(spent) })
				}
			}
		})
	}
	select {
	case <-spent:
	case <-time.After(optest.Timeout):
		t.Fatal("the flood never found the review budget spent")
	}
	code, body := c.post(t, trainjobstatus.StatusPath(victim, "alpha"), token, progressReport(5))
	stop()
	flood.Wait()
	// The flood's connections closed, the replica stops at once: its server waits for them up to 5 s.
	c.http.CloseIdleConnections()
	if code != http.StatusOK {
		t.Fatalf("the report of another namespace during the flood = %d, want 200: %s", code, body)
	}
}

// TestStatusServerRefusesTokenOfDeletedPod (issue 36, item 9): a token the
// server accepted is refused at the first report after its pod is
// deleted, as the API server refuses it, not once the review is a minute
// old. The status server is a replica of the test's own, whose budget no
// other test has spent: a 429 would say nothing of the token.
func TestStatusServerRefusesTokenOfDeletedPod(t *testing.T) {
	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	tj, c, pod := reportingTrainJob(t, ownStatusServerReplica(t), ns)
	token := podToken(t, pod, ns, "alpha")
	path := trainjobstatus.StatusPath(ns, "alpha")
	if code, body := c.post(t, path, token, progressReport(5)); code != http.StatusOK {
		t.Fatalf("report = %d, want 200: %s", code, body)
	}
	if err := env.Client.Delete(t.Context(), pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	optest.Eventually(t, "the pod is gone", func(ctx context.Context) error {
		return optest.Absent(ctx, env.Client, key(pod), &corev1.Pod{})
	})
	code, body := c.post(t, path, token, progressReport(6))
	got, message := refusalOf(t, code, body)
	want := refusal{Code: http.StatusForbidden, Status: metav1.StatusFailure, Reason: metav1.StatusReasonForbidden}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("report after the pod was deleted (-want +got):\n%s", diff)
	}
	if wantMessage := "pod " + ns + "/alpha-node-0-0 is not a pod of TrainJob " + ns + "/alpha: it is gone"; message != wantMessage {
		t.Errorf("message %q, want %q", message, wantMessage)
	}
	if got, err := trainerStatusOf(t.Context(), tj); err != nil || got == nil || ptr.Deref(got.ProgressPercentage, -1) != 5 {
		t.Errorf("trainerStatus %+v (%v), want progress 5: the report after the pod was deleted was written", got, err)
	}
}

// reportingTrainJob is suspended TrainJob ns/alpha of the torch runtime,
// a client of replica's status server that trusts its trainers' CA, and
// the pod of its trainer.
func reportingTrainJob(t *testing.T, replica *optest.Operator, ns string) (*trainer.TrainJob, *statusClient, *corev1.Pod) {
	t.Helper()
	rt := createTrainingRuntime(t, ns, "torch", torchSpec())
	tj := newTrainJob(ns, "alpha", trainer.TrainingRuntimeKind, "torch")
	tj.Spec.Suspend = ptr.To(true)
	create(t, tj)
	c := newStatusClient(t, replica, caOfTrainers(t, replica, tj, rt))
	return tj, c, trainerPodOf(t, jobSetOf(t, tj), "alpha-node-0")
}

// progressReport is a trainer's report of progress percent.
func progressReport(percent int32) string {
	return fmt.Sprintf(`{"trainerStatus":{"progressPercentage":%d,"lastUpdatedTime":"2026-12-03T10:00:00Z"}}`, percent)
}
