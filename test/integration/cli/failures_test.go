package cli

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/status"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/golden"
)

// TestStatusFailures runs TrainJobs whose pods fail on the local cluster's simulated GPU nodes (test/cluster's
// knobs): a rank OOM-killed until the JobSet's maxRestarts is used up, a crash-looping rank, a rank whose image
// cannot be pulled, an evicted pod. Their JobSets are built as the operator builds them, the JobSet and Job
// controllers and KWOK run them, and the TrainJob's status is written from its JobSet's as the operator (and
// upstream's controller) writes it. `status` starts with the first failure and `logs --failed` prints that
// container's log. Times differ from run to run: the goldens hold the screen down to its Pipeline section,
// with times as placeholders.
func TestStatusFailures(t *testing.T) {
	c := cluster.StartForTest(t, cluster.Options{Profile: cluster.ProfileFull})
	for _, tc := range []struct {
		name string
		test func(*testing.T, *cluster.Cluster)
	}{
		{"OOMKilled", testFailureOOMKilled},
		{"CrashLoop", testFailureCrashLoop},
		{"ImagePull", testFailureImagePull},
		{"Evicted", testFailureEvicted},
		{"SickGPUs", testFailureSickGPUs},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.test(t, c)
		})
	}
}

// failingTrainJob is a TrainJob of numNodes nodes and its JobSet as the operator builds it from a torch
// runtime: one replicated job node, an Indexed Job of one pod per node with a GPU each (the four tests together
// fit the local cluster's GPUs at once), restartPolicy restart,
// backoffLimit backoff, failurePolicy fp; its pods' containers take env (test/cluster's knobs). With logs, each
// pod waits until the log lines of its rank are written (releaseGated), so that they are there before it
// fails; without, its log is the simulation's default.
type failingTrainJob struct {
	name     string
	numNodes int32
	restart  corev1.RestartPolicy
	backoff  int32
	fp       *jobsetv1alpha2.FailurePolicy
	env      map[string]string
	logs     map[string][]string // rank → log lines
	// node, when set, is the one node the pods run on; they tolerate its taints.
	node *corev1.Node
}

func (ft failingTrainJob) create(t *testing.T, c *cluster.Cluster, f *fixture) *trainer.TrainJob {
	t.Helper()
	if ft.logs != nil {
		go releaseGated(t.Context(), c, f.c, f.ns, ft.logs)
	}
	tj := f.trainJob(ft.name, ft.numNodes, false)
	gpus := corev1.ResourceList{cluster.GPUResource: resource.MustParse("1")}
	var env []corev1.EnvVar
	for _, k := range []string{cluster.EnvRunSeconds, cluster.EnvExitCode, cluster.EnvExitReason, cluster.EnvBackoffSeconds,
		cluster.EnvImagePullError, cluster.EnvEvict, cluster.EnvIndexes} {
		if v, ok := ft.env[k]; ok {
			env = append(env, corev1.EnvVar{Name: k, Value: v})
		}
	}
	podSpec := corev1.PodSpec{
		RestartPolicy: ft.restart,
		Tolerations:   []corev1.Toleration{cluster.GPUToleration()},
		Containers: []corev1.Container{{Name: trainer.Node, Image: ptr.Deref(tj.Spec.Trainer.Image, "busybox"), Env: env,
			Resources: corev1.ResourceRequirements{Requests: gpus, Limits: gpus}}},
	}
	if ft.logs != nil {
		podSpec.SchedulingGates = []corev1.PodSchedulingGate{{Name: logsGate}}
	}
	if ft.node != nil {
		podSpec.NodeSelector = map[string]string{corev1.LabelHostname: ft.node.Name}
		for _, taint := range ft.node.Spec.Taints {
			podSpec.Tolerations = append(podSpec.Tolerations, corev1.Toleration{Key: taint.Key, Operator: corev1.TolerationOpExists, Effect: taint.Effect})
		}
	}
	js := &jobsetv1alpha2.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: tj.Name, OwnerReferences: []metav1.OwnerReference{owner(tj)}},
		Spec: jobsetv1alpha2.JobSetSpec{
			FailurePolicy: ft.fp,
			ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{Name: trainer.Node, Replicas: 1, Template: batchv1.JobTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{trainer.AncestorLabel: trainer.AncestorTrainer}},
				Spec: batchv1.JobSpec{
					Parallelism: ptr.To(ft.numNodes), Completions: ptr.To(ft.numNodes), CompletionMode: ptr.To(batchv1.IndexedCompletion),
					BackoffLimit: ptr.To(ft.backoff), Template: corev1.PodTemplateSpec{Spec: podSpec},
				},
			}}},
		},
	}
	f.create(js)
	return tj
}

