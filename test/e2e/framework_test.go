package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	"sigs.k8s.io/yaml"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/stack"
)

// Deadlines. The machine running the tests may be busy; a TrainJob of the simulated cluster completes in a
// few seconds when it is not.
const (
	// runTimeout bounds how long a TrainJob may take to reach the condition a test waits for.
	runTimeout = 3 * time.Minute
	// cliTimeout bounds one command of the CLI that is expected to return by itself.
	cliTimeout = 2 * time.Minute
	pollEvery  = 200 * time.Millisecond
)

// gpus serialises the tests that run pods with GPUs: each one then has the 4 GPU nodes to itself, so that
// where its pods land is decided by its own requests only.
var gpus sync.Mutex

// useGPUs holds the GPU nodes until the test ends.
func useGPUs(t *testing.T) {
	t.Helper()
	gpus.Lock()
	t.Cleanup(gpus.Unlock)
}

// nodeLabels keeps the tests that read the nodes from seeing a label that another test puts on a node for its
// own pods (reference example 02 selects node-type=training): labelNode holds it for writing until its test has
// removed the label again, readNodes for reading.
var nodeLabels sync.RWMutex

// labelNode sets a label on a node of the shared cluster until the test ends.
func labelNode(t *testing.T, node, key, value string) {
	t.Helper()
	nodeLabels.Lock()
	t.Cleanup(nodeLabels.Unlock)
	patchLabel := func(ctx context.Context, value any) error {
		data, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{key: value}}})
		if err != nil {
			return err
		}
		return suite.client.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, client.RawPatch(types.MergePatchType, data))
	}
	if err := patchLabel(t.Context(), value); err != nil {
		t.Fatal(err)
	}
	// Registered after the unlock, so it runs before it: no reader sees the label.
	t.Cleanup(func() {
		if err := patchLabel(context.Background(), nil); err != nil {
			t.Errorf("remove label %s from node %s: %v", key, node, err)
		}
	})
}

// readNodes lists the nodes of the cluster, as no other test has labelled them.
func readNodes(ctx context.Context) ([]corev1.Node, error) {
	nodeLabels.RLock()
	defer nodeLabels.RUnlock()
	var nodes corev1.NodeList
	err := suite.client.List(ctx, &nodes)
	return nodes.Items, err
}

// testdata is the path of a file of testdata/.
func testdata(name string) string { return filepath.Join("testdata", name) }

// example is the path of a checked-in copy of the reference examples.
func example(name string) string {
	return filepath.Join(suite.repo, "plugin", "render", "testdata", "examples", name)
}

// apply applies the objects of a YAML file to ns, as `kubectl apply --server-side -n ns -f path` does.
func apply(t *testing.T, ns, path string) {
	t.Helper()
	if err := stack.ApplyFile(t.Context(), suite.client, path, ns); err != nil {
		t.Fatal(err)
	}
}

// cliResult is what a command of the CLI did.
type cliResult struct {
	args           []string
	stdout, stderr string
	code           int
}

func (r cliResult) String() string {
	return fmt.Sprintf("kubectl trainjob %s: exit code %d\nstdout:\n%s\nstderr:\n%s", strings.Join(r.args, " "), r.code, r.stdout, r.stderr)
}

// command is `kubectl trainjob ARGS…` as the administrator, run from the real binary.
func command(ctx context.Context, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	cmd := exec.CommandContext(ctx, suite.binary, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+suite.kubeconfig, "NO_COLOR=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	return cmd, &stdout, &stderr
}

// kubectlTrainJob runs `kubectl trainjob ARGS…` to its end and returns what it did; it fails the test only if
// the command cannot run or does not end within cliTimeout.
func kubectlTrainJob(t *testing.T, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), cliTimeout)
	defer cancel()
	cmd, stdout, stderr := command(ctx, args...)
	err := cmd.Run()
	r := cliResult{args: args, stdout: stdout.String(), stderr: stderr.String(), code: cmd.ProcessState.ExitCode()}
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("did not end within %v: %v", cliTimeout, r)
	case err != nil && !errors.As(err, &exit):
		t.Fatalf("kubectl trainjob %s: %v", strings.Join(args, " "), err)
	}
	return r
}

// mustKubectlTrainJob is kubectlTrainJob for a command that must succeed; it returns its standard output.
func mustKubectlTrainJob(t *testing.T, args ...string) string {
	t.Helper()
	r := kubectlTrainJob(t, args...)
	if r.code != 0 {
		t.Fatal(r)
	}
	return r.stdout
}

// trainJob reads a TrainJob.
func trainJob(ctx context.Context, ns, name string) (*trainer.TrainJob, error) {
	tj := &trainer.TrainJob{}
	return tj, suite.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, tj)
}

// waitTrainJob waits until the TrainJob's condition is True, and returns it. It gives up at once when the
// TrainJob reaches another terminal condition.
func waitTrainJob(t *testing.T, ns, name, condition string, timeout time.Duration) *trainer.TrainJob {
	t.Helper()
	var tj *trainer.TrainJob
	cluster.Eventually(t, fmt.Sprintf("TrainJob %s/%s %s", ns, name, condition), timeout, func(ctx context.Context) error {
		var err error
		if tj, err = trainJob(ctx, ns, name); err != nil {
			return err
		}
		if meta.IsStatusConditionTrue(tj.Status.Conditions, condition) {
			return nil
		}
		for _, terminal := range []string{trainer.TrainJobComplete, trainer.TrainJobFailed} {
			if c := meta.FindStatusCondition(tj.Status.Conditions, terminal); terminal != condition && c != nil && c.Status == metav1.ConditionTrue {
				return fmt.Errorf("%w: it is %s (%s: %s)", cluster.ErrCannotHappen, terminal, c.Reason, c.Message)
			}
		}
		return fmt.Errorf("conditions: %s", conditionsString(tj.Status.Conditions))
	})
	return tj
}

