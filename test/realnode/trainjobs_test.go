package realnode_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	"sigs.k8s.io/yaml"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/images/sgd"
)

// torchTrainJob is a TrainJob of nodes nodes on the shipped torch-distributed runtime, running torchtrainer on
// the real node.
func torchTrainJob(ns, name string, nodes int32, env ...corev1.EnvVar) *trainer.TrainJob {
	tj := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{Name: "torch-distributed"},
			Trainer: &trainer.Trainer{
				Image:    ptr.To(trainerImage),
				Command:  []string{"/torchtrainer"},
				NumNodes: ptr.To(nodes),
				Env:      env,
			},
		},
	}
	onRealNode(tj, trainer.Node)
	return tj
}

// onRealNode puts the pods of the replicated jobs jobs of tj on the real node, as a user puts a TrainJob on
// nodes a cluster keeps for some pods: a runtime patch that selects the node's label and tolerates its taint.
func onRealNode(tj *trainer.TrainJob, jobs ...string) {
	spec := &trainer.JobSetSpecPatch{}
	for _, name := range jobs {
		spec.ReplicatedJobs = append(spec.ReplicatedJobs, trainer.ReplicatedJobPatch{Name: name, Template: &trainer.JobTemplatePatch{
			Spec: &trainer.JobSpecPatch{Template: &trainer.PodTemplatePatch{Spec: &trainer.PodSpecPatch{
				NodeSelector: map[string]string{cluster.RealNodeLabel: "true"},
				Tolerations:  []corev1.Toleration{cluster.RealNodeToleration()},
			}}},
		}})
	}
	tj.Spec.RuntimePatches = append(tj.Spec.RuntimePatches, trainer.RuntimePatch{
		Manager:             "realnode.test.trainjob.dev/on-real-node",
		TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{Template: &trainer.JobSetTemplatePatch{Spec: spec}},
	})
}

// notOnRealNode: a TrainJob on a shipped runtime that does not ask for the real node is not scheduled there
// (it would sit in ImagePullBackOff: the real node pulls nothing). This cluster has no other node its pod
// tolerates, so it waits; status and fit name the real node's taint as any other.
func (r *realNodeSuite) notOnRealNode(t *testing.T) {
	ns := r.namespace(t)
	tj := torchTrainJob(ns, "cpu", 1)
	tj.Spec.RuntimePatches = nil
	if err := r.cl.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	r.eventually(t, "the scheduler to refuse the pod of TrainJob "+tj.Name, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := r.cl.List(ctx, &pods, client.InNamespace(ns)); err != nil {
			return false, err
		}
		if len(pods.Items) == 0 {
			return false, fmt.Errorf("no pod yet")
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				t.Fatalf("pod %s of a TrainJob on the shipped runtime was scheduled onto %s", p.Name, p.Spec.NodeName)
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
					return true, nil
				}
			}
		}
		return false, fmt.Errorf("pods not refused yet: %v", pods.Items[0].Status.Conditions)
	})
	taint := cluster.RealNodeTaintKey + "=true:NoSchedule"
	if out := r.cli(t, "status", tj.Name, "-n", ns); !strings.Contains(out, taint) {
		t.Errorf("status does not name the real node's taint %s:\n%s", taint, out)
	}
	if out := r.cliExit(t, 5, "fit", tj.Name, "-n", ns); !strings.Contains(out, cluster.RealNodeName+" is tainted "+taint) {
		t.Errorf("fit does not say that %s is tainted %s:\n%s", cluster.RealNodeName, taint, out)
	}
}

func stepsEnv(steps int) corev1.EnvVar {
	return corev1.EnvVar{Name: "TRAINER_STEPS", Value: strconv.Itoa(steps)}
}

// waitComplete waits until tj is Complete; it fails at once when tj Fails, with the ranks' logs.
func (r *realNodeSuite) waitComplete(t *testing.T, tj *trainer.TrainJob) {
	t.Helper()
	r.eventually(t, "TrainJob "+tj.Name+" Complete", func(ctx context.Context) (bool, error) {
		if err := r.cl.Get(ctx, client.ObjectKeyFromObject(tj), tj); err != nil {
			return false, err
		}
		if c := meta.FindStatusCondition(tj.Status.Conditions, trainer.TrainJobFailed); c != nil && c.Status == metav1.ConditionTrue {
			t.Fatalf("TrainJob %s Failed: %s\n%s", tj.Name, c.Message, r.rankLogs(t, tj.Namespace))
		}
		c := meta.FindStatusCondition(tj.Status.Conditions, trainer.TrainJobComplete)
		return c != nil && c.Status == metav1.ConditionTrue, fmt.Errorf("conditions %v", tj.Status.Conditions)
	})
}

