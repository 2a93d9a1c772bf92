package cluster_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
)

// TestFullProfile is the acceptance test of the local cluster: a JobSet runs on the fake GPU nodes, the
// scheduler honours GPU capacity and taints, simulated pods serve logs, and the simulation knobs work.
func TestFullProfile(t *testing.T) {
	c := cluster.StartForTest(t, cluster.Options{Profile: cluster.ProfileFull, CRDDirs: testCRDDirs(t)})
	cl := newClient(t, c)
	s := &suite{c: c, cl: cl}

	t.Run("JobSet runs on two GPU nodes to Completed", s.jobSetCompletes)
	t.Run("pod asking for more GPUs than a node has stays Unschedulable", s.tooManyGPUs)
	t.Run("pods without the GPU toleration never land on a GPU node", s.noToleration)
	t.Run("a pod requesting GPUs is given the GPU toleration at admission and runs on a GPU node", s.gpuToleratedAtAdmission)
	t.Run("simulated pods serve logs", s.podLogs)
	t.Run("SIM_EXIT_CODE fails a restartPolicy Never pod", s.exitCodeNever)
	t.Run("SIM_EXIT_CODE under OnFailure restarts until the Job gives up", s.exitCodeOnFailure)
	t.Run("SIM_RESTARTS crashes the containers before they succeed", s.crashes)
	t.Run("restarts annotation restarts a running pod at once", s.restartAnnotation)
	t.Run("SIM_EXIT_REASON names the exit: an OOM kill", s.oomKilled)
	t.Run("SIM_BACKOFF_SECONDS keeps a crashed container in CrashLoopBackOff", s.crashLoop)
	t.Run("SIM_IMAGE_PULL_ERROR leaves the pod Pending in ImagePullBackOff", s.imagePullError)
	t.Run("SIM_EVICT has the kubelet evict the pod", s.evicted)
	t.Run("SIM_INDEXES limits the knobs to some completion indexes", s.someIndexes)
	t.Run("KWOK killed is started again and runs the pods created after", s.kwokKilled)
}

type suite struct {
	c  *cluster.Cluster
	cl client.Client
}

