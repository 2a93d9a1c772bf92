package dashboard

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	"sigs.k8s.io/yaml"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/dryrun"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/scheme"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/kueue"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/kueue/kueuetest"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/list"
)

var now = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// torch is the ClusterTrainingRuntime torch: 2 nodes of 4 GPUs.
func torch() *trainer.ClusterTrainingRuntime {
	spec := trainer.TrainingRuntimeSpec{MLPolicy: &trainer.MLPolicy{NumNodes: ptr.To[int32](2)}}
	rj := jobsetv1alpha2.ReplicatedJob{Name: trainer.Node}
	rj.Template.Labels = map[string]string{trainer.AncestorLabel: trainer.AncestorTrainer}
	rj.Template.Spec.Template.Spec.Containers = []corev1.Container{{Name: trainer.Node, Resources: corev1.ResourceRequirements{
		Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("4")}}}}
	spec.Template.Spec.ReplicatedJobs = []jobsetv1alpha2.ReplicatedJob{rj}
	return &trainer.ClusterTrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "torch"}, Spec: spec}
}

// trainJobIn is TrainJob name of namespace team-a on torch, edited by edit.
func trainJobIn(name string, edit func(*trainer.TrainJob)) *trainer.TrainJob {
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, UID: types.UID("uid-" + name),
		CreationTimestamp: metav1.NewTime(now.Add(-time.Hour)), Labels: map[string]string{}}}
	tj.Spec.RuntimeRef = trainer.RuntimeRef{Name: "torch", Kind: ptr.To(trainer.ClusterTrainingRuntimeKind)}
	if edit != nil {
		edit(tj)
	}
	return tj
}

// queuedIn is TrainJob name in LocalQueue gpu, held suspended by Kueue.
func queuedIn(name string) *trainer.TrainJob {
	return trainJobIn(name, func(tj *trainer.TrainJob) {
		tj.Labels[kueue.QueueLabel] = "gpu"
		tj.Spec.Suspend = ptr.To(true)
	})
}

// pendingWorkload is the Workload of tj that Kueue has not admitted: no quota.
func pendingWorkload(tj *trainer.TrainJob) kueue.Workload {
	wl := kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: tj.Namespace, Name: "trainjob-" + tj.Name, UID: "wl-" + tj.UID,
		OwnerReferences: []metav1.OwnerReference{{Kind: trainer.TrainJobKind, Name: tj.Name, UID: tj.UID, Controller: ptr.To(true)}}}}
	wl.Status.Conditions = []metav1.Condition{{Type: kueue.ConditionQuotaReserved, Status: metav1.ConditionFalse, Reason: "Pending",
		Message: "couldn't assign flavors to pod set node: insufficient unused quota for nvidia.com/gpu in flavor gpu, 8 more needed"}}
	return wl
}

// gpuQueue is LocalQueue gpu of ClusterQueue gpu-cq.
func gpuQueue() kueue.LocalQueue {
	lq := kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "gpu"}}
	lq.Spec.ClusterQueue = "gpu-cq"
	return lq
}

// clusterServer is a read-only dashboard of namespace team-a reading objs and Kueue's api.
func clusterServer(t *testing.T, api *kueuetest.API, objs ...client.Object) *Server {
	t.Helper()
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(append(objs, torch())...).WithReturnManagedFields().Build()
	fw, err := (&cmdutil.Pipeline{}).Framework(t.Context(), &dryrun.Inputs{})
	if err != nil {
		t.Fatal(err)
	}
	kc := api.Client()
	return &Server{Token: testToken, Namespace: "team-a", Client: c, Kueue: kc, Rows: list.NewRows(c, fw).InQueues(kc, "team-a"), Pipeline: &cmdutil.Pipeline{},
		Clock: clocktesting.NewFakePassiveClock(now)}
}

