package cluster_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/images"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/images/sgd"
)

const (
	trainerImage = "trainjob.local/torchtrainer:test"
	probeImage   = "trainjob.local/netprobe:test"
)

// TestRealNode runs real containers on the real node: a pod's program runs and its logs come back through the
// API server, a pod reaches the API server through the `kubernetes` Service by its DNS name, two pods
// rendezvous at a headless Service name and train together, and stopping the cluster leaves nothing behind.
func TestRealNode(t *testing.T) {
	cluster.RequireRealNode(t)
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	trainer, err := images.Program(t.Context(), root, "./test/images/torchtrainer", trainerImage, dir)
	if err != nil {
		t.Fatal(err)
	}
	probe, err := images.Program(t.Context(), root, "./test/images/netprobe", probeImage, dir)
	if err != nil {
		t.Fatal(err)
	}
	c := cluster.StartForTest(t, cluster.Options{
		Profile: cluster.ProfileFull, CRDDirs: testCRDDirs(t), GPUNodes: -1, CPUNodes: -1,
		RealNode: true, RealNodeImages: []string{trainer, probe},
	})
	s := &suite{c: c, cl: newClient(t, c)}

	t.Run("a pod runs for real and serves its logs", s.realPodLogs)
	t.Run("a pod reaches the API server through the kubernetes Service by name", s.realPodReachesAPIServer)
	t.Run("two pods train together at a headless Service name", s.realPodsTrainTogether)

	t.Run("stop leaves no namespace, link, mount or process behind", func(t *testing.T) {
		netns, link := c.RealNodeNetwork()
		if err := c.Stop(); err != nil {
			t.Fatal(err)
		}
		var left []string
		if slices.Contains(namesIn(t, "ip", "netns", "list"), netns) {
			left = append(left, "network namespace "+netns)
		}
		if slices.Contains(namesIn(t, "ip", "-br", "link"), link) {
			left = append(left, "link "+link)
		}
		mounts, err := os.ReadFile("/proc/self/mountinfo")
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(mounts), c.Dir) {
			left = append(left, "mounts under "+c.Dir)
		}
		if out, _ := exec.Command("pgrep", "-f", c.Dir).Output(); len(strings.TrimSpace(string(out))) > 0 {
			left = append(left, "processes "+strings.Join(strings.Fields(string(out)), ","))
		}
		if _, err := os.Stat(c.Dir); !os.IsNotExist(err) {
			left = append(left, "the folder "+c.Dir)
		}
		if len(left) > 0 {
			t.Errorf("left behind after Stop: %s", strings.Join(left, "; "))
		}
	})
}

// namesIn returns the first field of each line `cmd` prints (without an @peer suffix).
func namesIn(t *testing.T, cmd ...string) []string {
	t.Helper()
	out, err := exec.Command(cmd[0], cmd[1:]...).Output()
	if err != nil {
		t.Fatalf("%s: %v", strings.Join(cmd, " "), err)
	}
	var names []string
	for l := range strings.Lines(string(out)) {
		if f := strings.Fields(l); len(f) > 0 {
			names = append(names, strings.Split(f[0], "@")[0])
		}
	}
	return names
}

// realPod is a pod pinned to the real node (it selects it and tolerates its taint) that runs image with args
// once.
func realPod(ns, name, image string, args []string, env ...corev1.EnvVar) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			NodeSelector:  map[string]string{cluster.RealNodeLabel: "true"},
			Tolerations:   []corev1.Toleration{cluster.RealNodeToleration()},
			Containers: []corev1.Container{{
				Name: "main", Image: image, Args: args, Env: env,
				ImagePullPolicy: corev1.PullNever,
				SecurityContext: &corev1.SecurityContext{
					RunAsNonRoot: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
				},
			}},
		},
	}
}

// runToSuccess creates pods and waits until all have Succeeded, failing at once if one fails.
func (s *suite) runToSuccess(t *testing.T, pods ...*corev1.Pod) {
	t.Helper()
	for _, pod := range pods {
		if err := s.cl.Create(t.Context(), pod); err != nil {
			t.Fatal(err)
		}
	}
	for _, pod := range pods {
		cluster.Eventually(t, fmt.Sprintf("pod %s Succeeded", pod.Name), waitTimeout, cluster.Holds(func(ctx context.Context) (bool, error) {
			if err := s.cl.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
				return false, err
			}
			if pod.Status.Phase == corev1.PodFailed {
				return false, fmt.Errorf("pod %s Failed: %s", pod.Name, s.podLog(t, pod))
			}
			return pod.Status.Phase == corev1.PodSucceeded, nil
		}))
		if pod.Spec.NodeName != cluster.RealNodeName {
			t.Errorf("pod %s ran on %s, want %s", pod.Name, pod.Spec.NodeName, cluster.RealNodeName)
		}
	}
}