// namespace creates a namespace for one subtest.
func (s *suite) namespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "test-"}}
	if err := s.cl.Create(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

func (s *suite) jobSetCompletes(t *testing.T) {
	ns := s.namespace(t)
	// Record every phase each pod goes through, from before the JobSet exists.
	phases := s.recordPodPhases(t, ns)

	gpus := corev1.ResourceList{cluster.GPUResource: resource.MustParse("8")}
	js := &jobsetv1alpha2.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: ns},
		Spec: jobsetv1alpha2.JobSetSpec{ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{
			Name:     "node",
			Replicas: 2,
			Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
				Parallelism: ptr.To[int32](1),
				Completions: ptr.To[int32](1),
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyOnFailure,
					Tolerations:   []corev1.Toleration{cluster.GPUToleration()},
					Containers: []corev1.Container{{
						Name:      "trainer",
						Image:     "pytorch/pytorch",
						Resources: corev1.ResourceRequirements{Requests: gpus, Limits: gpus},
					}},
				}},
			}},
		}}},
	}
	if err := s.cl.Create(t.Context(), js); err != nil {
		t.Fatal(err)
	}
	s.waitCompleted(t, js, "JobSet Completed")

	var jobs batchv1.JobList
	if err := s.cl.List(t.Context(), &jobs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var complete []string
	for _, j := range jobs.Items {
		for _, cond := range j.Status.Conditions {
			if cond.Type == batchv1.JobComplete && cond.Status == corev1.ConditionTrue {
				complete = append(complete, j.Name)
			}
		}
	}
	slices.Sort(complete)
	if diff := cmp.Diff([]string{"train-node-0", "train-node-1"}, complete); diff != "" {
		t.Errorf("complete Jobs (-want +got):\n%s", diff)
	}

	var pods corev1.PodList
	if err := s.cl.List(t.Context(), &pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var nodes []string
	for _, p := range pods.Items {
		nodes = append(nodes, p.Spec.NodeName)
	}
	slices.Sort(nodes)
	if len(nodes) != 2 || nodes[0] == nodes[1] || !isGPUNode(nodes[0]) || !isGPUNode(nodes[1]) {
		t.Errorf("pods ran on nodes %v, want two distinct GPU nodes", nodes)
	}
	want := [][]corev1.PodPhase{
		{corev1.PodPending, corev1.PodRunning, corev1.PodSucceeded},
		{corev1.PodPending, corev1.PodRunning, corev1.PodSucceeded},
	}
	if diff := cmp.Diff(want, phases()); diff != "" {
		t.Errorf("phases of the pods (-want +got):\n%s", diff)
	}
}

// recordPodPhases watches the pods of namespace ns and returns a function that gives, for every pod seen,
// the phases it went through in order.
func (s *suite) recordPodPhases(t *testing.T, ns string) func() [][]corev1.PodPhase {
	t.Helper()
	w, err := s.c.Clientset().CoreV1().Pods(ns).Watch(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[types.UID][]corev1.PodPhase{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			mu.Lock()
			if h := seen[p.UID]; len(h) == 0 || h[len(h)-1] != p.Status.Phase {
				seen[p.UID] = append(h, p.Status.Phase)
			}
			mu.Unlock()
		}
	}()
	t.Cleanup(func() { w.Stop(); <-done })
	return func() [][]corev1.PodPhase {
		mu.Lock()
		defer mu.Unlock()
		var all [][]corev1.PodPhase
		for _, h := range seen {
			all = append(all, slices.Clone(h))
		}
		return all
	}
}

// waitCompleted waits until the JobSet js is Completed (what names the wait), failing the test if it fails.
func (s *suite) waitCompleted(t *testing.T, js *jobsetv1alpha2.JobSet, what string) {
	t.Helper()
	cluster.Eventually(t, what, waitTimeout, cluster.Holds(func(ctx context.Context) (bool, error) {
		if err := s.cl.Get(ctx, client.ObjectKeyFromObject(js), js); err != nil {
			return false, err
		}
		if meta.IsStatusConditionTrue(js.Status.Conditions, string(jobsetv1alpha2.JobSetFailed)) {
			return false, fmt.Errorf("JobSet failed: %+v", js.Status.Conditions)
		}
		return meta.IsStatusConditionTrue(js.Status.Conditions, string(jobsetv1alpha2.JobSetCompleted)), nil
	}))
}

func isGPUNode(name string) bool { return strings.HasPrefix(name, "gpu-node-") }

func (s *suite) tooManyGPUs(t *testing.T) {
	ns := s.namespace(t)
	gpus := corev1.ResourceList{cluster.GPUResource: resource.MustParse("16")}
	pod := simPod(ns, "greedy", corev1.RestartPolicyNever)
	pod.Spec.Tolerations = []corev1.Toleration{cluster.GPUToleration()}
	pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: gpus, Limits: gpus}
	if err := s.cl.Create(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	var scheduled *corev1.PodCondition
	cluster.Eventually(t, "PodScheduled=False", waitTimeout, cluster.Holds(func(ctx context.Context) (bool, error) {
		if err := s.cl.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, err
		}
		for i, cond := range pod.Status.Conditions {
			if cond.Type == corev1.PodScheduled {
				scheduled = &pod.Status.Conditions[i]
			}
		}
		return scheduled != nil, nil
	}))
	want := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}
	if diff := cmp.Diff(want, *scheduled, cmpopts.IgnoreFields(corev1.PodCondition{}, "Message", "LastProbeTime", "LastTransitionTime", "ObservedGeneration")); diff != "" {
		t.Errorf("PodScheduled condition (-want +got):\n%s", diff)
	}
	if !strings.Contains(scheduled.Message, "Insufficient nvidia.com/gpu") {
		t.Errorf("PodScheduled message %q does not name the missing GPUs", scheduled.Message)
	}
	if pod.Spec.NodeName != "" || pod.Status.Phase != corev1.PodPending {
		t.Errorf("pod is on node %q in phase %s, want Pending on no node", pod.Spec.NodeName, pod.Status.Phase)
	}
}