func getJSON[T any](t *testing.T, s *Server, target string) T {
	t.Helper()
	resp := serve(t, s, request{method: "GET", target: target, cookie: true})
	b := body(t, resp)
	var v T
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", target, resp.StatusCode, b)
	}
	if err := json.Unmarshal([]byte(b), &v); err != nil {
		t.Fatalf("GET %s: %v: %s", target, err, b)
	}
	return v
}

// controlledBy makes owner obj's controller.
func controlledBy(obj, owner client.Object, kind string) {
	apiVersion := map[string]string{"Job": batchv1.SchemeGroupVersion.String(), "JobSet": jobsetv1alpha2.SchemeGroupVersion.String()}[kind]
	if apiVersion == "" {
		apiVersion = trainer.GroupVersion.String()
	}
	obj.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: owner.GetName(), UID: owner.GetUID(), Controller: ptr.To(true)}})
}

// builtTrainJob is TrainJob llama in LocalQueue gpu, admitted and running, with its runtime snapshot, its JobSet,
// one Job and its pod, and its Workload in api.
func builtTrainJob(t *testing.T, api *kueuetest.API) []client.Object {
	tj := queuedIn("llama")
	tj.Spec.Suspend = ptr.To(false)
	rt := torch()
	rt.SetGroupVersionKind(trainer.GroupVersion.WithKind(trainer.ClusterTrainingRuntimeKind))
	runtimeYAML, err := yaml.Marshal(rt)
	if err != nil {
		t.Fatal(err)
	}
	snapshot := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "llama-runtime-snapshot"},
		Data: map[string]string{"runtime": string(runtimeYAML)}}
	controlledBy(snapshot, tj, trainer.TrainJobKind)
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "llama", UID: "uid-js"}}
	controlledBy(js, tj, trainer.TrainJobKind)
	labels := map[string]string{jobsetv1alpha2.JobSetNameKey: "llama", jobsetv1alpha2.ReplicatedJobNameKey: "node"}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "llama-node-0", UID: "uid-job", Labels: labels}}
	controlledBy(job, js, "JobSet")
	job.Spec.Completions, job.Spec.Parallelism = ptr.To[int32](2), ptr.To[int32](2)
	job.Status.Active = 2
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "llama-node-0-0-x1", Labels: labels}}
	controlledBy(pod, job, "Job")
	pod.Status.Phase = corev1.PodRunning
	wl := pendingWorkload(tj)
	wl.Status.Conditions = []metav1.Condition{{Type: kueue.ConditionAdmitted, Status: metav1.ConditionTrue, Reason: "Admitted", Message: "The workload is admitted"}}
	api.Workloads = append(api.Workloads, wl)
	return []client.Object{tj, snapshot, js, job, pod}
}