// sameLossesDown checks that every rank's log has steps `step N loss X` lines, the same on every rank, with
// the loss going down; it returns the lines.
func sameLossesDown(t *testing.T, logs map[string]string, ranks, steps int) []string {
	t.Helper()
	if len(logs) != ranks {
		t.Fatalf("logs of %d pods, want %d: %v", len(logs), ranks, logs)
	}
	var want []string
	for pod, log := range logs {
		lines := sgd.StepLines(log)
		if len(lines) != steps {
			t.Errorf("pod %s printed %d steps, want %d:\n%s", pod, len(lines), steps, log)
			continue
		}
		if want == nil {
			want = lines
		} else if diff := cmp.Diff(want, lines); diff != "" {
			t.Errorf("pod %s's losses differ from another rank's (-other +%s):\n%s", pod, pod, diff)
		}
		if first, last := lossOf(t, lines[0]), lossOf(t, lines[len(lines)-1]); !(last < first/10) {
			t.Errorf("pod %s: loss went from %v to %v, want it to fall tenfold", pod, first, last)
		}
	}
	return want
}

// cli runs kubectl-trainjob with args against the cluster and returns its standard output.
func (r *realNodeSuite) cli(t *testing.T, args ...string) string {
	t.Helper()
	return r.cliExit(t, 0, args...)
}

// cliExit is cli of a command that must exit with code.
func (r *realNodeSuite) cliExit(t *testing.T, code int, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), r.binary, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+r.kubeconfig, "NO_COLOR=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != code {
		t.Fatalf("kubectl-trainjob %s: %v, want exit code %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, code, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// prefixed is a line of `logs --rank all`: [pod/container] line.
var prefixed = regexp.MustCompile(`^\[([^/\]]+)/[^\]]+\] (.*)$`)

// cliRankLogs is what `kubectl trainjob logs NAME --rank all` prints, by pod.
func (r *realNodeSuite) cliRankLogs(t *testing.T, ns, name string, extra ...string) map[string]string {
	t.Helper()
	out := r.cli(t, append([]string{"logs", name, "-n", ns, "--rank", "all"}, extra...)...)
	logs := map[string]string{}
	for line := range strings.Lines(out) {
		m := prefixed.FindStringSubmatch(strings.TrimRight(line, "\n"))
		if m == nil {
			t.Fatalf("logs --rank all printed a line without its pod: %q\n%s", line, out)
		}
		logs[m[1]] += m[2] + "\n"
	}
	return logs
}

func (r *realNodeSuite) torchTrainJob(t *testing.T) {
	ns := r.namespace(t)
	const nodes, steps = 3, 8
	tj := torchTrainJob(ns, "sgd", nodes, stepsEnv(steps))
	if err := r.cl.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	r.waitComplete(t, tj)

	// `logs --rank all` shows each rank's real log, as the kubelet serves it.
	shown := r.cliRankLogs(t, ns, tj.Name)
	lines := sameLossesDown(t, shown, nodes, steps)
	if diff := cmp.Diff(r.rankLogs(t, ns), shown); diff != "" {
		t.Errorf("logs --rank all differs from the pods' logs (-pods +shown):\n%s", diff)
	}
	if t.Failed() {
		return
	}

	// Rank 0 reported every step to the status server; the last report is in the TrainJob's status.
	last := strings.Fields(lines[len(lines)-1])[3]
	ts := tj.Status.TrainerStatus
	want := &trainer.TrainerStatus{
		ProgressPercentage:        ptr.To[int32](100),
		EstimatedRemainingSeconds: ptr.To[int32](0),
		Metrics:                   []trainer.Metric{{Name: "step", Value: strconv.Itoa(steps)}, {Name: "loss", Value: last}},
	}
	if ts == nil || ts.LastUpdatedTime.IsZero() {
		t.Fatalf("status.trainerStatus = %+v, want the trainer's last report", ts)
	}
	if diff := cmp.Diff(want, &trainer.TrainerStatus{ProgressPercentage: ts.ProgressPercentage, EstimatedRemainingSeconds: ts.EstimatedRemainingSeconds, Metrics: ts.Metrics}); diff != "" {
		t.Errorf("status.trainerStatus (-want +got):\n%s", diff)
	}
	status := r.cli(t, "status", tj.Name, "-n", ns)
	if wantLine := fmt.Sprintf("Progress:    [####################] 100%%, step=%d loss=%s (reported ", steps, last); !strings.Contains(status, wantLine) {
		t.Errorf("kubectl trainjob status does not show the progress %q:\n%s", wantLine, status)
	}
}

// mpiRuntime is the shipped deepspeed-distributed runtime as a TrainingRuntime of ns whose node containers run
// mpitrainer's worker instead of sshd: the shipped image has sshd and DeepSpeed, which this machine cannot
// pull, and a TrainJob sets only the launcher's image. Everything else — the MPI policy, the hostfile and SSH
// Secret the MPI plugin mounts, the readiness probe at port 2222, the launcher's dependency on Ready nodes —
// is the shipped runtime's.
func mpiRuntime(t *testing.T, ns string) *trainer.TrainingRuntime {
	t.Helper()
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "config/runtimes/deepspeed_distributed.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var shipped trainer.ClusterTrainingRuntime
	if err := yaml.UnmarshalStrict(data, &shipped); err != nil {
		t.Fatal(err)
	}
	rt := &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: shipped.Name, Namespace: ns, Labels: shipped.Labels}, Spec: shipped.Spec}
	found := false
	for i := range rt.Spec.Template.Spec.ReplicatedJobs {
		rj := &rt.Spec.Template.Spec.ReplicatedJobs[i]
		if rj.Name != trainer.Node {
			continue
		}
		c := &rj.Template.Spec.Template.Spec.Containers[0]
		c.Image, c.Command, c.Args = mpiTrainerImage, []string{"/mpitrainer"}, []string{"worker"}
		found = true
	}
	if !found {
		t.Fatalf("no replicated job %q in the shipped deepspeed-distributed runtime", trainer.Node)
	}
	return rt
}