func (s *suite) noToleration(t *testing.T) {
	ns := s.namespace(t)
	// Six pods: more than the CPU nodes, and the roomier GPU nodes would score higher were they not tainted.
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "cpu-work", Namespace: ns},
		Spec: batchv1.JobSpec{
			Parallelism: ptr.To[int32](6),
			Completions: ptr.To[int32](6),
			Template:    corev1.PodTemplateSpec{Spec: simPod(ns, "", corev1.RestartPolicyNever).Spec},
		},
	}
	if err := s.cl.Create(t.Context(), job); err != nil {
		t.Fatal(err)
	}
	cluster.Eventually(t, "Job Complete", waitTimeout, cluster.Holds(func(ctx context.Context) (bool, error) {
		if err := s.cl.Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
			return false, err
		}
		return job.Status.Succeeded == 6, nil
	}))
	var pods corev1.PodList
	if err := s.cl.List(t.Context(), &pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" || isGPUNode(p.Spec.NodeName) {
			t.Errorf("pod %s ran on node %q, want a CPU node", p.Name, p.Spec.NodeName)
		}
	}
}

func (s *suite) podLogs(t *testing.T) {
	ns := s.namespace(t)
	pod := simPod(ns, "logger", corev1.RestartPolicyNever)
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: cluster.EnvRunSeconds, Value: "3600"}}
	s.createRunning(t, pod)
	logs := func(previous bool) string {
		t.Helper()
		got, err := s.c.Clientset().CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{Container: "main", Previous: previous}).DoRaw(t.Context())
		if err != nil {
			t.Fatalf("logs (previous=%v): %v", previous, err)
		}
		return string(got)
	}

	if got := logs(false); !strings.Contains(got, "simulated container started") {
		t.Errorf("logs of a pod that wrote none = %q, want the default line", got)
	}
	if err := s.c.WritePodLog(t.Context(), ns, pod.Name, "main", "epoch 1 loss 0.9", "epoch 2 loss 0.5"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("epoch 1 loss 0.9\nepoch 2 loss 0.5\n", logs(false)); diff != "" {
		t.Errorf("logs (-want +got):\n%s", diff)
	}

	// A follow stream shows lines written after it opened.
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	stream, err := s.c.Clientset().CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{Container: "main", Follow: true}).Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	lines := bufio.NewScanner(stream)
	var already []string
	for range 2 {
		lines.Scan()
		already = append(already, lines.Text())
	}
	if diff := cmp.Diff([]string{"epoch 1 loss 0.9", "epoch 2 loss 0.5"}, already); diff != "" {
		t.Errorf("follow stream, lines written before it opened (-want +got):\n%s", diff)
	}
	if err := s.c.WritePodLog(t.Context(), ns, pod.Name, "main", "epoch 3 loss 0.2"); err != nil {
		t.Fatal(err)
	}
	if !lines.Scan() || lines.Text() != "epoch 3 loss 0.2" {
		t.Errorf("follow stream gave %q (err %v), want the line written after it opened", lines.Text(), lines.Err())
	}

	if err := s.c.RestartContainer(t.Context(), ns, pod.Name, "main", 137); err != nil {
		t.Fatal(err)
	}
	if err := s.c.WritePodLog(t.Context(), ns, pod.Name, "main", "resumed from checkpoint"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("epoch 1 loss 0.9\nepoch 2 loss 0.5\nepoch 3 loss 0.2\n", logs(true)); diff != "" {
		t.Errorf("previous logs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff("resumed from checkpoint\n", logs(false)); diff != "" {
		t.Errorf("logs after the restart (-want +got):\n%s", diff)
	}
	if err := s.cl.Get(t.Context(), client.ObjectKeyFromObject(pod), pod); err != nil {
		t.Fatal(err)
	}
	st := pod.Status.ContainerStatuses[0]
	if st.RestartCount != 1 || st.LastTerminationState.Terminated == nil || st.LastTerminationState.Terminated.ExitCode != 137 || st.State.Running == nil {
		t.Errorf("container status after the restart = %+v, want restartCount 1, last exit 137, running", st)
	}
}

func (s *suite) exitCodeNever(t *testing.T) {
	ns := s.namespace(t)
	pod := simPod(ns, "fails", corev1.RestartPolicyNever)
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: cluster.EnvExitCode, Value: "3"}}
	if err := s.cl.Create(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	s.waitPhase(t, pod, corev1.PodFailed)
	want := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error"}}
	if diff := cmp.Diff(want, pod.Status.ContainerStatuses[0].State, ignoreTimes); diff != "" {
		t.Errorf("container state (-want +got):\n%s", diff)
	}
}

