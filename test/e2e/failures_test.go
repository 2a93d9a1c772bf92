package e2e

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
)

// TestTrainerPodFails: a trainer pod exits with code 3 under restartPolicy Never and backoffLimit 0, its Job
// fails, the JobSet fails by its failure policy, and the TrainJob is Failed with the JobSet's reason;
// `kubectl trainjob logs -f`, started when the TrainJob was created, exits with code 2.
func TestTrainerPodFails(t *testing.T) {
	t.Parallel()
	ns := cluster.NewNamespace(t, suite.client, "e2e-", diagnose)
	apply(t, ns, testdata("torch-fail-fast.yaml"))
	mustKubectlTrainJob(t, "create", "-n", ns, "-f", testdata("fails.yaml"))

	ctx, cancel := context.WithTimeout(t.Context(), runTimeout)
	defer cancel()
	logs, stdout, stderr := command(ctx, "logs", "-n", ns, "fails", "-f")
	if err := logs.Start(); err != nil {
		t.Fatal(err)
	}
	logsDone := make(chan error, 1)
	go func() { logsDone <- logs.Wait() }()

	tj := waitTrainJob(t, ns, "fails", trainer.TrainJobFailed, runTimeout)
	failed := meta.FindStatusCondition(tj.Status.Conditions, trainer.TrainJobFailed)
	var js jobsetv1alpha2.JobSet
	if err := suite.client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "fails"}, &js); err != nil {
		t.Fatal(err)
	}
	jsFailed := meta.FindStatusCondition(js.Status.Conditions, string(jobsetv1alpha2.JobSetFailed))
	switch {
	case jsFailed == nil || jsFailed.Status != metav1.ConditionTrue:
		t.Errorf("JobSet conditions %s, want Failed", conditionsString(js.Status.Conditions))
	case failed.Reason != jsFailed.Reason:
		t.Errorf("TrainJob Failed reason %q, want the JobSet's %q (%s)", failed.Reason, jsFailed.Reason, jsFailed.Message)
	}
	t.Logf("TrainJob Failed: %s: %s", failed.Reason, failed.Message)

	pods, err := jobSetPods(t.Context(), ns, "fails")
	if err != nil {
		t.Fatal(err)
	}
	exited3 := false
	for _, p := range pods {
		for _, cs := range p.Status.ContainerStatuses {
			if term := cs.State.Terminated; term != nil && term.ExitCode == 3 && p.Status.Phase == corev1.PodFailed {
				exited3 = true
			}
		}
	}
	if !exited3 {
		t.Errorf("no trainer pod Failed with exit code 3")
	}

	select {
	case err := <-logsDone:
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 {
			t.Errorf("kubectl trainjob logs -f: %v, want exit code 2\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
		}
	case <-ctx.Done():
		t.Errorf("kubectl trainjob logs -f did not end within %v of the TrainJob's creation\nstdout:\n%s\nstderr:\n%s", runTimeout, stdout, stderr)
	}
}

// tooManyGPUsMessage is what the scheduler says of a pod that asks for more GPUs than any node has, and
// tolerates the GPU nodes' taint: every node lacks GPUs.
func tooManyGPUsMessage(t *testing.T) *regexp.Regexp {
	t.Helper()
	nodes, err := readNodes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return regexp.MustCompile(fmt.Sprintf(`0/%[1]d nodes are available: %[1]d Insufficient nvidia\.com/gpu`, len(nodes)))
}

// TestDoesNotFitStaysPending: 16 GPUs per node fit no node; `kubectl trainjob create` warns so and creates the
// TrainJob all the same, its pods stay Pending, `kubectl trainjob status` says why in the scheduler's words,
// `kubectl trainjob fit` agrees (exit 5), and `kubectl trainjob delete` removes it with every child.
func TestDoesNotFitStaysPending(t *testing.T) {
	t.Parallel()
	ns := cluster.NewNamespace(t, suite.client, "e2e-", diagnose)
	unschedulableMessage := tooManyGPUsMessage(t)
	// create warns before it sends the TrainJob, and sends it all the same: the cluster may grow.
	r := kubectlTrainJob(t, "create", "-n", ns, "-f", testdata("too-big.yaml"))
	if r.code != 0 || !strings.Contains(r.stderr, "warning: TrainJob "+ns+"/too-big fits nowhere") || !strings.Contains(r.stderr, "have only 8 nvidia.com/gpu in all") {
		t.Fatalf("create: want exit 0 and a warning that the TrainJob fits nowhere because no node has 16 GPUs: %v", r)
	}

	cluster.Eventually(t, "the trainer pods Unschedulable", runTimeout, func(ctx context.Context) error {
		pods, err := jobSetPods(ctx, ns, "too-big")
		if err != nil {
			return err
		}
		if len(pods) != 2 {
			return fmt.Errorf("%d pods, want 2", len(pods))
		}
		for _, p := range pods {
			c := podCondition(&p, corev1.PodScheduled)
			if c == nil || c.Status != corev1.ConditionFalse || c.Reason != corev1.PodReasonUnschedulable {
				return fmt.Errorf("pod %s: PodScheduled %+v", p.Name, c)
			}
		}
		return nil
	})
	cluster.Eventually(t, "kubectl trainjob status explains it", cliTimeout, func(ctx context.Context) error {
		cmd, stdout, stderr := command(ctx, "status", "-n", ns, "too-big")
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%w: %s", err, stderr)
		}
		if !unschedulableMessage.Match(stdout.Bytes()) {
			return fmt.Errorf("the output does not match %s:\n%s", unschedulableMessage, stdout)
		}
		t.Logf("kubectl trainjob status too-big:\n%s", stdout)
		return nil
	})
	// Its pods stay Pending, and so does the TrainJob: its trainer Job is active (JobSet counts it so while
	// its pods wait for a node) but not ready, and the reason says why its pods cannot be scheduled.
	s, err := status(t.Context(), ns, "too-big")
	if err != nil {
		t.Fatal(err)
	}
	if s.Stage != "Pending" || !unschedulableMessage.MatchString(s.Reason) {
		t.Errorf("stage %s (%s), want Pending, and a reason matching %s", s.Stage, s.Reason, unschedulableMessage)
	}
	pods, err := jobSetPods(t.Context(), ns, "too-big")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if p.Status.Phase != corev1.PodPending || p.Spec.NodeName != "" {
			t.Errorf("pod %s is %s on %q, want Pending on no node", p.Name, p.Status.Phase, p.Spec.NodeName)
		}
	}

	// fit agrees with the scheduler: nowhere, exit 5.
	if r := kubectlTrainJob(t, "fit", "-n", ns, "too-big"); r.code != 5 || !strings.Contains(r.stdout, "fits nowhere") {
		t.Errorf("fit: want exit 5 and the verdict that it fits nowhere: %v", r)
	}

	tj, err := trainJob(t.Context(), ns, "too-big")
	if err != nil {
		t.Fatal(err)
	}
	mustKubectlTrainJob(t, "delete", "-n", ns, "too-big", "--yes")
	cluster.Eventually(t, "the TrainJob and every child gone", runTimeout, func(ctx context.Context) error {
		return noneLeft(ctx, ns, tj.UID)
	})
}