func (r *realNodeSuite) mpiTrainJob(t *testing.T) {
	ns := r.namespace(t)
	rt := mpiRuntime(t, ns)
	if err := r.cl.Create(t.Context(), rt); err != nil {
		t.Fatal(err)
	}
	const nodes, steps = 3, 8
	tj := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: "mpi", Namespace: ns},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{APIGroup: ptr.To(trainer.GroupVersion.Group), Kind: ptr.To(trainer.TrainingRuntimeKind), Name: rt.Name},
			Trainer: &trainer.Trainer{
				Image:    ptr.To(mpiTrainerImage),
				Command:  []string{"/mpitrainer"},
				NumNodes: ptr.To[int32](nodes),
				Env:      []corev1.EnvVar{stepsEnv(steps)},
			},
		},
	}
	onRealNode(tj, trainer.Launcher, trainer.Node)
	// The JobSet completes with the launcher and then deletes the nodes' pods, as it would stop sshd: their
	// logs are followed while they run.
	followed := r.followLogs(t, ns)
	if err := r.cl.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	r.waitComplete(t, tj)
	logs := followed()
	sameLossesDown(t, logs, nodes, steps)
	// The launcher reached the hosts by the names of the hostfile the MPI plugin wrote.
	var hostfile corev1.ConfigMap
	if err := r.cl.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: tj.Name + "-mpi-hostfile"}, &hostfile); err != nil {
		t.Fatal(err)
	}
	var hosts []string
	for line := range strings.Lines(hostfile.Data["hostfile"]) {
		hosts = append(hosts, strings.Fields(line)[0])
	}
	reached := "reached " + strings.Join(hosts, ", ")
	launchers := 0
	for pod, log := range logs {
		if strings.Contains(log, "launcher, rank ") {
			launchers++
			if !strings.Contains(log, reached) {
				t.Errorf("launcher %s did not say %q:\n%s", pod, reached, log)
			}
		}
	}
	if launchers != 1 {
		t.Errorf("%d launchers among the pods, want 1: %v", launchers, logs)
	}
}