func (s *suite) exitCodeOnFailure(t *testing.T) {
	ns := s.namespace(t)
	spec := simPod(ns, "", corev1.RestartPolicyOnFailure).Spec
	spec.Containers[0].Env = []corev1.EnvVar{{Name: cluster.EnvExitCode, Value: "1"}}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "flaky", Namespace: ns},
		Spec:       batchv1.JobSpec{BackoffLimit: ptr.To[int32](1), Template: corev1.PodTemplateSpec{Spec: spec}},
	}
	if err := s.cl.Create(t.Context(), job); err != nil {
		t.Fatal(err)
	}
	var failed *batchv1.JobCondition
	cluster.Eventually(t, "Job Failed", waitTimeout, cluster.Holds(func(ctx context.Context) (bool, error) {
		if err := s.cl.Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
			return false, err
		}
		for i, cond := range job.Status.Conditions {
			if cond.Type == batchv1.JobFailed && cond.Status == corev1.ConditionTrue {
				failed = &job.Status.Conditions[i]
			}
		}
		return failed != nil, nil
	}))
	if failed.Reason != batchv1.JobReasonBackoffLimitExceeded {
		t.Errorf("Job failed with reason %q, want %q", failed.Reason, batchv1.JobReasonBackoffLimitExceeded)
	}
}

func (s *suite) crashes(t *testing.T) {
	ns := s.namespace(t)
	pod := simPod(ns, "crashes", corev1.RestartPolicyNever)
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: cluster.EnvRestarts, Value: "2"}, {Name: cluster.EnvRunSeconds, Value: "0.2"}}
	if err := s.cl.Create(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	s.waitPhase(t, pod, corev1.PodSucceeded)
	st := pod.Status.ContainerStatuses[0]
	want := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}
	if diff := cmp.Diff(want, st.LastTerminationState, ignoreTimes); diff != "" || st.RestartCount != 2 {
		t.Errorf("restartCount %d (want 2), last state (-want +got):\n%s", st.RestartCount, diff)
	}
}

