package cli

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/portforward"
)

// TestPortForward: what port-forward says, and its exit code, when there is no pod to forward to — a
// TrainJob that does not exist, a rank it does not have, a pod that does not come, a TrainJob that ended. The
// api profile's pods have no kubelet to forward to: forwarding, and following a replaced pod, are tested on
// the real node (test/realnode, TestRealNode).
func TestPortForward(t *testing.T) {
	c, f := newFixture(t)
	kube := kubeArgs(c, f.ns)
	cmd := []plugin.CommandAdder{portforward.NewCmdPortForward}

	two := f.trainJob("two", 1, false)
	f.jobSet(two, trainer.Node)
	f.job(two, trainer.Node, 1, jobTimes{start: 5 * time.Second, end: -1})
	f.pod(two, podState{rj: trainer.Node, rank: 0, node: "gpu-node-0", phase: corev1.PodPending, waiting: "ContainerCreating"})
	f.trainJob("pending", 1, false)
	done := f.trainJob("done", 1, false)
	f.jobSet(done, trainer.Node)
	f.job(done, trainer.Node, 1, jobTimes{start: 5 * time.Second, end: time.Minute})
	f.pod(done, podState{rj: trainer.Node, rank: 0, node: "gpu-node-0", phase: corev1.PodSucceeded, started: 5 * time.Second, finished: time.Minute})
	done.Status.Conditions = []metav1.Condition{condition(trainer.TrainJobComplete, "JobSetCompleted", "jobset completed", metav1.ConditionTrue, at(done, time.Minute))}
	f.updateStatus(done)
	oom := f.trainJob("oom", 1, false)
	f.jobSet(oom, trainer.Node)
	f.job(oom, trainer.Node, 1, jobTimes{start: 5 * time.Second, end: time.Minute, failed: true})
	f.pod(oom, podState{rj: trainer.Node, rank: 0, node: "gpu-node-0", phase: corev1.PodFailed, started: 5 * time.Second, finished: time.Minute})
	oom.Status.Conditions = []metav1.Condition{condition(trainer.TrainJobFailed, "FailedJobs", "jobset failed due to one or more job failures", metav1.ConditionTrue, at(oom, time.Minute))}
	f.updateStatus(oom)

	n := Normalizer{Replace: map[string]string{f.ns: "<ns>"}}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"not-found", []string{"port-forward", "nope", "6006"}},
		{"rank-out-of-range", []string{"port-forward", "two", "6006", "--rank", "5"}},
		{"no-running-pod", []string{"port-forward", "pending", "6006", "--pod-running-timeout", "1s"}},
		{"complete", []string{"port-forward", "done", "6006"}},
		{"failed", []string{"port-forward", "oom", "6006"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			AssertGolden(t, "portforward/"+tc.name, n.Normalize(Run(t, "", cmd, withArgs(kube, tc.args...)...).String()))
		})
	}
}
