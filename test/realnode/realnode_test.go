// Package realnode_test runs the product on the local cluster's real node: the operator as its Deployment's
// pods from the image `make image` builds, and TrainJobs whose trainers really train on CPU.
package realnode_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/config"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/images"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/images/sgd"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/stack"
)

const (
	operatorImage   = "trainjob.local/kubectl-trainjob:realnode-test"
	upgradeImage    = "trainjob.local/kubectl-trainjob:realnode-upgrade"
	trainerImage    = "trainjob.local/torchtrainer:realnode-test"
	mpiTrainerImage = "trainjob.local/mpitrainer:realnode-test"
	// operatorNamespace is config/default's.
	operatorNamespace = "kubectl-trainjob-system"
	// waitTimeout bounds every wait on the real node, where pods start in seconds.
	waitTimeout = 3 * time.Minute
)

func TestMain(m *testing.M) {
	// The clients controller-runtime makes log through it; the cluster's logs are what a failure shows.
	log.SetLogger(logr.Discard())
	os.Exit(m.Run())
}

// prepare is how every test of the real node begins: it is skipped where the machine cannot run the real
// node, and gets the repository's root, a folder of its own and the kubectl-trainjob binary.
func prepare(t *testing.T) (root, dir, binary string) {
	t.Helper()
	cluster.RequireRealNode(t)
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	if binary, err = stack.Binary(t.Context(), dir); err != nil {
		t.Fatal(err)
	}
	return root, dir, binary
}

func TestRealNode(t *testing.T) {
	root, dir, binary := prepare(t)
	var archives []string
	// The same operator under two tags: `install --image` rolls the Deployment from one to the other.
	for i, ref := range []string{operatorImage, upgradeImage} {
		archive := filepath.Join(dir, fmt.Sprintf("operator-%d.tar", i))
		if err := images.WriteArchive(images.Operator(binary, ref, "realnode-test", "realnode-test"), archive); err != nil {
			t.Fatal(err)
		}
		archives = append(archives, archive)
	}
	for pkg, ref := range map[string]string{"./test/images/torchtrainer": trainerImage, "./test/images/mpitrainer": mpiTrainerImage} {
		archive, err := images.Program(t.Context(), root, pkg, ref, dir)
		if err != nil {
			t.Fatal(err)
		}
		archives = append(archives, archive)
	}
	// No simulated CPU nodes: the operator and the trainers, which tolerate the real node's taint and select it,
	// land there; a pod that does not tolerate it waits.
	c := cluster.StartForTest(t, cluster.Options{
		Profile: cluster.ProfileFull, GPUNodes: 1, CPUNodes: -1,
		RealNode: true, RealNodeImages: archives,
	})
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := c.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	// The TrainJobStatus and OptimizationJob gates on, as a user's overlay would set them: the trainers report
	// their progress, and OptimizationJobs run their trials.
	s, err := stack.UpAsDeployment(t.Context(), c, operatorImage, t.Logf, "--feature-gates=TrainJobStatus=true,"+config.FeatureOptimizationJob+"=true")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Down(); err != nil {
			t.Error(err)
		}
	})
	t.Logf("operator Deployment rolled out in %v", time.Since(begin).Round(time.Millisecond))
	r := &realNodeSuite{c: c, cl: s.Client, binary: binary, kubeconfig: kubeconfig}

	r.run(t, "the operator runs as its Deployment's pods on the real node", r.operatorPods)
	r.run(t, "the operator's namespace enforces the restricted Pod Security Standard", r.restrictedNamespace)
	r.run(t, "a TrainJob on a shipped runtime that does not ask for the real node is not scheduled there", r.notOnRealNode)
	r.run(t, "a 3-node torch TrainJob trains for real to Complete and reports its progress", r.torchTrainJob)
	r.run(t, "port-forward reaches rank 1 of a TrainJob on the real node and follows it to the pod that takes its place", r.portForward)
	r.run(t, "an OptimizationJob's seeded random search of the sgd trainer's learning rate finds the trial of the lowest loss", r.randomSearch)
	r.run(t, "an MPI TrainJob on the deepspeed runtime reaches every host of its hostfile and trains to Complete", r.mpiTrainJob)
	r.run(t, "a rank killed mid-run is replaced and the TrainJob still completes", r.killedRank)
	r.run(t, "the other operator pod takes over when the leader's pod is deleted", r.leaderFailover)
	r.run(t, "kubectl trainjob install --image rolls the real Deployment out", r.install)
}

type realNodeSuite struct {
	c          *cluster.Cluster
	cl         client.Client
	binary     string
	kubeconfig string
}

// run runs a subtest and says how long it took (make test's closing note lists them).
func (r *realNodeSuite) run(t *testing.T, name string, f func(*testing.T)) {
	begin := time.Now()
	t.Run(name, f)
	t.Logf("%s: %v", name, time.Since(begin).Round(100*time.Millisecond))
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
	if err := r.cl.List(t.Context(), &pods, client.InNamespace(operatorNamespace), client.MatchingLabels{"app.kubernetes.io/component": "operator"}); err != nil {
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
