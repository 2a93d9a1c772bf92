package cli

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/logs"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
)

// TestLogs reads the logs of TrainJobs whose pods run on the local cluster's simulated GPU nodes: the JobSet
// is made as the operator (or upstream's controller) makes it, the JobSet and Job controllers make the pods,
// KWOK runs them and serves what the test writes to their logs. Following, a container restarts and a pod is
// replaced mid-stream: no line may be lost or repeated; the follow ends with exit 2 when the TrainJob Failed.
func TestLogs(t *testing.T) {
	c := cluster.StartForTest(t, cluster.Options{Profile: cluster.ProfileFull})
	cl := adminClient(t, c)
	f := &fixture{t: t, c: cl, ns: "logs"}
	if err := cl.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}}); err != nil {
		t.Fatal(err)
	}
	kube := kubeArgs(c, f.ns)
	cmd := []plugin.CommandAdder{logsCmd}
	w := &podLogs{t: t, c: c, cl: cl, ns: f.ns}
	go w.releasePods(t.Context())

	// llama: a dataset initializer, then two trainer nodes.
	llama := f.trainJob("llama", 2, true)
	simJobSet(f, llama, 20*time.Second)

	// Two followers from before the first pod: the pipeline (initializer, then rank 0), and rank 1.
	rank0 := Start(t, "", cmd, withArgs(kube, "logs", "llama", "-f")...)
	rank1 := Start(t, "", cmd, withArgs(kube, "logs", "llama", "-f", "--rank", "1")...)

	init := w.running("llama", trainer.DatasetInitializerName, 0)
	w.write(init, credentialsContainer, "credentials for hf://tatsu-lab/alpaca fetched")
	w.write(init, trainer.DatasetInitializerName, "downloading hf://tatsu-lab/alpaca", "dataset ready: 52002 rows")
	rank0.WaitForOutput(t, "dataset ready")
	rank1.WaitForOutput(t, "dataset ready")

	// The initializer completes by itself (its run time ends); then the JobSet starts the trainer.
	node0, node1 := w.running("llama", trainer.Node, 0), w.running("llama", trainer.Node, 1)
	w.write(node0, trainer.Node, "epoch 1 loss 2.31", "epoch 2 loss 1.87")
	w.write(node1, trainer.Node, "rank 1 epoch 1", "rank 1 epoch 2")
	rank0.WaitForOutput(t, "epoch 2 loss 1.87")
	rank1.WaitForOutput(t, "rank 1 epoch 2")
	// A pod with the labels of rank 0 that nothing owns comes while they follow: it is not llama's, and no
	// command reads it (TestStatus/ForeignPods).
	w.stray(llama, 0, "a stray pod's line")

	// Rank 0's container restarts right after a line was written: that line comes from the run that ended,
	// the next ones from the new run, each once.
	w.write(node0, trainer.Node, "epoch 3 loss 1.52")
	if err := c.RestartContainer(t.Context(), f.ns, node0.Name, trainer.Node, 137); err != nil {
		t.Fatal(err)
	}
	w.write(node0, trainer.Node, "resuming from checkpoint epoch 3", "epoch 4 loss 1.31")
	rank0.WaitForOutput(t, "epoch 4 loss 1.31")

	// Rank 1's pod is deleted: the Job replaces it and the follower attaches to the new pod.
	w.write(node1, trainer.Node, "rank 1 epoch 3")
	rank1.WaitForOutput(t, "rank 1 epoch 3")
	if err := cl.Delete(t.Context(), node1); err != nil {
		t.Fatal(err)
	}
	replacement := w.runningReplacement("llama", trainer.Node, 1, node1.UID)
	w.write(replacement, trainer.Node, "rank 1 replaced pod, epoch 3 again")
	rank1.WaitForOutput(t, "epoch 3 again")

	// The TrainJob fails: both followers read what is left and end with exit code 2.
	w.write(node0, trainer.Node, "last words of rank 0")
	llama.Status.Conditions = []metav1.Condition{condition(trainer.TrainJobFailed, "BackoffLimitExceeded", "jobset failed: job llama-node-0 has failed", metav1.ConditionTrue, at(llama, 5*time.Minute))}
	f.updateStatus(llama)
	normalize := normalizeLogs(f.ns)
	AssertGolden(t, "logs/follow-pipeline", normalize(rank0.Wait(t).String()))
	AssertGolden(t, "logs/follow-rank-1-replaced-pod", normalize(rank1.Wait(t).String()))

	// bert: one trainer node, Complete.
	bert := f.trainJob("bert", 1, false)
	simJobSet(f, bert, 0)
	bert0 := w.running("bert", trainer.Node, 0)
	w.write(bert0, trainer.Node, "fine-tuning bert", "done")
	w.stray(bert, 0, "a stray pod's line")
	bert.Status.Conditions = []metav1.Condition{condition(trainer.TrainJobComplete, "JobSetCompleted", "jobset completed", metav1.ConditionTrue, at(bert, time.Minute))}
	f.updateStatus(bert)

	// A team member with read rights on TrainJobs, JobSets, pods and their logs in the namespace only.
	grantNamespaceUser(t, cl, "alice", f.ns)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"rank-0", []string{"logs", "llama"}},
		{"namespace-user", []string{"logs", "llama", "--rank", "all", "--as", "alice"}},
		{"namespace-user-follow", []string{"logs", "bert", "-f", "--as", "alice"}},
		{"every-rank", []string{"logs", "llama", "--rank", "all"}},
		{"rank-1-no-prefix", []string{"logs", "llama", "--rank", "1", "--prefix=false"}},
		{"initializer", []string{"logs", "llama", "--stage", "dataset-initializer"}},
		{"tail", []string{"logs", "llama", "--rank", "all", "--tail", "1"}},
		{"timestamps", []string{"logs", "llama", "--timestamps"}},
		{"since", []string{"logs", "llama", "--since", "1h"}},
		{"node", []string{"logs", "llama", "--node", replacement.Spec.NodeName}},
		{"follow-failed", []string{"logs", "llama", "-f"}},
		{"follow-complete", []string{"logs", "bert", "-f"}},
		{"too-many-streams", []string{"logs", "llama", "-f", "--rank", "all", "--max-log-requests", "2"}},
		{"one-request-at-a-time", []string{"logs", "llama", "--rank", "all", "--all-containers", "--max-log-requests", "1"}},
		{"previous", []string{"logs", "llama", "--previous"}},
		{"previous-not-restarted", []string{"logs", "llama", "--rank", "1", "--previous"}},
		{"failed", []string{"logs", "llama", "--failed"}},
		{"failed-tail", []string{"logs", "llama", "--failed", "--tail", "1", "--prefix"}},
		{"no-failure", []string{"logs", "bert", "--failed"}},
		{"grep", []string{"logs", "llama", "--rank", "all", "--grep", `epoch \d`}},
		{"grep-invert", []string{"logs", "llama", "--grep", "^epoch", "--invert"}},
		{"since-time", []string{"logs", "llama", "--since-time", "2000-01-01T00:00:00Z"}},
		{"since-time-future", []string{"logs", "llama", "--since-time", "2999-01-01T00:00:00Z"}},
		{"all-containers", []string{"logs", "llama", "--stage", "dataset-initializer", "--all-containers"}},
		{"color", []string{"logs", "llama", "--rank", "all", "--color=always"}},
		{"no-such-trainjob", []string{"logs", "gpt"}},
		{"no-such-stage", []string{"logs", "llama", "--stage", "launcher"}},
		{"bad-stage", []string{"logs", "llama", "--stage", "training"}},
		{"rank-out-of-range", []string{"logs", "llama", "--rank", "2"}},
		{"bad-rank", []string{"logs", "llama", "--rank", "first"}},
		{"no-such-container", []string{"logs", "llama", "-c", "sidecar"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			AssertGolden(t, "logs/"+tc.name, normalize(Run(t, "", cmd, withArgs(kube, tc.args...)...).String()))
		})
	}
}

