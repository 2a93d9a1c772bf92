package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
)

// TestTorchDRA: a torch TrainJob whose trainer pods claim 8 GPUs each through DRA (a runtimePatch's
// resourceClaims, KEP-2782), then one on the shipped runtime torch-distributed-dra, complete on the simulated GPU nodes: the kube-scheduler allocates each pod's claim
// from its node's ResourceSlice, at most one such pod per node, and the pipeline counts the claimed GPUs as it counts nvidia.com/gpu (torchrun
// starts one process per GPU: PET_NPROC_PER_NODE=auto, where a CPU pod gets its CPU count).
func TestTorchDRA(t *testing.T) {
	t.Parallel()
	useGPUs(t)
	ns := cluster.NewNamespace(t, suite.client, "e2e-", diagnose)
	createGPUTemplate(t, ns, "gpu-8")

	checkDRAPods(t, podsOf(runToCompletion(t, ns, "torch-dra.yaml", "torch-dra"), "node"))

	// The shipped runtime torch-distributed-dra claims from the namespace's ResourceClaimTemplate trainer-gpus.
	createGPUTemplate(t, ns, "trainer-gpus")
	mustKubectlTrainJob(t, "create", "-n", ns, "on-dra-runtime", "--runtime", "torch-distributed-dra", "--nodes", "2",
		"--env", "SIM_RUN_SECONDS=3", "--", "torchrun", "/workspace/train.py")
	waitTrainJob(t, ns, "on-dra-runtime", trainer.TrainJobComplete, runTimeout)
	pods, err := jobSetPods(t.Context(), ns, "on-dra-runtime")
	if err != nil {
		t.Fatal(err)
	}
	checkDRAPods(t, podsOf(pods, "node"))
}

// checkDRAPods: the 2 pods of a TrainJob that claimed 8 GPUs a pod through DRA succeeded, each on a GPU node of
// its own with its claim, without nvidia.com/gpu, and torchrun started one process per GPU.
func checkDRAPods(t *testing.T, pods []corev1.Pod) {
	t.Helper()
	if len(pods) != 2 {
		t.Fatalf("%d pods of replicated job node, want 2", len(pods))
	}
	nodes := map[string]string{}
	for _, p := range pods {
		if p.Status.Phase != corev1.PodSucceeded {
			t.Errorf("pod %s is %s, want Succeeded", p.Name, p.Status.Phase)
		}
		// A pod whose claim the scheduler did not allocate on its node is never bound to it.
		if !strings.HasPrefix(p.Spec.NodeName, "gpu-node-") || len(p.Status.ResourceClaimStatuses) != 1 {
			t.Errorf("pod %s ran on %q with claims %v, want a GPU node and the claim of template gpu-8", p.Name, p.Spec.NodeName, p.Status.ResourceClaimStatuses)
		}
		if other, ok := nodes[p.Spec.NodeName]; ok {
			t.Errorf("pods %s and %s both ran on %s: 16 GPUs claimed of its 8", other, p.Name, p.Spec.NodeName)
		}
		nodes[p.Spec.NodeName] = p.Name
		c := container(t, &p, "node")
		if _, ok := c.Resources.Limits[cluster.GPUResource]; ok {
			t.Errorf("pod %s asks for %s too: %v", p.Name, cluster.GPUResource, c.Resources.Limits)
		}
		for _, e := range c.Env {
			if e.Name == "PET_NPROC_PER_NODE" && e.Value != "auto" {
				t.Errorf("pod %s: PET_NPROC_PER_NODE = %q, want auto (one process per claimed GPU)", p.Name, e.Value)
			}
		}
	}
}