// releaseGated writes the log lines of every gated pod of namespace ns by its rank, then lets the scheduler
// have it, until ctx ends: a pod's lines are in its log before it runs (and fails).
func releaseGated(ctx context.Context, c *cluster.Cluster, cl client.Client, ns string, lines map[string][]string) {
	for ctx.Err() == nil {
		var pods corev1.PodList
		if err := cl.List(ctx, &pods, client.InNamespace(ns)); err == nil {
			for i := range pods.Items {
				p := &pods.Items[i]
				if len(p.Spec.SchedulingGates) == 0 {
					continue
				}
				if err := c.WritePodLog(ctx, ns, p.Name, trainer.Node, lines[p.Labels[batchv1.JobCompletionIndexAnnotation]]...); err != nil {
					continue
				}
				p.Spec.SchedulingGates = nil
				_ = cl.Update(ctx, p) // on a conflict, the next round tries again
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// syncFromJobSet writes the TrainJob's status from its JobSet's as the operator writes it, once ready says the
// JobSet and the TrainJob's pods are where the test wants them: jobsStatus from the JobSet's replicated jobs,
// and the JobSet's Failed condition as the TrainJob's.
func syncFromJobSet(t *testing.T, f *fixture, tj *trainer.TrainJob, what string, ready func(*jobsetv1alpha2.JobSet, []corev1.Pod) bool) {
	t.Helper()
	js := &jobsetv1alpha2.JobSet{}
	cluster.Eventually(t, what, waitTimeout, cluster.Holds(func(ctx context.Context) (bool, error) {
		if err := f.c.Get(ctx, client.ObjectKeyFromObject(tj), js); err != nil {
			return false, err
		}
		var pods corev1.PodList
		if err := f.c.List(ctx, &pods, client.InNamespace(f.ns), client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: tj.Name}); err != nil {
			return false, err
		}
		return ready(js, pods.Items), nil
	}))
	tj.Status.JobsStatus = nil
	for _, rj := range js.Status.ReplicatedJobsStatus {
		tj.Status.JobsStatus = append(tj.Status.JobsStatus, jobStatus(rj.Name, rj.Ready, rj.Active, rj.Succeeded, rj.Failed))
	}
	if c := meta.FindStatusCondition(js.Status.Conditions, string(jobsetv1alpha2.JobSetFailed)); c != nil && c.Status == metav1.ConditionTrue {
		tj.Status.Conditions = []metav1.Condition{condition(trainer.TrainJobFailed, c.Reason, c.Message, metav1.ConditionTrue, c.LastTransitionTime)}
	}
	f.updateStatus(tj)
}

func jobSetFailed(js *jobsetv1alpha2.JobSet, _ []corev1.Pod) bool {
	return meta.IsStatusConditionTrue(js.Status.Conditions, string(jobsetv1alpha2.JobSetFailed))
}

// waitingIn tells whether a pod of rank waits in reason.
func waitingIn(rank, reason string) func(*jobsetv1alpha2.JobSet, []corev1.Pod) bool {
	return func(js *jobsetv1alpha2.JobSet, pods []corev1.Pod) bool {
		for _, p := range pods {
			for _, cs := range p.Status.ContainerStatuses {
				if w := cs.State.Waiting; w != nil && w.Reason == reason && p.Labels[batchv1.JobCompletionIndexAnnotation] == rank {
					// Once JobSet counts the Job active and not ready, the TrainJob reads as it will stay.
					rjs := js.Status.ReplicatedJobsStatus
					return len(rjs) > 0 && rjs[0].Active > 0 && rjs[0].Ready == 0
				}
			}
		}
		return false
	}
}

// checkFailure runs `status`, `status -o json` and `logs --failed` of TrainJob name of f and compares them with
// the goldens failures/<name>-*.
func checkFailure(t *testing.T, c *cluster.Cluster, f *fixture, tj *trainer.TrainJob, name string) {
	t.Helper()
	now := tj.CreationTimestamp.Add(10 * time.Minute)
	kube := kubeArgs(c, f.ns)
	normalize := failureNormalizer(f.ns, tj.Name)
	screen := Run(t, "", []plugin.CommandAdder{statusCmd(now, false)}, withArgs(kube, "status", tj.Name)...)
	AssertGolden(t, "failures/"+name+"-status", normalize(golden.ScreenHead(screen.String())))

	res := Run(t, "", []plugin.CommandAdder{statusCmd(now, false)}, withArgs(kube, "status", tj.Name, "-o", "json")...)
	var s status.Summary
	if err := json.Unmarshal([]byte(res.Stdout), &s); err != nil || s.FirstFailure == nil {
		t.Fatalf("status -o json: %v, firstFailure %v:\n%s", err, s.FirstFailure, res)
	}
	if s.FirstFailure.Time == nil || s.FirstFailure.Time.Before(&tj.CreationTimestamp) {
		t.Errorf("firstFailure.time %v, want a time after the creation", s.FirstFailure.Time)
	}
	data, err := json.MarshalIndent(s.FirstFailure, "", "    ")
	if err != nil {
		t.Fatal(err)
	}
	AssertGolden(t, "failures/"+name+"-json", normalize(string(data)+"\n"))

	logs := Run(t, "", []plugin.CommandAdder{logsCmd}, withArgs(kube, "logs", tj.Name, "--failed")...)
	AssertGolden(t, "failures/"+name+"-logs", normalize(logs.String()))
}

// failureNormalizer hides what differs from run to run: the namespace, the pods' random suffixes and nodes, UIDs,
// every time and every offset from the creation (when a simulated pod runs depends on the machine's load).
func failureNormalizer(ns, name string) func(string) string {
	// A pod's name may be followed by "_" (the kubelet's pod=NAME_NAMESPACE(UID)), a word character.
	podRe := regexp.MustCompile(`\b(` + regexp.QuoteMeta(name) + `-node-\d+-\d+)-[a-z0-9]{5}([^a-z0-9]|$)`)
	return func(s string) string {
		s = strings.ReplaceAll(s, ns, "<ns>")
		s = podRe.ReplaceAllString(s, "${1}-<hash>${2}")
		s = gpuNodeRe.ReplaceAllString(s, "gpu-node-<n>")
		s = uidRe.ReplaceAllString(s, "<uid>")
		s = rfc3339Re.ReplaceAllString(s, "<time>")
		s = clockRe.ReplaceAllString(s, "<time>")
		return offsetRe.ReplaceAllString(s, "+<since>")
	}
}

// offsetRe is an offset from the creation as the screen shows it (printers.Delta): +5s, +1m12s, +2h.
var offsetRe = regexp.MustCompile(`\+\d+[smhdy][0-9smhdy]*\b`)

// testFailureOOMKilled: rank 1 of two is OOM-killed (exit code 137); the Job gives up at once (backoffLimit 0),
// and the JobSet restarts once (failurePolicy.maxRestarts 1, no rule: RestartJobSet), then fails when rank 1
// is OOM-killed again.
func testFailureOOMKilled(t *testing.T, c *cluster.Cluster) {
	f := fixtureOn(t, c)
	tj := failingTrainJob{name: "oom", numNodes: 2, restart: corev1.RestartPolicyNever, backoff: 0,
		fp:  &jobsetv1alpha2.FailurePolicy{MaxRestarts: 1},
		env: map[string]string{cluster.EnvRunSeconds: "2", cluster.EnvExitCode: "137", cluster.EnvExitReason: "OOMKilled", cluster.EnvIndexes: "1"},
		logs: map[string][]string{
			"0": {"[rank 0] loading checkpoint shard 1/4", "[rank 0] epoch 1 step 100 loss 2.31"},
			"1": {"[rank 1] loading checkpoint shard 2/4", "[rank 1] epoch 1 step 100 loss 2.30", "[rank 1] allocating 38.2 GiB for activations"},
		},
	}.create(t, c, f)
	syncFromJobSet(t, f, tj, "the JobSet Failed after one restart", jobSetFailed)
	checkFailure(t, c, f, tj, "oom")
}

// testFailureCrashLoop: the one rank exits 1 under restartPolicy OnFailure and waits in CrashLoopBackOff; its
// Job has retries left (backoffLimit 6) and the JobSet no failurePolicy. The previous instance's log is the
// simulation's default.
func testFailureCrashLoop(t *testing.T, c *cluster.Cluster) {
	f := fixtureOn(t, c)
	tj := failingTrainJob{name: "crash-loop", numNodes: 1, restart: corev1.RestartPolicyOnFailure, backoff: 6,
		env: map[string]string{cluster.EnvRunSeconds: "1", cluster.EnvExitCode: "1", cluster.EnvBackoffSeconds: "3600"},
	}.create(t, c, f)
	syncFromJobSet(t, f, tj, "rank 0 in CrashLoopBackOff", waitingIn("0", "CrashLoopBackOff"))
	checkFailure(t, c, f, tj, "crash-loop")
}

// testFailureImagePull: rank 1 of two cannot pull its image; rank 0 runs.
func testFailureImagePull(t *testing.T, c *cluster.Cluster) {
	f := fixtureOn(t, c)
	tj := failingTrainJob{name: "pull", numNodes: 2, restart: corev1.RestartPolicyOnFailure, backoff: 6,
		env: map[string]string{cluster.EnvRunSeconds: "3600", cluster.EnvImagePullError: "1", cluster.EnvIndexes: "1"},
	}.create(t, c, f)
	syncFromJobSet(t, f, tj, "rank 1 in ImagePullBackOff", waitingIn("1", "ImagePullBackOff"))
	checkFailure(t, c, f, tj, "image-pull")
}

// testFailureEvicted: the one rank is evicted for memory pressure; the Job gives up at once and the JobSet,
// without a failurePolicy, fails with it.
func testFailureEvicted(t *testing.T, c *cluster.Cluster) {
	f := fixtureOn(t, c)
	tj := failingTrainJob{name: "evicted", numNodes: 1, restart: corev1.RestartPolicyNever, backoff: 0,
		env: map[string]string{cluster.EnvRunSeconds: "1", cluster.EnvEvict: "1"},
	}.create(t, c, f)
	syncFromJobSet(t, f, tj, "the JobSet Failed", jobSetFailed)
	checkFailure(t, c, f, tj, "evicted")
}

// testFailureSickGPUs: the one rank exits 1 (backoffLimit 0, no failurePolicy: the JobSet fails) on a node whose
// GPUs are sick, a simulated GPU node of the test's own: NVIDIA's fault quarantine tainted it (NVSentinel's
// nvidia.com/gpu-error, which the rank tolerates, as a pod that was there first would run on) and the DRA
// driver tainted one of its devices in its ResourceSlice. `status` names both in the first failure. A second
// TrainJob that still trains there gets `list -o wide`'s warning.
func testFailureSickGPUs(t *testing.T, c *cluster.Cluster) {
	f := fixtureOn(t, c)
	node := cluster.SimulatedGPUNode("gpu-node-9", 8)
	node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: "nvidia.com/gpu-error", Value: "xid-79", Effect: corev1.TaintEffectNoSchedule})
	if err := f.c.Create(t.Context(), node); err != nil {
		t.Fatal(err)
	}
	slice := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node.Name + "-gpus"},
		Spec: resourcev1.ResourceSliceSpec{
			Driver: "gpu.example.com", Pool: resourcev1.ResourcePool{Name: node.Name, ResourceSliceCount: 1}, NodeName: ptr.To(node.Name),
			Devices: []resourcev1.Device{
				{Name: "gpu-0"},
				{Name: "gpu-1", Taints: []resourcev1.DeviceTaint{{Key: "gpu.example.com/unhealthy", Value: "ecc", Effect: resourcev1.DeviceTaintEffectNoSchedule}}},
			},
		},
	}
	if err := f.c.Create(t.Context(), slice); err != nil {
		t.Fatal(err)
	}
	tj := failingTrainJob{name: "sick-gpus", numNodes: 1, restart: corev1.RestartPolicyNever, backoff: 0, node: node,
		env: map[string]string{cluster.EnvRunSeconds: "1", cluster.EnvExitCode: "1"},
	}.create(t, c, f)
	syncFromJobSet(t, f, tj, "the JobSet Failed", jobSetFailed)
	checkFailure(t, c, f, tj, "sick-gpus")

	running := failingTrainJob{name: "on-sick-gpus", numNodes: 1, restart: corev1.RestartPolicyNever, backoff: 0, node: node,
		env: map[string]string{cluster.EnvRunSeconds: "3600"},
	}.create(t, c, f)
	syncFromJobSet(t, f, running, "the rank running", func(js *jobsetv1alpha2.JobSet, _ []corev1.Pod) bool {
		rjs := js.Status.ReplicatedJobsStatus
		return len(rjs) > 0 && rjs[0].Ready > 0
	})
	res := Run(t, "", []plugin.CommandAdder{listCmd(time.Now())}, withArgs(kubeArgs(c, f.ns), "list", "-o", "wide")...)
	if res.Code != 0 {
		t.Fatal(res)
	}
	AssertGolden(t, "failures/sick-gpus-list-wide-stderr", failureNormalizer(f.ns, running.Name)(res.Stderr))
}