// credentialsContainer is the init container of the dataset initializer's pods.
const credentialsContainer = "fetch-credentials"

// logsCmd is `logs` re-opening ended streams quickly.
func logsCmd(f cmdutil.Factory, s cmdutil.Streams) *cobra.Command {
	o := logs.NewLogsOptions(s)
	o.RetryInterval = 200 * time.Millisecond
	return logs.NewCmdLogsWithOptions(f, o)
}

// normalizeLogs hides what changes from run to run in logs output: the pods' random suffixes and nodes, the
// timestamps of log lines and the namespace; and shows colours' escapes as <ESC>.
func normalizeLogs(ns string) func(string) string {
	n := Normalizer{Replace: map[string]string{ns: "<ns>"}}
	return func(s string) string {
		s = podSuffixRe.ReplaceAllString(s, "${1}-<hash>")
		s = logTimeRe.ReplaceAllString(s, "<timestamp> ")
		s = gpuNodeRe.ReplaceAllString(s, "gpu-node-<n>")
		s = strings.ReplaceAll(s, "\x1b", "<ESC>")
		return n.Normalize(s)
	}
}

var (
	// gpuNodeRe is a GPU node of the local cluster: which one the scheduler picks differs from run to run.
	gpuNodeRe   = regexp.MustCompile(`\bgpu-node-\d+\b`)
	podSuffixRe = regexp.MustCompile(`\b((?:llama|bert)-[a-z-]+-\d+-\d+)-[a-z0-9]{5}\b`)
	logTimeRe   = regexp.MustCompile(`\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z `)
)