// logServer is a kube client whose API server answers each pod's log (of namespace team-a) from logs, and 404
// for the others, as an API server whose kubelet no longer has them.
func logServer(t *testing.T, logs map[string]string) kubernetes.Interface {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pod := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/api/v1/namespaces/team-a/pods/"), "/log")
		if text, ok := logs[pod]; ok && strings.HasSuffix(r.URL.Path, "/log") {
			_, _ = io.WriteString(w, text)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"the server could not find the requested resource","reason":"NotFound","code":404}`)
	}))
	t.Cleanup(srv.Close)
	c, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestMetric: the charts' metric of one rank is parsed from its log by a regular expression: the number after
// the match (the demo's trainer prints `step N loss X`), or its first group; the step is the number after
// "step" on the line, else the count of the matching lines. A line without a number after the match, or with
// a value that is not finite, is no point; an invalid expression is refused; a pod that is not the TrainJob's
// is not read.
func TestMetric(t *testing.T) {
	api := &kueuetest.API{Versions: []string{"v1beta2"}, LocalQueues: []kueue.LocalQueue{gpuQueue()}}
	objs := builtTrainJob(t, api)
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "other-pod"}}
	s := clusterServer(t, api, append(objs, other)...)
	s.Logs = logServer(t, map[string]string{"llama-node-0-0-x1": "rendezvous at llama-node-0-0.llama:29400\n" +
		"step 1 loss 2.500000\nstep 2 loss 1.250000\nstep 3 loss NaN\nloss: diverged\nstep 4 loss 6.25e-01 acc=0.9\n" +
		"rank 0 done: w = [2.0000 -3.0000 0.5000 1.0000]\nval_loss=0.5\n"})
	for _, tc := range []struct {
		query string
		code  int
		want  []Point
	}{
		{query: "pod=llama-node-0-0-x1", code: http.StatusOK, want: []Point{{1, 2.5}, {2, 1.25}, {4, 0.625}, {5, 0.5}}},
		{query: "pod=llama-node-0-0-x1&regexp=" + url.QueryEscape(`\bloss`), code: http.StatusOK, want: []Point{{1, 2.5}, {2, 1.25}, {4, 0.625}}},
		{query: "pod=llama-node-0-0-x1&regexp=" + url.QueryEscape(`acc=(\S+)`), code: http.StatusOK, want: []Point{{4, 0.9}}},
		{query: "pod=llama-node-0-0-x1&regexp=" + url.QueryEscape(`w = \[\S+ (\S+)`), code: http.StatusOK, want: []Point{{1, -3}}},
		{query: "pod=llama-node-0-0-x1&regexp=" + url.QueryEscape("(unclosed"), code: http.StatusBadRequest},
		{query: "pod=other-pod", code: http.StatusNotFound},
	} {
		resp := serve(t, s, request{method: "GET", target: "/api/trainjobs/team-a/llama/metric?" + tc.query, cookie: true})
		b := body(t, resp)
		if resp.StatusCode != tc.code {
			t.Errorf("%s: %d %s, want %d", tc.query, resp.StatusCode, b, tc.code)
			continue
		}
		if tc.code != http.StatusOK {
			continue
		}
		var got Metric
		if err := json.Unmarshal([]byte(b), &got); err != nil {
			t.Fatalf("%s: %v: %s", tc.query, err, b)
		}
		if !slices.Equal(got.Points, tc.want) {
			t.Errorf("%s: points %v, want %v", tc.query, got.Points, tc.want)
		}
	}
}

// TestFirstFailureLogGone: when the log of the container that failed first is gone (the API server answers 404:
// the pod or its node no longer has it), the first failure card says so in words, with the API server's
// reason; a log that is there is shown, and the card says nothing of a missing one.
func TestFirstFailureLogGone(t *testing.T) {
	api := &kueuetest.API{Versions: []string{"v1beta2"}, LocalQueues: []kueue.LocalQueue{gpuQueue()}}
	objs := builtTrainJob(t, api)
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			p.OwnerReferences[0].APIVersion = batchv1.SchemeGroupVersion.String()
			p.Spec.Containers = []corev1.Container{{Name: trainer.Node}}
			p.Status.Phase = corev1.PodFailed
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: trainer.Node,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}}}
		}
	}
	s := clusterServer(t, api, objs...)
	s.Logs = logServer(t, nil)
	got := getJSON[TrainJob](t, s, "/api/trainjobs/team-a/llama")
	const want = "This pod's log could not be read: its node no longer has it (its pod or container was deleted, or its node left the cluster); the API server said: the server could not find the requested resource (get pods llama-node-0-0-x1)"
	if got.Summary.FirstFailure == nil || got.FirstFailureNoLog != want {
		t.Errorf("the first failure card says %q of its log, want %q (first failure %+v)", got.FirstFailureNoLog, want, got.Summary.FirstFailure)
	}

	s.Logs = logServer(t, map[string]string{"llama-node-0-0-x1": "CUDA out of memory\n"})
	got = getJSON[TrainJob](t, s, "/api/trainjobs/team-a/llama")
	if f := got.Summary.FirstFailure; f == nil || !slices.Equal(f.Log, []string{"CUDA out of memory"}) || got.FirstFailureNoLog != "" {
		t.Errorf("with its log there, the first failure card shows %+v and says %q of its log, want the log and nothing", f, got.FirstFailureNoLog)
	}
}