// podLog is the log of the pod's container, read through the API server (which asks the kubelet).
func (s *suite) podLog(t *testing.T, pod *corev1.Pod) string {
	t.Helper()
	data, err := s.c.Clientset().CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(t.Context())
	if err != nil {
		t.Fatalf("logs of %s: %v", pod.Name, err)
	}
	return string(data)
}

// realNamespace is a namespace whose pods may start: its default ServiceAccount exists (the ServiceAccount
// admission, on with the real node, rejects pods until it does).
func (s *suite) realNamespace(t *testing.T) string {
	t.Helper()
	ns := s.namespace(t)
	cluster.Eventually(t, "ServiceAccount default in "+ns, waitTimeout, cluster.Holds(func(ctx context.Context) (bool, error) {
		err := s.cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "default"}, &corev1.ServiceAccount{})
		return err == nil, nil
	}))
	return ns
}

func (s *suite) realPodLogs(t *testing.T) {
	ns := s.realNamespace(t)
	pod := realPod(ns, "solo", trainerImage, nil,
		corev1.EnvVar{Name: "PET_NNODES", Value: "1"}, corev1.EnvVar{Name: "PET_NODE_RANK", Value: "0"},
		corev1.EnvVar{Name: "PET_NPROC_PER_NODE", Value: "1"}, corev1.EnvVar{Name: "PET_MASTER_ADDR", Value: "localhost"},
		corev1.EnvVar{Name: "PET_MASTER_PORT", Value: "29500"}, corev1.EnvVar{Name: "TRAINER_STEPS", Value: "3"})
	s.runToSuccess(t, pod)
	log := s.podLog(t, pod)
	for _, want := range []string{"rank 0 of 1: joined", "step 3 loss", "rank 0 done"} {
		if !strings.Contains(log, want) {
			t.Errorf("log of the pod lacks %q:\n%s", want, log)
		}
	}
	if pod.Status.PodIP == "" || !strings.HasPrefix(pod.Status.PodIP, "10.250.") {
		t.Errorf("pod IP %q, want one of the real node's pod range 10.250.n.0/24", pod.Status.PodIP)
	}
}

func (s *suite) realPodReachesAPIServer(t *testing.T) {
	ns := s.realNamespace(t)
	pod := realPod(ns, "probe", probeImage, []string{"kubernetes.default.svc." + cluster.ClusterDomain + ":443", "kubernetes.default:443"})
	s.runToSuccess(t, pod)
	log := s.podLog(t, pod)
	if strings.Count(log, "reached ") != 2 {
		t.Errorf("probe log:\n%s\nwant both names reached", log)
	}
}

func (s *suite) realPodsTrainTogether(t *testing.T) {
	ns := s.realNamespace(t)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "ranks", Namespace: ns},
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone, PublishNotReadyAddresses: true,
			Selector: map[string]string{"job": "train"},
		},
	}
	if err := s.cl.Create(t.Context(), svc); err != nil {
		t.Fatal(err)
	}
	var pods []*corev1.Pod
	for rank := range 2 {
		pod := realPod(ns, fmt.Sprintf("train-%d", rank), trainerImage, nil,
			corev1.EnvVar{Name: "PET_NNODES", Value: "2"}, corev1.EnvVar{Name: "PET_NODE_RANK", Value: fmt.Sprint(rank)},
			corev1.EnvVar{Name: "PET_NPROC_PER_NODE", Value: "1"},
			// The name a JobSet gives rank 0: <hostname>.<subdomain>, completed by the search path.
			corev1.EnvVar{Name: "PET_MASTER_ADDR", Value: "train-0.ranks"},
			corev1.EnvVar{Name: "PET_MASTER_PORT", Value: "29500"}, corev1.EnvVar{Name: "TRAINER_STEPS", Value: "5"},
			corev1.EnvVar{Name: "TRAINER_TIMEOUT", Value: (90 * time.Second).String()})
		pod.Labels = map[string]string{"job": "train"}
		pod.Spec.Hostname, pod.Spec.Subdomain = pod.Name, svc.Name
		pods = append(pods, pod)
	}
	s.runToSuccess(t, pods...)
	var steps []string
	for _, pod := range pods {
		log := s.podLog(t, pod)
		mine := sgd.StepLines(log)
		if len(mine) != 5 {
			t.Fatalf("pod %s printed %d steps, want 5:\n%s", pod.Name, len(mine), log)
		}
		if steps == nil {
			steps = mine
		} else if strings.Join(steps, "\n") != strings.Join(mine, "\n") {
			t.Errorf("the ranks' losses differ:\n%s\n---\n%s", strings.Join(steps, "\n"), strings.Join(mine, "\n"))
		}
	}
}