// simJobSet creates the TrainJob's JobSet as the operator builds it from a torch runtime with a dataset
// initializer (when the TrainJob has one), with pods that KWOK runs: the initializer for initRun, then the
// trainer nodes (8 GPUs each, one per GPU node) for an hour.
func simJobSet(f *fixture, tj *trainer.TrainJob, initRun time.Duration) {
	f.t.Helper()
	nodes := ptr.Deref(tj.Spec.Trainer.NumNodes, 1)
	gpus := corev1.ResourceList{cluster.GPUResource: resource.MustParse("8")}
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: tj.Name, OwnerReferences: []metav1.OwnerReference{owner(tj)}}}
	trainerJob := jobsetv1alpha2.ReplicatedJob{Name: trainer.Node, Replicas: 1, Template: batchv1.JobTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{trainer.AncestorLabel: trainer.AncestorTrainer}},
		Spec: batchv1.JobSpec{
			Parallelism: ptr.To(nodes), Completions: ptr.To(nodes), CompletionMode: ptr.To(batchv1.IndexedCompletion),
			BackoffLimit: ptr.To[int32](3),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy:   corev1.RestartPolicyNever,
				SchedulingGates: []corev1.PodSchedulingGate{{Name: logsGate}},
				Tolerations:     []corev1.Toleration{cluster.GPUToleration()},
				Containers: []corev1.Container{{Name: trainer.Node, Image: ptr.Deref(tj.Spec.Trainer.Image, "busybox"),
					Env:       []corev1.EnvVar{{Name: cluster.EnvRunSeconds, Value: "3600"}},
					Resources: corev1.ResourceRequirements{Requests: gpus, Limits: gpus}}},
			}},
		},
	}}
	if tj.Spec.Initializer != nil {
		js.Spec.ReplicatedJobs = append(js.Spec.ReplicatedJobs, jobsetv1alpha2.ReplicatedJob{Name: trainer.DatasetInitializerName, Replicas: 1, Template: batchv1.JobTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{trainer.AncestorLabel: trainer.AncestorDatasetInitializer}},
			Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy:   corev1.RestartPolicyNever,
				SchedulingGates: []corev1.PodSchedulingGate{{Name: logsGate}},
				InitContainers:  []corev1.Container{{Name: credentialsContainer, Image: "busybox"}},
				Containers: []corev1.Container{{Name: trainer.DatasetInitializerName, Image: "ghcr.io/kubeflow/trainer/dataset-initializer",
					Env:       []corev1.EnvVar{{Name: trainer.StorageURIEnv, Value: "hf://tatsu-lab/alpaca"}, {Name: cluster.EnvRunSeconds, Value: strconv.Itoa(int(initRun.Seconds()))}},
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}},
			}}},
		}})
		trainerJob.DependsOn = []jobsetv1alpha2.DependsOn{{Name: trainer.DatasetInitializerName, Status: jobsetv1alpha2.DependencyComplete}}
	}
	js.Spec.ReplicatedJobs = append(js.Spec.ReplicatedJobs, trainerJob)
	f.create(js)
}

