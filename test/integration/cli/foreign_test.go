package cli

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/portforward"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
)

// testForeignPods (TestStatus/ForeignPods): pods that carry a TrainJob's labels but are not its — one that
// nothing owns, one of someone else's Job that carries the labels too, and the pods of a user's JobSet of the
// TrainJob's name, which the TrainJob does not control — are never shown, counted, forwarded to or taken for
// its first failure (issue 36): status (also for a user who may not read Jobs), logs --failed, port-forward and
// delete's prompt. Reading and following their logs needs a kubelet: TestLogs has pods that nothing owns.
func testForeignPods(t *testing.T, c *cluster.Cluster) {
	f := fixtureOn(t, c)
	kube := kubeArgs(c, f.ns)
	alice := withArgs(kube, "--as", "alice")
	grantNamespaceUser(t, f.c, "alice", f.ns)
	tj := trainingTrainJob(f, "llama")
	cmds := []plugin.CommandAdder{statusCmd(tj.CreationTimestamp.Add(10*time.Minute), false), logsCmd, portforward.NewCmdPortForward, deleteCmd(true)}

	// What the commands say before the foreign pods come is what they must say after.
	same := map[string][]string{
		"status":          withArgs(kube, "status", "llama"),
		"status as alice": withArgs(alice, "status", "llama"),
		"delete's prompt": withArgs(kube, "delete", "llama"),
	}
	before := map[string]string{}
	for what, args := range same {
		before[what] = Run(t, "n\n", cmds, args...).String()
	}
	foreignPods(f, tj)
	for what, args := range same {
		if diff := cmp.Diff(before[what], Run(t, "n\n", cmds, args...).String()); diff != "" {
			t.Errorf("%s changed when pods that are not the TrainJob's came (-before +after):\n%s", what, diff)
		}
	}

	// bert's JobSet is a user's JobSet of its name, which bert does not control: its Job and pod, the JobSet's
	// by every controller reference, are not bert's.
	bert := f.trainJob("bert", 1, false)
	f.create(&jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: bert.Name}, Spec: jobsetv1alpha2.JobSetSpec{ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{
		{Name: trainer.Node, Replicas: 1, Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: podTemplate(trainer.Node)}}}}}})
	f.job(bert, trainer.Node, 1, jobTimes{start: 5 * time.Second, end: -1})
	f.pod(bert, podState{rj: trainer.Node, node: "gpu-node-3", gpus: 8, phase: corev1.PodRunning, started: 6 * time.Second})

	for what, args := range map[string][]string{
		"logs --failed":      withArgs(kube, "logs", "llama", "--failed"),
		"port-forward":       withArgs(kube, "port-forward", "llama", "6006"),
		"status of bert":     withArgs(kube, "status", "bert"),
		"logs of bert":       withArgs(kube, "logs", "bert"),
		"delete bert's":      withArgs(kube, "delete", "bert"),
		"port-forward bert":  withArgs(kube, "port-forward", "bert", "6006", "--pod-running-timeout", "1s"),
		"status of bert, -o": withArgs(kube, "status", "bert", "-o", "json"),
	} {
		res := Run(t, "n\n", cmds, args...).String()
		assertNoForeignPod(t, what, res)
		if strings.HasPrefix(what, "delete") && podCount.MatchString(res) {
			t.Errorf("%s prompt counts pods that are not the TrainJob's:\n%s", what, res)
		}
	}
}

// podCount is how delete's prompt counts pods: "2 pods".
var podCount = regexp.MustCompile(`\b\d+ pods?\b`)

// foreignPods creates, next to tj's pods, two pods with the labels of its trainer's: rank 0, running, that
// nothing owns, named so that it would replace the real one by every rule of cmdutil.NewerPod; and rank 1, OOMKilled before any other failure, of Job <tj>-intruder, which carries the
// JobSet's labels but is not the JobSet's.
func foreignPods(f *fixture, tj *trainer.TrainJob) {
	f.t.Helper()
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: tj.Name + "-intruder", Labels: map[string]string{
		jobsetv1alpha2.JobSetNameKey: tj.Name, jobsetv1alpha2.ReplicatedJobNameKey: trainer.Node, jobsetv1alpha2.JobIndexKey: "0"}},
		Spec: batchv1.JobSpec{BackoffLimit: ptr.To[int32](0), Template: podTemplate(trainer.Node)}}
	f.create(job)
	f.podNamed(tj, tj.Name+"-node-0-0-x99-stray", nil, podState{rj: trainer.Node, rank: 0, node: "gpu-node-3", gpus: 8,
		phase: corev1.PodRunning, started: 9 * time.Minute})
	f.podNamed(tj, tj.Name+"-intruder-0", f.controller(&batchv1.Job{}, job.Name), podState{rj: trainer.Node, rank: 1, node: "gpu-node-3",
		gpus: 8, phase: corev1.PodFailed, started: 10 * time.Second, finished: 20 * time.Second, exitCode: 137, exitReason: "OOMKilled"})
}

// assertNoForeignPod fails when a command's output names a pod that is not the TrainJob's: those foreignPods
// made, and bert's, of a JobSet bert does not control.
func assertNoForeignPod(t *testing.T, what, out string) {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "-stray") || strings.Contains(line, "-intruder") || strings.Contains(line, "bert-node-") {
			t.Errorf("%s names a pod that is not the TrainJob's: %s", what, line)
		}
	}
}
