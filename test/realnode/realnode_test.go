// Package realnode_test runs the product on the local cluster's real node: the operator as its Deployment's
// pods from the image `make image` builds, and TrainJobs whose trainers really train on CPU.
package realnode_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/images"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/images/torchtrainer/sgd"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/stack"
)

const (
	operatorImage = "trainjob.local/kubectl-trainjob:realnode-test"
	trainerImage  = "trainjob.local/torchtrainer:realnode-test"
	// waitTimeout bounds every wait on the real node, where pods start in seconds.
	waitTimeout = 3 * time.Minute
)

func TestMain(m *testing.M) {
	// The clients controller-runtime makes log through it; the cluster's logs are what a failure shows.
	log.SetLogger(logr.Discard())
	os.Exit(m.Run())
}

func TestRealNode(t *testing.T) {
	cluster.RequireRealNode(t)
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	binary, err := stack.Binary(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	operatorArchive := filepath.Join(dir, "operator.tar")
	if err := images.WriteArchive(images.Operator(binary, operatorImage, "realnode-test", "realnode-test"), operatorArchive); err != nil {
		t.Fatal(err)
	}
	trainerArchive, err := images.Program(t.Context(), root, "./test/images/torchtrainer", trainerImage, dir)
	if err != nil {
		t.Fatal(err)
	}
	// No simulated CPU nodes: the operator and the trainers, which ask for no GPU, must land on the real node.
	c := cluster.StartForTest(t, cluster.Options{
		Profile: cluster.ProfileFull, GPUNodes: 1, CPUNodes: -1,
		RealNode: true, RealNodeImages: []string{operatorArchive, trainerArchive},
	})
	begin := time.Now()
	s, err := stack.UpAsDeployment(t.Context(), c, operatorImage, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Down(); err != nil {
			t.Error(err)
		}
	})
	t.Logf("operator Deployment rolled out in %v", time.Since(begin).Round(time.Millisecond))
	r := &realNodeSuite{c: c, cl: s.Client}

	t.Run("the operator runs as its Deployment's pods on the real node", r.operatorPods)
	t.Run("a 3-node torch TrainJob trains for real to Complete", r.torchTrainJob)
}

type realNodeSuite struct {
	c  *cluster.Cluster
	cl client.Client
}

func (r *realNodeSuite) eventually(t *testing.T, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		last = err
		return ok, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v (last: %v)", what, err, last)
	}
}

func (r *realNodeSuite) operatorPods(t *testing.T) {
	var pods corev1.PodList
	if err := r.cl.List(t.Context(), &pods, client.InNamespace("kubectl-trainjob-system"), client.MatchingLabels{"app.kubernetes.io/component": "operator"}); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) == 0 {
		t.Fatal("no operator pods")
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName != cluster.RealNodeName {
			t.Errorf("operator pod %s on %s, want %s", p.Name, p.Spec.NodeName, cluster.RealNodeName)
		}
		if got := p.Spec.Containers[0].Image; got != operatorImage {
			t.Errorf("operator pod %s runs %s, want %s", p.Name, got, operatorImage)
		}
		for _, cs := range p.Status.ContainerStatuses {
			if !cs.Ready || cs.State.Running == nil || !strings.HasPrefix(cs.ContainerID, "containerd://") {
				t.Errorf("operator container %s/%s: ready=%v state=%+v id=%s, want a Ready containerd container", p.Name, cs.Name, cs.Ready, cs.State, cs.ContainerID)
			}
		}
	}
}

func (r *realNodeSuite) namespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "realnode-"}}
	if err := r.cl.Create(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	// The ServiceAccount admission rejects pods until the namespace's default ServiceAccount exists.
	r.eventually(t, "ServiceAccount default in "+ns.Name, func(ctx context.Context) (bool, error) {
		err := r.cl.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "default"}, &corev1.ServiceAccount{})
		return err == nil, err
	})
	return ns.Name
}

func (r *realNodeSuite) torchTrainJob(t *testing.T) {
	ns := r.namespace(t)
	const nodes, steps = 3, 8
	tj := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: "sgd", Namespace: ns},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{Name: "torch-distributed"},
			Trainer: &trainer.Trainer{
				Image:    ptr.To(trainerImage),
				Command:  []string{"/torchtrainer"},
				NumNodes: ptr.To[int32](nodes),
				Env:      []corev1.EnvVar{{Name: "TRAINER_STEPS", Value: strconv.Itoa(steps)}},
			},
		},
	}
	if err := r.cl.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	r.eventually(t, "TrainJob Complete", func(ctx context.Context) (bool, error) {
		if err := r.cl.Get(ctx, client.ObjectKeyFromObject(tj), tj); err != nil {
			return false, err
		}
		if c := meta.FindStatusCondition(tj.Status.Conditions, trainer.TrainJobFailed); c != nil && c.Status == metav1.ConditionTrue {
			t.Fatalf("TrainJob Failed: %s\n%s", c.Message, r.rankLogs(t, ns))
		}
		c := meta.FindStatusCondition(tj.Status.Conditions, trainer.TrainJobComplete)
		return c != nil && c.Status == metav1.ConditionTrue, fmt.Errorf("conditions %v", tj.Status.Conditions)
	})
	logs := r.rankLogs(t, ns)
	if len(logs) != nodes {
		t.Fatalf("%d trainer pods, want %d", len(logs), nodes)
	}
	var want string
	for pod, log := range logs {
		steps := sgd.StepLines(log)
		if len(steps) != 8 {
			t.Errorf("pod %s printed %d steps, want 8:\n%s", pod, len(steps), log)
			continue
		}
		if want == "" {
			want = strings.Join(steps, "\n")
		} else if got := strings.Join(steps, "\n"); got != want {
			t.Errorf("pod %s's losses differ from another rank's:\n%s\n---\n%s", pod, got, want)
		}
		if first, last := lossOf(t, steps[0]), lossOf(t, steps[len(steps)-1]); !(last < first) {
			t.Errorf("pod %s: loss went from %v to %v, want it down", pod, first, last)
		}
	}
}

// rankLogs returns the log of every trainer pod in ns, by pod name.
func (r *realNodeSuite) rankLogs(t *testing.T, ns string) map[string]string {
	t.Helper()
	var pods corev1.PodList
	if err := r.cl.List(t.Context(), &pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	logs := map[string]string{}
	for _, p := range pods.Items {
		data, err := r.c.Clientset().CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(t.Context())
		if err != nil {
			logs[p.Name] = fmt.Sprintf("(no log: %v)", err)
			continue
		}
		logs[p.Name] = string(data)
	}
	return logs
}

func lossOf(t *testing.T, line string) float64 {
	t.Helper()
	v, err := sgd.Loss(line)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