func (s *suite) restartAnnotation(t *testing.T) {
	ns := s.namespace(t)
	pod := simPod(ns, "restarted", corev1.RestartPolicyNever)
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: cluster.EnvRunSeconds, Value: "3600"}}
	s.createRunning(t, pod)
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"annotations":{%q:"1"}}}`, cluster.RestartsAnnotation))
	if err := s.cl.Patch(t.Context(), pod, patch); err != nil {
		t.Fatal(err)
	}
	cluster.Eventually(t, "restartCount 1", waitTimeout, cluster.Holds(func(ctx context.Context) (bool, error) {
		if err := s.cl.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, err
		}
		return pod.Status.ContainerStatuses[0].RestartCount == 1, nil
	}))
	if pod.Status.Phase != corev1.PodRunning || pod.Status.ContainerStatuses[0].State.Running == nil {
		t.Errorf("pod phase %s, container state %+v, want a running container", pod.Status.Phase, pod.Status.ContainerStatuses[0].State)
	}
}

func (s *suite) oomKilled(t *testing.T) {
	ns := s.namespace(t)
	pod := simPod(ns, "oom", corev1.RestartPolicyNever)
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: cluster.EnvExitCode, Value: "137"}, {Name: cluster.EnvExitReason, Value: "OOMKilled"},
		{Name: cluster.EnvRunSeconds, Value: "0.2"}}
	if err := s.cl.Create(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	s.waitPhase(t, pod, corev1.PodFailed)
	want := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}
	if diff := cmp.Diff(want, pod.Status.ContainerStatuses[0].State, ignoreTimes); diff != "" {
		t.Errorf("container state (-want +got):\n%s", diff)
	}
}

// crashLoop: a container that exits 1 under restartPolicy OnFailure waits in CrashLoopBackOff, its pod not
// ready, between its runs, and keeps crashing.
func (s *suite) crashLoop(t *testing.T) {
	ns := s.namespace(t)
	pod := simPod(ns, "crash-loop", corev1.RestartPolicyOnFailure)
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: cluster.EnvExitCode, Value: "1"}, {Name: cluster.EnvRunSeconds, Value: "0.2"},
		{Name: cluster.EnvBackoffSeconds, Value: "1"}}
	if err := s.cl.Create(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	var backingOff corev1.ContainerStatus
	cluster.Eventually(t, "CrashLoopBackOff", waitTimeout, cluster.Holds(func(ctx context.Context) (bool, error) {
		if err := s.cl.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, err
		}
		if st := pod.Status.ContainerStatuses; len(st) == 1 && st[0].State.Waiting != nil {
			backingOff = st[0]
			return true, nil
		}
		return false, nil
	}))
	want := corev1.ContainerStatus{Name: "main", Image: "busybox", RestartCount: 1,
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}}
	if diff := cmp.Diff(want, backingOff, ignoreTimes, cmpopts.IgnoreFields(corev1.ContainerStateWaiting{}, "Message"), cmpopts.IgnoreFields(corev1.ContainerStatus{}, "Started")); diff != "" {
		t.Errorf("container status (-want +got):\n%s", diff)
	}
	if c := podCondition(pod, corev1.PodReady); c == nil || c.Status != corev1.ConditionFalse || pod.Status.Phase != corev1.PodRunning {
		t.Errorf("pod %s with Ready %+v, want Running and not ready", pod.Status.Phase, c)
	}
	cluster.Eventually(t, "the second crash", waitTimeout, cluster.Holds(func(ctx context.Context) (bool, error) {
		if err := s.cl.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, err
		}
		return pod.Status.ContainerStatuses[0].RestartCount >= 2, nil
	}))
}

func (s *suite) imagePullError(t *testing.T) {
	ns := s.namespace(t)
	pod := simPod(ns, "no-image", corev1.RestartPolicyNever)
	pod.Spec.Containers[0].Image = "ghcr.io/example/no-such-image:1"
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: cluster.EnvImagePullError, Value: "1"}}
	if err := s.cl.Create(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	cluster.Eventually(t, "ImagePullBackOff", waitTimeout, cluster.Holds(func(ctx context.Context) (bool, error) {
		if err := s.cl.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, err
		}
		st := pod.Status.ContainerStatuses
		return len(st) == 1 && st[0].State.Waiting != nil && st[0].State.Waiting.Reason == "ImagePullBackOff", nil
	}))
	const image = "ghcr.io/example/no-such-image:1"
	wantMessage := `Back-off pulling image "` + image + `": ErrImagePull: failed to pull and unpack image "` + image +
		`": failed to resolve reference "` + image + `": ` + image + `: not found`
	if got := pod.Status.ContainerStatuses[0].State.Waiting.Message; got != wantMessage {
		t.Errorf("waiting message %q, want %q", got, wantMessage)
	}
	if pod.Status.Phase != corev1.PodPending || pod.Spec.NodeName == "" || pod.Status.StartTime == nil {
		t.Errorf("pod %s on %q started %v, want Pending on a node, started", pod.Status.Phase, pod.Spec.NodeName, pod.Status.StartTime)
	}
}

func (s *suite) evicted(t *testing.T) {
	ns := s.namespace(t)
	pod := simPod(ns, "evicted", corev1.RestartPolicyNever)
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: cluster.EnvEvict, Value: "1"}, {Name: cluster.EnvRunSeconds, Value: "0.2"}}
	if err := s.cl.Create(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	s.waitPhase(t, pod, corev1.PodFailed)
	if pod.Status.Reason != "Evicted" || !strings.HasPrefix(pod.Status.Message, "The node was low on resource: memory.") {
		t.Errorf("pod reason %q, message %q, want Evicted for memory", pod.Status.Reason, pod.Status.Message)
	}
	if c := podCondition(pod, corev1.DisruptionTarget); c == nil || c.Status != corev1.ConditionTrue || c.Reason != "TerminationByKubelet" {
		t.Errorf("DisruptionTarget condition %+v, want True by TerminationByKubelet", c)
	}
	want := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "Error"}}
	if diff := cmp.Diff(want, pod.Status.ContainerStatuses[0].State, ignoreTimes); diff != "" {
		t.Errorf("container state (-want +got):\n%s", diff)
	}
}

