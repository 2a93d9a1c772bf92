package portforward

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil/cmdutiltest"
)

// run runs `kubectl trainjob port-forward ARGS…` with kubectl's test factory, which has no API server: what is
// checked is what the command refuses before it asks one.
func run(t *testing.T, args ...string) (string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := plugin.NewRootCommand(cmdutiltest.NewFactory(t, "team-a"), cmdutil.Streams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, NewCmdPortForward)
	root.SetArgs(append([]string{"port-forward"}, args...))
	code := cmdutil.CheckErr(&errOut, root.ExecuteContext(t.Context()))
	return out.String() + errOut.String(), code
}

// TestRefused: bad arguments are refused with what is wrong and how to write it, exit 1.
func TestRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no port", []string{"llama"}, "error: give a TrainJob NAME and at least one [LOCAL_PORT:]REMOTE_PORT\nSee 'kubectl trainjob port-forward -h' for help and examples\n"},
		{"negative rank", []string{"llama", "6006", "--rank=-1"}, "error: invalid --rank -1: use a completion index (0, 1, …)\n"},
		{"two colons", []string{"llama", "1:2:3"}, `error: invalid port "1:2:3": more than one ':'; write it as REMOTE, LOCAL:REMOTE or :REMOTE, e.g. 6006 or 16006:6006` + "\n"},
		{"no remote", []string{"llama", "6006:"}, `error: invalid port "6006:": no remote port; write it as REMOTE, LOCAL:REMOTE or :REMOTE, e.g. 6006 or 16006:6006` + "\n"},
		{"local too big", []string{"llama", "70000:6006"}, `error: invalid port "70000:6006": the local port "70000" is not a number from 0 to 65535; write it as REMOTE, LOCAL:REMOTE or :REMOTE, e.g. 6006 or 16006:6006` + "\n"},
		{"remote 0", []string{"llama", "0"}, `error: invalid port "0": the remote port is 0; write it as REMOTE, LOCAL:REMOTE or :REMOTE, e.g. 6006 or 16006:6006` + "\n"},
		{"bad name", []string{"llama", "tensor_board"}, `error: invalid port "tensor_board": the remote port "tensor_board" is neither a number from 1 to 65535 nor the name of a container port; write it as REMOTE, LOCAL:REMOTE or :REMOTE, e.g. 6006 or 16006:6006` + "\n"},
		{"timeout 0", []string{"llama", "6006", "--pod-running-timeout", "0s"}, "error: --pod-running-timeout must be higher than zero\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, code := run(t, tc.args...)
			if got != tc.want || code != cmdutil.ExitError {
				t.Errorf("port-forward %s printed %q, exit %d; want %q, exit 1", strings.Join(tc.args, " "), got, code, tc.want)
			}
		})
	}
}

// TestRemotePorts: the ports as client-go takes them, a named container port as its number.
func TestRemotePorts(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "llama-node-0-0-abcde"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: "node", Ports: []corev1.ContainerPort{{Name: "tensorboard", ContainerPort: 6006}},
	}}}}
	got, err := remotePorts([]string{"8080", ":9000", "16006:tensorboard", "tensorboard"}, pod)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"8080:8080", ":9000", "16006:6006", "6006:6006"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if _, err := remotePorts([]string{"debugger"}, pod); err == nil || !strings.Contains(err.Error(), "does not have a named port 'debugger'") {
		t.Errorf("error = %v, want that the pod has no port debugger", err)
	}
}

// TestPodOfRank: of the trainer's pods, the one that runs with the rank and is not being deleted, the one
// that replaced the others.
func TestPodOfRank(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "llama", UID: "tj"}}
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "llama", UID: "js",
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(tj, trainer.GroupVersion.WithKind(trainer.TrainJobKind))}}}
	job := batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "llama-node-0", UID: "job",
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(js, jobsetv1alpha2.GroupVersion.WithKind("JobSet"))}}}
	pod := func(name string, rank, attempt int, created time.Duration, phase corev1.PodPhase, deleting bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
			Name: name, UID: types.UID(name), CreationTimestamp: metav1.NewTime(base.Add(created)),
			Labels:          map[string]string{batchv1.JobCompletionIndexAnnotation: strconv.Itoa(rank), cmdutil.RestartAttemptLabel: strconv.Itoa(attempt)},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(&job, batchv1.SchemeGroupVersion.WithKind("Job"))},
		}, Status: corev1.PodStatus{Phase: phase}}
		if deleting {
			p.DeletionTimestamp = &metav1.Time{Time: base}
		}
		return p
	}
	for _, tc := range []struct {
		name string
		pods []*corev1.Pod
		want string
	}{
		{"none yet", nil, ""},
		{"the rank's", []*corev1.Pod{pod("r1", 1, 0, 0, corev1.PodRunning, false), pod("r0", 0, 0, 0, corev1.PodRunning, false)}, "r0"},
		{"not yet running", []*corev1.Pod{pod("r0", 0, 0, 0, corev1.PodPending, false)}, ""},
		{"being deleted, its replacement pending", []*corev1.Pod{pod("old", 0, 0, 0, corev1.PodRunning, true), pod("new", 0, 0, time.Minute, corev1.PodPending, false)}, ""},
		{"replaced by its Job", []*corev1.Pod{pod("old", 0, 0, 0, corev1.PodFailed, false), pod("new", 0, 0, time.Minute, corev1.PodRunning, false)}, "new"},
		{"a later restart of the JobSet", []*corev1.Pod{pod("later", 0, 1, 0, corev1.PodRunning, false), pod("earlier", 0, 0, time.Minute, corev1.PodRunning, false)}, "later"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &follower{o: &PortForwardOptions{Name: "llama", Rank: 0}, tj: tj, perJob: 2, pods: map[types.UID]*corev1.Pod{},
				lineage: cmdutil.NewLineage(tj, js, []batchv1.Job{job}, nil, nil)}
			for _, p := range tc.pods {
				f.pods[p.UID] = p
			}
			got, err := f.pod(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			name := ""
			if got != nil {
				name = got.Name
			}
			if name != tc.want {
				t.Errorf("pod = %q, want %q", name, tc.want)
			}
		})
	}
}