// TestGPUClaimCLI: `kubectl trainjob create --gpu-claim` on the simulated GPUs. A 2 × 8-GPU TrainJob runs with
// each pod's claim allocated from its own node's ResourceSlice, and `status` counts and names the devices of each
// pod, `list`, `runtimes` and `fit` count its claimed GPUs (checkDRACounted); deleting the TrainJob deletes the ResourceClaimTemplate create made for it. A pod claiming 16 GPUs, more
// than any node has, stays Pending, and `status` names its claim as the reason.
func TestGPUClaimCLI(t *testing.T) {
	t.Parallel()
	useGPUs(t)
	ns := cluster.NewNamespace(t, suite.client, "e2e-", diagnose)

	mustKubectlTrainJob(t, "create", "-n", ns, "dra-cli", "--runtime", "torch-distributed", "--nodes", "2", "--gpus-per-node", "8", "--gpu-claim",
		"--env", "SIM_RUN_SECONDS=600", "--", "torchrun", "/workspace/train.py")
	var pods []corev1.Pod
	cluster.Eventually(t, "both trainer pods Running", runTimeout, func(ctx context.Context) error {
		var err error
		if pods, err = jobSetPods(ctx, ns, "dra-cli"); err != nil {
			return err
		}
		if len(pods) != 2 {
			return fmt.Errorf("%d pods, want 2", len(pods))
		}
		for _, p := range pods {
			if p.Status.Phase != corev1.PodRunning {
				return fmt.Errorf("pod %s is %s", p.Name, p.Status.Phase)
			}
		}
		return nil
	})
	out := mustKubectlTrainJob(t, "status", "-n", ns, "dra-cli")
	for _, p := range pods {
		row := regexp.MustCompile(regexp.QuoteMeta(p.Name) + `\s+node\s+\d\s+` + regexp.QuoteMeta(p.Spec.NodeName) + `\s+8\s+Running`)
		devices := regexp.MustCompile(regexp.QuoteMeta(p.Name) + `\s+dra-cli-node-\S+-gpu-\S+\s+8 gpu\.nvidia\.com\s+` +
			regexp.QuoteMeta(p.Spec.NodeName) + `: gpu-0,gpu-1,gpu-2,gpu-3,gpu-4,gpu-5,gpu-6,gpu-7\n`)
		if !row.MatchString(out) || !devices.MatchString(out) {
			t.Errorf("status does not show pod %s on %s with its 8 claimed GPUs, gpu-0..gpu-7 of %s:\n%s", p.Name, p.Spec.NodeName, p.Spec.NodeName, out)
		}
	}
	checkDRACounted(t, ns, pods)
	mustKubectlTrainJob(t, "delete", "-n", ns, "dra-cli", "-y", "--wait")
	cluster.Eventually(t, "ResourceClaimTemplate dra-cli-gpu deleted with its TrainJob", runTimeout, func(ctx context.Context) error {
		err := suite.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "dra-cli-gpu"}, &resourcev1.ResourceClaimTemplate{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %v", err)
	})

	mustKubectlTrainJob(t, "create", "-n", ns, "dra-too-big", "--runtime", "torch-distributed", "--nodes", "1", "--gpus-per-node", "16", "--gpu-claim",
		"--", "torchrun", "/workspace/train.py")
	why := regexp.MustCompile(`Stage:\s+Pending: 1 pod unschedulable, ResourceClaim dra-too-big-node-0-0-\S+-gpu-\S+ \(16 gpu\.nvidia\.com\) cannot be allocated: 0/\d+ nodes are available: .*cannot allocate all claims`)
	cluster.Eventually(t, "status names the claim that cannot be allocated", runTimeout, func(ctx context.Context) error {
		cmd, stdout, stderr := command(ctx, "status", "-n", ns, "dra-too-big")
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%w: %s", err, stderr)
		}
		if !why.Match(stdout.Bytes()) {
			return fmt.Errorf("no line matching %s:\n%s", why, stdout)
		}
		return nil
	})
}

// checkDRACounted: while the 2 trainer pods of dra-cli (pods) hold 8 GPUs each through DRA, `list` counts its
// 16 GPUs, `runtimes` the 8 GPUs a node of torch-distributed-dra claims from the namespace's trainer-gpus, and
// `fit` counts a GPU node's devices allocated to claims as used, naming them and the pod they are allocated to:
// a 3-node TrainJob on torch-distributed-dra fits 2 pods now, on the two free GPU nodes, and dra-cli itself,
// whose own claims fit leaves out, fits now.
func checkDRACounted(t *testing.T, ns string, pods []corev1.Pod) {
	t.Helper()
	out := mustKubectlTrainJob(t, "list", "-n", ns)
	if row := regexp.MustCompile(`(?m)^dra-cli\s+\S+\s+torch-distributed\s+2\s+16\s`); !row.MatchString(out) {
		t.Errorf("list does not count the 16 GPUs dra-cli claims (NODES 2, GPUS 16):\n%s", out)
	}

	createGPUTemplate(t, ns, "trainer-gpus")
	out = mustKubectlTrainJob(t, "runtimes", "-n", ns)
	if row := regexp.MustCompile(`(?m)^torch-distributed-dra\s+ClusterTrainingRuntime\s+torch\s+torch\s+1\s+8\s`); !row.MatchString(out) {
		t.Errorf("runtimes does not count the 8 GPUs a node of torch-distributed-dra claims from trainer-gpus:\n%s", out)
	}

	r := kubectlTrainJob(t, "fit", "-n", ns, "-f", filepath.Join("testdata", "torch-dra-three-nodes.yaml"))
	if r.code != 4 || !strings.Contains(r.stdout, "does not fit now: 2 of its 3 pods fit") {
		t.Errorf("fit of 3 nodes of 8 claimed GPUs while dra-cli holds 2 of the 4 GPU nodes: want 2 of 3 fit now (exit code 4):\n%v", r)
	}
	for _, p := range pods {
		used := p.Spec.NodeName + " has 0 of its 8 gpu.nvidia.com free (gpu-0,gpu-1,gpu-2,gpu-3,gpu-4,gpu-5,gpu-6,gpu-7 allocated to pod " + ns + "/" + p.Name + ")"
		if !strings.Contains(r.stdout, used) {
			t.Errorf("fit does not say %q:\n%s", used, r.stdout)
		}
	}
	if out := mustKubectlTrainJob(t, "fit", "-n", ns, "dra-cli"); !strings.Contains(out, "fits now: all 2 pods fit") {
		t.Errorf("fit of dra-cli counts its own claims as used:\n%s", out)
	}
}

// createGPUTemplate creates the ResourceClaimTemplate name in ns: 8 devices of the simulated GPUs' DeviceClass.
func createGPUTemplate(t *testing.T, ns, name string) {
	t.Helper()
	if err := suite.client.Create(t.Context(), cluster.NewGPUClaimTemplate(ns, name, 8)); err != nil {
		t.Fatal(err)
	}
}