func conditionsString(conds []metav1.Condition) string {
	var parts []string
	for _, c := range conds {
		parts = append(parts, fmt.Sprintf("%s=%s (%s)", c.Type, c.Status, c.Reason))
	}
	if parts == nil {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// runToCompletion creates the TrainJob of a testdata file with `kubectl trainjob create -f`, waits until it
// is Complete and returns the pods of its JobSet.
func runToCompletion(t *testing.T, ns, file, name string) []corev1.Pod {
	t.Helper()
	mustKubectlTrainJob(t, "create", "-n", ns, "-f", testdata(file))
	waitTrainJob(t, ns, name, trainer.TrainJobComplete, runTimeout)
	pods, err := jobSetPods(t.Context(), ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return pods
}

// jobSetPods lists the pods of a TrainJob's JobSet.
func jobSetPods(ctx context.Context, ns, name string) ([]corev1.Pod, error) {
	var pods corev1.PodList
	err := suite.client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: name})
	return pods.Items, err
}

// podsOf keeps the pods of one replicated job, ordered by name.
func podsOf(pods []corev1.Pod, replicatedJob string) []corev1.Pod {
	var out []corev1.Pod
	for _, p := range pods {
		if p.Labels[jobsetv1alpha2.ReplicatedJobNameKey] == replicatedJob {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// container finds a container of a pod.
func container(t *testing.T, p *corev1.Pod, name string) *corev1.Container {
	t.Helper()
	for i := range p.Spec.Containers {
		if p.Spec.Containers[i].Name == name {
			return &p.Spec.Containers[i]
		}
	}
	t.Fatalf("pod %s has no container %q", p.Name, name)
	return nil
}

// diagnose prints what a failed test needs to find the cause: the namespace's TrainJobs (and what `kubectl
// trainjob status` says of them), JobSets, Jobs, pods and events, and the tail of every component's log and
// of the operator's.
func diagnose(t testing.TB, ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var b strings.Builder
	section := func(title string) { fmt.Fprintf(&b, "\n===== %s =====\n", title) }
	dumpYAML := func(obj client.Object) {
		obj.SetManagedFields(nil)
		data, err := yaml.Marshal(obj)
		if err != nil {
			fmt.Fprintf(&b, "%v\n", err)
		}
		fmt.Fprintf(&b, "---\n%s", data)
	}
	c := suite.client

	section("TrainJobs of " + ns)
	var tjs trainer.TrainJobList
	if err := c.List(ctx, &tjs, client.InNamespace(ns)); err != nil {
		fmt.Fprintln(&b, err)
	}
	for i := range tjs.Items {
		dumpYAML(&tjs.Items[i])
	}
	for _, tj := range tjs.Items {
		section("kubectl trainjob status " + tj.Name)
		cmd, stdout, stderr := command(ctx, "status", "-n", ns, tj.Name)
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(&b, "%v: %s\n", err, stderr)
		}
		b.Write(stdout.Bytes())
	}
	section("JobSets of " + ns)
	var jss jobsetv1alpha2.JobSetList
	if err := c.List(ctx, &jss, client.InNamespace(ns)); err != nil {
		fmt.Fprintln(&b, err)
	}
	for i := range jss.Items {
		dumpYAML(&jss.Items[i])
	}
	section("Jobs of " + ns)
	var jobs batchv1.JobList
	if err := c.List(ctx, &jobs, client.InNamespace(ns)); err != nil {
		fmt.Fprintln(&b, err)
	}
	for _, j := range jobs.Items {
		fmt.Fprintf(&b, "%s: active=%d ready=%d succeeded=%d failed=%d suspend=%v conditions: %s\n", j.Name, j.Status.Active,
			ptr.Deref(j.Status.Ready, 0), j.Status.Succeeded, j.Status.Failed, ptr.Deref(j.Spec.Suspend, false), jobConditions(j.Status.Conditions))
	}
	section("Pods of " + ns)
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		fmt.Fprintln(&b, err)
	}
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "--- %s: phase=%s node=%q\n", p.Name, p.Status.Phase, p.Spec.NodeName)
		data, _ := yaml.Marshal(map[string]any{"conditions": p.Status.Conditions, "containerStatuses": p.Status.ContainerStatuses})
		b.Write(data)
	}
	section("Events of " + ns)
	var events corev1.EventList
	if err := c.List(ctx, &events, client.InNamespace(ns)); err != nil {
		fmt.Fprintln(&b, err)
	}
	slices.SortStableFunc(events.Items, func(a, b corev1.Event) int { return eventTime(a).Compare(eventTime(b)) })
	for _, e := range events.Items {
		fmt.Fprintf(&b, "%s %-7s %s/%s %s: %s\n", eventTime(e).Format("15:04:05.000"), e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
	}
	section("component logs")
	suite.cluster.DumpLogs(&b, 40)
	section("operator log: " + suite.stack.Operator.LogPath)
	data, err := os.ReadFile(suite.stack.Operator.LogPath)
	if err != nil {
		fmt.Fprintln(&b, err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	b.WriteString(strings.Join(lines[max(0, len(lines)-80):], "\n") + "\n")
	t.Log(b.String())
}

func eventTime(e corev1.Event) time.Time {
	switch {
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	}
	return e.CreationTimestamp.Time
}

func jobConditions(conds []batchv1.JobCondition) string {
	var parts []string
	for _, c := range conds {
		parts = append(parts, fmt.Sprintf("%s=%s (%s)", c.Type, c.Status, c.Reason))
	}
	return strings.Join(parts, ", ")
}