// killedRank deletes the pod of rank 1 while the ranks train, as `kubectl delete pod` does. What happens is
// JobSet's and the Job controller's documented behaviour with the shipped torch-distributed runtime, which
// sets no JobSet failurePolicy and leaves the Job's backoffLimit at its default (docs/real-node.md): the Job
// replaces the deleted pod (same completion index), the ranks that lose it exit non-zero and the kubelet
// restarts them in place (restartPolicy OnFailure), well under the backoffLimit, so no Job fails, the JobSet is
// neither restarted nor Failed, and the TrainJob — never Failed — ends Complete once the ranks have trained
// again from the start.
func (r *realNodeSuite) killedRank(t *testing.T) {
	ns := r.namespace(t)
	const nodes, steps = 3, 60
	tj := torchTrainJob(ns, "killed", nodes, stepsEnv(steps), corev1.EnvVar{Name: "TRAINER_STEP_PACE", Value: "250ms"})
	if err := r.cl.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	byRank := func(ctx context.Context) (map[string]corev1.Pod, error) {
		var pods corev1.PodList
		if err := r.cl.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: tj.Name}); err != nil {
			return nil, err
		}
		m := map[string]corev1.Pod{}
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				m[p.Annotations[batchv1.JobCompletionIndexAnnotation]] = p
			}
		}
		return m, nil
	}
	var before map[string]corev1.Pod
	r.eventually(t, "every rank past its second step", func(ctx context.Context) (bool, error) {
		var err error
		if before, err = byRank(ctx); err != nil || len(before) != nodes {
			return false, fmt.Errorf("pods by rank %v: %v", before, err)
		}
		for rank, p := range before {
			log, err := r.c.Clientset().CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
			if err != nil || len(sgd.StepLines(string(log))) < 2 {
				return false, fmt.Errorf("rank %s: %v\n%s", rank, err, log)
			}
		}
		return true, nil
	})
	victim := before["1"]
	if err := r.cl.Delete(t.Context(), &victim); err != nil {
		t.Fatal(err)
	}
	t.Logf("deleted pod %s (rank 1) while it trained", victim.Name)

	// The ranks that lost rank 1 exit 1 and are restarted in place. Their previous container's log is read
	// while the new one trains: the kubelet removes a finished pod's dead containers.
	for _, rank := range []string{"0", "2"} {
		var previous []byte
		r.eventually(t, "rank "+rank+" restarted after exit code 1", func(ctx context.Context) (bool, error) {
			var p corev1.Pod
			if err := r.cl.Get(ctx, client.ObjectKeyFromObject(ptr.To(before[rank])), &p); err != nil {
				return false, err
			}
			for _, cs := range p.Status.ContainerStatuses {
				if cs.Name != trainer.Node || cs.RestartCount < 1 {
					continue
				}
				if last := cs.LastTerminationState.Terminated; last == nil || last.ExitCode != 1 {
					t.Fatalf("rank %s's container restarted after %+v, want exit code 1", rank, last)
				}
				var err error
				previous, err = r.c.Clientset().CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: trainer.Node, Previous: true}).DoRaw(ctx)
				return err == nil, err
			}
			return false, fmt.Errorf("pod %s not restarted: %+v", p.Name, p.Status.ContainerStatuses)
		})
		if want := "torchtrainer: rank " + rank + ": step "; !strings.Contains(string(previous), want) {
			t.Errorf("rank %s's previous container does not say it lost a rank mid-step (%q):\n%s", rank, want, previous)
		}
	}
	r.waitComplete(t, tj)

	after, err := byRank(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := after["1"]; !ok || p.UID == victim.UID {
		t.Errorf("rank 1 was not replaced by a new pod: %v", after)
	}
	for _, rank := range []string{"0", "2"} {
		if p, ok := after[rank]; !ok || p.UID != before[rank].UID {
			t.Errorf("rank %s's pod was replaced; want it restarted in place", rank)
		}
	}
	var js jobsetv1alpha2.JobSet
	if err := r.cl.Get(t.Context(), client.ObjectKeyFromObject(tj), &js); err != nil {
		t.Fatal(err)
	}
	if js.Status.Restarts != 0 {
		t.Errorf("the JobSet restarted %d times, want 0: a Job that has not failed restarts nothing", js.Status.Restarts)
	}
	// Every rank's last run trained from the start to the end, together.
	sameLossesDown(t, r.rankLogs(t, ns), nodes, steps)
}

// followLogs follows the log of every pod of ns from when it runs, until the pod's container ends, and returns
// what waits for every log to end and returns them by pod name: a pod may be gone by then.
func (r *realNodeSuite) followLogs(t *testing.T, ns string) func() map[string]string {
	t.Helper()
	var (
		mu   sync.Mutex
		logs = map[string]*bytes.Buffer{}
		wg   sync.WaitGroup
	)
	ctx, stop := context.WithCancel(t.Context())
	pods := r.c.Clientset().CoreV1().Pods(ns)
	wg.Go(func() {
		_ = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			list, err := pods.List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, nil
			}
			for _, p := range list.Items {
				mu.Lock()
				_, seen := logs[p.Name]
				mu.Unlock()
				if seen || p.Status.Phase == corev1.PodPending {
					continue
				}
				stream, err := pods.GetLogs(p.Name, &corev1.PodLogOptions{Follow: true}).Stream(t.Context())
				if err != nil {
					continue // tried again at the next poll
				}
				buf := &bytes.Buffer{}
				mu.Lock()
				logs[p.Name] = buf
				mu.Unlock()
				wg.Go(func() {
					defer stream.Close()
					data, _ := io.ReadAll(stream)
					mu.Lock()
					buf.Write(data)
					mu.Unlock()
				})
			}
			return false, nil
		})
	})
	return func() map[string]string {
		stop()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(waitTimeout):
			t.Fatalf("the pods' logs of %s did not end within %v", ns, waitTimeout)
		}
		mu.Lock()
		defer mu.Unlock()
		out := map[string]string{}
		for pod, buf := range logs {
			out[pod] = buf.String()
		}
		return out
	}
}