// logsGate holds every pod of the test until its log files are set up: KWOK serves a pod without a Logs
// object of its own from a shared default file, and a stream opened on that file would stay on it.
const logsGate = "trainjob.test/logs"

// releasePods sets up the log files of every gated pod, then lets the scheduler have it, until ctx ends.
func (w *podLogs) releasePods(ctx context.Context) {
	for ctx.Err() == nil {
		var pods corev1.PodList
		if err := w.cl.List(ctx, &pods, client.InNamespace(w.ns)); err == nil {
			for i := range pods.Items {
				p := &pods.Items[i]
				if len(p.Spec.SchedulingGates) == 0 {
					continue
				}
				if err := w.c.WritePodLog(ctx, w.ns, p.Name, p.Spec.Containers[0].Name); err != nil {
					continue
				}
				p.Spec.SchedulingGates = nil
				_ = w.cl.Update(ctx, p) // on a conflict, the next round tries again
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// podLogs finds simulated pods and writes their logs.
type podLogs struct {
	t  *testing.T
	c  *cluster.Cluster
	cl client.Client
	ns string
}

// running waits for the running pod of a replicated job's rank.
func (w *podLogs) running(jobSet, rj string, rank int) *corev1.Pod {
	return w.runningReplacement(jobSet, rj, rank, "")
}

// runningReplacement waits for a running pod of a rank other than the pod with UID old.
func (w *podLogs) runningReplacement(jobSet, rj string, rank int, old types.UID) *corev1.Pod {
	w.t.Helper()
	var found *corev1.Pod
	cluster.Eventually(w.t, fmt.Sprintf("pod %s rank %d of %s running", rj, rank, jobSet), waitTimeout, cluster.Holds(func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := w.cl.List(ctx, &pods, client.InNamespace(w.ns), client.MatchingLabels{
			jobsetv1alpha2.JobSetNameKey: jobSet, jobsetv1alpha2.ReplicatedJobNameKey: rj,
			batchv1.JobCompletionIndexAnnotation: strconv.Itoa(rank)}); err != nil {
			return false, err
		}
		for i, p := range pods.Items {
			if p.UID != old && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
				found = &pods.Items[i]
				return true, nil
			}
		}
		return false, nil
	}))
	return found
}

// stray creates a pod with the labels of tj's trainer pod of rank that nothing owns, running on a CPU node,
// and writes lines to its log once it runs.
func (w *podLogs) stray(tj *trainer.TrainJob, rank int, lines ...string) {
	w.t.Helper()
	job := tj.Name + "-" + trainer.Node + "-0"
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d-stray", job, rank), Namespace: w.ns, Labels: map[string]string{
			jobsetv1alpha2.JobSetNameKey: tj.Name, jobsetv1alpha2.ReplicatedJobNameKey: trainer.Node, jobsetv1alpha2.JobIndexKey: "0",
			batchv1.JobCompletionIndexAnnotation: strconv.Itoa(rank), batchv1.JobNameLabel: job}},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, SchedulingGates: []corev1.PodSchedulingGate{{Name: logsGate}},
			Containers: []corev1.Container{{Name: trainer.Node, Image: "busybox", Env: []corev1.EnvVar{{Name: cluster.EnvRunSeconds, Value: "3600"}}}}},
	}
	if err := w.cl.Create(w.t.Context(), p); err != nil {
		w.t.Fatal(err)
	}
	cluster.Eventually(w.t, "pod "+p.Name+" running", waitTimeout, cluster.Holds(func(ctx context.Context) (bool, error) {
		err := w.cl.Get(ctx, client.ObjectKeyFromObject(p), p)
		return err == nil && p.Status.Phase == corev1.PodRunning, err
	}))
	w.write(p, trainer.Node, lines...)
}

func (w *podLogs) write(pod *corev1.Pod, container string, lines ...string) {
	w.t.Helper()
	if err := w.c.WritePodLog(w.t.Context(), w.ns, pod.Name, container, lines...); err != nil {
		w.t.Fatal(err)
	}
}

// waitTimeout bounds the waits of these tests for the cluster (cluster.Eventually).
const waitTimeout = 2 * time.Minute