// noneLeft is nil once the namespace holds no TrainJob, JobSet, Job or pod, and no ConfigMap or Secret
// owned by the TrainJob uid.
func noneLeft(ctx context.Context, ns string, uid types.UID) error {
	lists := map[string]client.ObjectList{
		"TrainJobs": &trainer.TrainJobList{}, "JobSets": &jobsetv1alpha2.JobSetList{},
		"Jobs": &batchv1.JobList{}, "Pods": &corev1.PodList{},
		"ConfigMaps": &corev1.ConfigMapList{}, "Secrets": &corev1.SecretList{},
	}
	var left []error
	for kind, list := range lists {
		if err := suite.client.List(ctx, list, client.InNamespace(ns)); err != nil {
			return err
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return err
		}
		for _, item := range items {
			obj := item.(client.Object)
			owned := false
			for _, ref := range obj.GetOwnerReferences() {
				owned = owned || ref.UID == uid
			}
			if (kind != "ConfigMaps" && kind != "Secrets") || owned {
				left = append(left, fmt.Errorf("%s %s", kind, obj.GetName()))
			}
		}
	}
	return errors.Join(left...)
}

func podCondition(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// TestActiveDeadline: a TrainJob still running when its activeDeadlineSeconds pass is Failed with reason
// DeadlineExceeded.
func TestActiveDeadline(t *testing.T) {
	t.Parallel()
	ns := cluster.NewNamespace(t, suite.client, "e2e-", diagnose)
	begin := time.Now()
	mustKubectlTrainJob(t, "create", "-n", ns, "-f", testdata("deadline.yaml"))
	tj := waitTrainJob(t, ns, "deadline", trainer.TrainJobFailed, runTimeout)
	c := meta.FindStatusCondition(tj.Status.Conditions, trainer.TrainJobFailed)
	if c.Reason != trainer.TrainJobDeadlineExceededReason {
		t.Errorf("Failed reason %q (%s), want %s", c.Reason, c.Message, trainer.TrainJobDeadlineExceededReason)
	}
	if d := c.LastTransitionTime.Sub(tj.CreationTimestamp.Time); d < 5*time.Second {
		t.Errorf("Failed %v after creation, before the deadline of 5s", d)
	}
	t.Logf("Failed/%s %v after `create`", c.Reason, time.Since(begin).Round(100*time.Millisecond))
}

// TestSuspendAndResume: a TrainJob created suspended has a suspended JobSet and no pods; `kubectl trainjob
// resume` runs it to Complete.
func TestSuspendAndResume(t *testing.T) {
	t.Parallel()
	ns := cluster.NewNamespace(t, suite.client, "e2e-", diagnose)
	mustKubectlTrainJob(t, "create", "suspended", "-n", ns, "--runtime", "torch-distributed", "--nodes", "2", "--suspend",
		"--", "torchrun", "/workspace/train.py")
	waitTrainJob(t, ns, "suspended", trainer.TrainJobSuspended, runTimeout)
	cluster.Eventually(t, "a suspended JobSet", runTimeout, func(ctx context.Context) error {
		var js jobsetv1alpha2.JobSet
		if err := suite.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "suspended"}, &js); err != nil {
			return err
		}
		if js.Spec.Suspend == nil || !*js.Spec.Suspend {
			return fmt.Errorf("JobSet suspend %v", js.Spec.Suspend)
		}
		return nil
	})
	s, err := status(t.Context(), ns, "suspended")
	if err != nil {
		t.Fatal(err)
	}
	if s.Stage != "Suspended" {
		t.Errorf("stage %s, want Suspended", s.Stage)
	}
	pods, err := jobSetPods(t.Context(), ns, "suspended")
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 0 {
		t.Errorf("%d pods while suspended, want none", len(pods))
	}

	mustKubectlTrainJob(t, "resume", "-n", ns, "suspended")
	waitTrainJob(t, ns, "suspended", trainer.TrainJobComplete, runTimeout)
	pods, err = jobSetPods(t.Context(), ns, "suspended")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(podsOf(pods, "node")); n != 2 {
		t.Errorf("%d trainer pods ran, want 2", n)
	}
}