// someIndexes: of two pods of completion indexes 0 and 1 (labelled as an Indexed Job labels them), only index 1
// takes SIM_EXIT_CODE.
func (s *suite) someIndexes(t *testing.T) {
	ns := s.namespace(t)
	phases := map[string]corev1.PodPhase{}
	for _, index := range []string{"0", "1"} {
		pod := simPod(ns, "rank-"+index, corev1.RestartPolicyNever)
		pod.Labels = map[string]string{batchv1.JobCompletionIndexAnnotation: index}
		pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: cluster.EnvExitCode, Value: "3"}, {Name: cluster.EnvIndexes, Value: "1"},
			{Name: cluster.EnvRunSeconds, Value: "0.2"}}
		if err := s.cl.Create(t.Context(), pod); err != nil {
			t.Fatal(err)
		}
		cluster.Eventually(t, "pod "+pod.Name+" ended", waitTimeout, cluster.Holds(func(ctx context.Context) (bool, error) {
			if err := s.cl.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
				return false, err
			}
			phases[index] = pod.Status.Phase
			return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed, nil
		}))
	}
	if diff := cmp.Diff(map[string]corev1.PodPhase{"0": corev1.PodSucceeded, "1": corev1.PodFailed}, phases); diff != "" {
		t.Errorf("phases by completion index (-want +got):\n%s", diff)
	}
}

func podCondition(p *corev1.Pod, typ corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == typ {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// gpuToleratedAtAdmission: the API server runs ExtendedResourceToleration, as GPU clusters do, so a pod that
// requests nvidia.com/gpu and tolerates nothing is stored with the toleration of the GPU taint and runs on a
// GPU node.
// kwokKilled: KWOK, which plays every fake node's kubelet, dies (KWOK v0.8.0 can at its start, of a race in a
// library) and is started again, as a kubelet restarts a crashed static pod; the pods created after run.
func (s *suite) kwokKilled(t *testing.T) {
	ns := s.namespace(t)
	if err := s.c.KillComponent(t.Context(), "kwok"); err != nil {
		t.Fatal(err)
	}
	s.createRunning(t, simPod(ns, "after-kwok-died", corev1.RestartPolicyNever))
}

func (s *suite) gpuToleratedAtAdmission(t *testing.T) {
	ns := s.namespace(t)
	gpus := corev1.ResourceList{cluster.GPUResource: resource.MustParse("8")}
	pod := simPod(ns, "gpu-without-toleration", corev1.RestartPolicyNever)
	pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: gpus, Limits: gpus}
	s.createRunning(t, pod)
	want := corev1.Toleration{Key: string(cluster.GPUResource), Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	if !slices.Contains(pod.Spec.Tolerations, want) {
		t.Errorf("tolerations %+v lack %+v, which ExtendedResourceToleration adds", pod.Spec.Tolerations, want)
	}
	if !isGPUNode(pod.Spec.NodeName) {
		t.Errorf("pod runs on %q, want a GPU node", pod.Spec.NodeName)
	}
}

var ignoreTimes = cmpopts.IgnoreTypes(metav1.Time{})

// simPod is a one-container pod without GPU; name "" leaves it for a pod template.
func simPod(ns, name string, restart corev1.RestartPolicy) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			RestartPolicy: restart,
			Containers: []corev1.Container{{
				Name:      "main",
				Image:     "busybox",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}},
			}},
		},
	}
}

func (s *suite) createRunning(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	if err := s.cl.Create(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	s.waitPhase(t, pod, corev1.PodRunning)
}

func (s *suite) waitPhase(t *testing.T, pod *corev1.Pod, phase corev1.PodPhase) {
	t.Helper()
	cluster.Eventually(t, fmt.Sprintf("pod %s %s", pod.Name, phase), waitTimeout, cluster.Holds(func(ctx context.Context) (bool, error) {
		if err := s.cl.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, err
		}
		return pod.Status.Phase == phase, nil
	}))
}

// testCRDDirs are the CRD folders to install: the defaults, or test/crds alone while config/crd/bases does not
// exist yet.
func testCRDDirs(t *testing.T) []string {
	t.Helper()
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "config", "crd", "bases")); os.IsNotExist(err) {
		t.Log("config/crd/bases does not exist yet: installing test/crds only")
		return []string{filepath.Join(root, "test", "crds")}
	}
	return nil
}
