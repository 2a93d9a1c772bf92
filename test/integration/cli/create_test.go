package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	"sigs.k8s.io/yaml"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/create"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
)

// createRuntime is the ClusterTrainingRuntime the create tests run on. The cluster is shared by the package,
// so the name is the test's own.
const createRuntime = "create-test-torch"

// TestCreate creates TrainJobs from flags and from files, checks the golden YAML of what the flags make, and
// that bad input creates nothing.
func TestCreate(t *testing.T) {
	c := sharedCluster(t)
	f, kube, n := runtimeFixture(t, c, createRuntime)
	cl, ns := f.c, f.ns
	if err := cl.Create(t.Context(), &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "team-torch", Namespace: ns}, Spec: minimalRuntimeSpec()}); err != nil {
		t.Fatal(err)
	}
	cmd := []plugin.CommandAdder{create.NewCmdCreate}
	grantNamespaceUser(t, cl, "alice", ns)

	flags := []string{"--runtime", createRuntime, "--image", "ghcr.io/example/llama-ft:1.0", "--nodes", "4", "--gpus-per-node", "8",
		"--resources-per-node", "cpu=16,memory=64Gi", "--env", "NCCL_DEBUG=INFO", "--env", "EPOCHS=3",
		"--dataset-uri", "hf://tatsu-lab/alpaca", "--model-uri", "hf://meta-llama/Llama-3.2-1B-Instruct",
		"--label", "team=nlp", "--annotation", "owner=alice@example.com", "--queue", "team-a", "--suspend"}
	command := []string{"--", "torchrun", "train.py", "--lr", "3e-4"}
	createArgs := func(name string, more ...string) []string {
		return slices.Concat(kube, []string{"create", name}, flags, more, command)
	}

	var dryRun *trainer.TrainJob
	t.Run("flags-dry-run-client", func(t *testing.T) {
		res := Run(t, "", cmd, createArgs("llama", "--dry-run=client", "-o", "yaml")...)
		AssertGolden(t, "create/flags-dry-run-client", n.Normalize(res.String()))
		dryRun = decodeTrainJob(t, res.Stdout)
		assertNoTrainJob(t, cl, ns, "llama")
	})
	t.Run("flags-dry-run-server", func(t *testing.T) {
		AssertGolden(t, "create/flags-dry-run-server", n.Normalize(Run(t, "", cmd, createArgs("llama", "--dry-run=server")...).String()))
		assertNoTrainJob(t, cl, ns, "llama")
	})
	t.Run("flags", func(t *testing.T) {
		AssertGolden(t, "create/flags", n.Normalize(Run(t, "", cmd, createArgs("llama")...).String()))
		got := &trainer.TrainJob{}
		if err := cl.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "llama"}, got); err != nil {
			t.Fatal(err)
		}
		// What was created is what the dry run showed, plus the API server's defaults.
		want := dryRun.Spec.DeepCopy()
		want.ManagedBy = ptr.To(trainer.TrainJobControllerManager)
		if diff := cmp.Diff(*want, got.Spec); diff != "" {
			t.Errorf("created spec differs from the dry run's (-dry run +created):\n%s", diff)
		}
	})
	t.Run("flags-output-yaml", func(t *testing.T) {
		res := Run(t, "", cmd, createArgs("llama-2", "-o", "yaml")...)
		created := &trainer.TrainJob{}
		if err := cl.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "llama-2"}, created); err != nil {
			t.Fatal(err)
		}
		n := n
		n.Base = created.CreationTimestamp.Time
		AssertGolden(t, "create/flags-output-yaml", n.Normalize(res.String()))
	})
	t.Run("training-runtime", func(t *testing.T) {
		AssertGolden(t, "create/training-runtime", n.Normalize(Run(t, "", cmd, withArgs(kube, "create", "small", "--runtime", "trainingruntime/team-torch", "--dry-run=client", "-o", "yaml")...).String()))
	})
	// --gpu-type: a runtime patch of the trainer's node selector, owned by the create command.
	t.Run("gpu-type", func(t *testing.T) {
		AssertGolden(t, "create/gpu-type", n.Normalize(Run(t, "", cmd, withArgs(kube, "create", "a100", "--runtime", createRuntime, "--nodes", "2",
			"--gpus-per-node", "8", "--gpu-type", "NVIDIA-A100-SXM4-80GB", "--dry-run=client", "-o", "yaml")...).String()))
	})
	// --gpu-claim: the GPUs through DRA (KEP-2782), a ResourceClaimTemplate of the TrainJob's own and a runtime
	// patch that claims it for every trainer pod. The TrainJob owns the template: it goes with the TrainJob.
	if err := cl.Create(t.Context(), cluster.NewDRADeviceClass()); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	draArgs := withArgs(kube, "create", "dra", "--runtime", createRuntime, "--nodes", "2", "--gpus-per-node", "8", "--gpu-claim")
	t.Run("gpu-claim-dry-run", func(t *testing.T) {
		AssertGolden(t, "create/gpu-claim-dry-run", n.Normalize(Run(t, "", cmd, withArgs(draArgs, "--dry-run=client", "-o", "yaml")...).String()))
		assertNoTrainJob(t, cl, ns, "dra")
	})
	t.Run("gpu-claim", func(t *testing.T) {
		AssertGolden(t, "create/gpu-claim", n.Normalize(Run(t, "", cmd, withArgs(draArgs, "-o", "name")...).String()))
		tj := &trainer.TrainJob{}
		tmpl := &resourcev1.ResourceClaimTemplate{}
		if err := cl.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "dra"}, tj); err != nil {
			t.Fatal(err)
		}
		if err := cl.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "dra-gpu"}, tmpl); err != nil {
			t.Fatal(err)
		}
		if !metav1.IsControlledBy(tmpl, tj) {
			t.Errorf("ResourceClaimTemplate dra-gpu is not the TrainJob's: owners %v, TrainJob UID %s", tmpl.OwnerReferences, tj.UID)
		}
		AssertGolden(t, "create/gpu-claim-delete-prompt", n.Normalize(Run(t, "n\n", []plugin.CommandAdder{deleteCmd(true)}, withArgs(kube, "delete", "dra")...).String()))
	})
	// A copy of it (create --from, as rerun makes one) claims from a template of its own, a copy of dra-gpu that
	// the copy owns: dra-gpu goes with dra, and the copy's pods, made after dra is deleted, would find none.
	t.Run("gpu-claim-from", func(t *testing.T) {
		AssertGolden(t, "create/gpu-claim-from", n.Normalize(Run(t, "", cmd, withArgs(kube, "create", "dra-again", "--from", "dra", "-o", "name")...).String()))
		tj := &trainer.TrainJob{}
		tmpl, orig := &resourcev1.ResourceClaimTemplate{}, &resourcev1.ResourceClaimTemplate{}
		if err := cl.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "dra-again"}, tj); err != nil {
			t.Fatal(err)
		}
		if err := cl.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "dra-gpu"}, orig); err != nil {
			t.Fatal(err)
		}
		if err := cl.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "dra-again-gpu"}, tmpl); err != nil {
			t.Fatal(err)
		}
		if !metav1.IsControlledBy(tmpl, tj) {
			t.Errorf("ResourceClaimTemplate dra-again-gpu is not the copy's: owners %v, TrainJob UID %s", tmpl.OwnerReferences, tj.UID)
		}
		if diff := cmp.Diff(orig.Spec, tmpl.Spec); diff != "" {
			t.Errorf("dra-again-gpu asks for other devices than dra-gpu (-dra-gpu +dra-again-gpu):\n%s", diff)
		}
		var named []string
		for _, p := range tj.Spec.RuntimePatches {
			for _, rj := range p.TrainingRuntimeSpec.Template.Spec.ReplicatedJobs {
				for _, c := range rj.Template.Spec.Template.Spec.ResourceClaims {
					named = append(named, ptr.Deref(c.ResourceClaimTemplateName, ""))
				}
			}
		}
		if diff := cmp.Diff([]string{"dra-again-gpu"}, named); diff != "" {
			t.Errorf("the copy's pods claim from (-want +got):\n%s", diff)
		}
	})
	t.Run("file", func(t *testing.T) {
		AssertGolden(t, "create/file", n.Normalize(Run(t, "", cmd, withArgs(kube, "create", "-f", filepath.Join("testdata", "create", "trainjob.yaml"))...).String()))
		if err := cl.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "from-file"}, &trainer.TrainJob{}); err != nil {
			t.Error(err)
		}
	})
	// A team member who may create TrainJobs but not read runtimes: the runtime cannot be checked, so the
	// TrainJob is created with a warning.
	t.Run("namespace-user", func(t *testing.T) {
		AssertGolden(t, "create/namespace-user", n.Normalize(Run(t, "", cmd, withArgs(kube, "--as", "alice", "create", "by-alice", "--runtime", createRuntime, "--nodes", "2")...).String()))
	})
	t.Run("stdin", func(t *testing.T) {
		data, err := os.ReadFile(filepath.Join("testdata", "create", "trainjob.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		AssertGolden(t, "create/stdin", n.Normalize(Run(t, string(data), cmd, withArgs(kube, "create", "from-stdin", "-f", "-", "-o", "name")...).String()))
		if err := cl.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "from-stdin"}, &trainer.TrainJob{}); err != nil {
			t.Error(err)
		}
	})

	// Bad input: one line that says what is wrong and how to fix it, exit 1, and nothing created.
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"unknown-runtime", withArgs(kube, "create", "bad", "--runtime", "no-such-runtime")},
		{"unknown-training-runtime", withArgs(kube, "create", "bad", "--runtime", "trainingruntime/no-such-runtime")},
		{"runtime-of-other-kind", withArgs(kube, "create", "bad", "--runtime", "team-torch")},
		{"bad-runtime-kind", withArgs(kube, "create", "bad", "--runtime", "pod/x")},
		{"bad-resources-quantity", withArgs(kube, "create", "bad", "--runtime", createRuntime, "--resources-per-node", "cpu=four,memory=16Gi")},
		{"bad-resources-pair", withArgs(kube, "create", "bad", "--runtime", createRuntime, "--resources-per-node", "cpu:4")},
		{"bad-resources-name", withArgs(kube, "create", "bad", "--runtime", createRuntime, "--resources-per-node", "nvidia gpu=8")},
		{"gpus-twice", withArgs(kube, "create", "bad", "--runtime", createRuntime, "--gpus-per-node", "8", "--resources-per-node", "nvidia.com/gpu=4")},
		{"gpu-claim-no-count", withArgs(kube, "create", "bad", "--runtime", createRuntime, "--gpu-claim")},
		{"gpu-claim-unknown-class", withArgs(kube, "create", "bad", "--runtime", createRuntime, "--gpus-per-node", "8", "--gpu-claim=gpu.example.com")},
		{"gpu-claim-and-resources", withArgs(kube, "create", "bad", "--runtime", createRuntime, "--gpu-claim", "--resources-per-node", "nvidia.com/gpu=8")},
		{"unknown-flag", withArgs(kube, "create", "bad", "--runtime", createRuntime, "--gpus", "8")},
		{"no-name", withArgs(kube, "create", "--runtime", createRuntime)},
		{"no-runtime", withArgs(kube, "create", "bad")},
		{"bad-name", withArgs(kube, "create", "Bad_Name", "--runtime", createRuntime)},
		{"bad-env", withArgs(kube, "create", "bad", "--runtime", createRuntime, "--env", "EPOCHS")},
		{"bad-dataset-uri", withArgs(kube, "create", "bad", "--runtime", createRuntime, "--dataset-uri", "tatsu-lab/alpaca")},
		{"bad-dry-run", withArgs(kube, "create", "bad", "--runtime", createRuntime, "--dry-run=maybe")},
		{"wait-dry-run", withArgs(kube, "create", "bad", "--runtime", createRuntime, "--wait", "--dry-run=client")},
		{"file-and-flags", withArgs(kube, "create", "-f", filepath.Join("testdata", "create", "trainjob.yaml"), "--image", "x")},
		{"file-and-gpu-type", withArgs(kube, "create", "-f", filepath.Join("testdata", "create", "trainjob.yaml"), "--gpu-type", "NVIDIA-A100-SXM4-80GB")},
		{"file-missing", withArgs(kube, "create", "-f", filepath.Join("testdata", "create", "no-such-file.yaml"))},
		{"file-two-objects", withArgs(kube, "create", "-f", filepath.Join("testdata", "create", "two-trainjobs.yaml"))},
		{"file-not-a-trainjob", withArgs(kube, "create", "-f", filepath.Join("testdata", "create", "runtime.yaml"))},
		{"file-unknown-field", withArgs(kube, "create", "-f", filepath.Join("testdata", "create", "unknown-field.yaml"))},
		{"already-exists", withArgs(kube, "create", "llama", "--runtime", createRuntime)},
		{"namespace-not-found", []string{"--kubeconfig", c.KubeconfigPath, "-n", "no-such-namespace", "create", "bad", "--runtime", createRuntime}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			AssertGolden(t, "create/"+tc.name, n.Normalize(Run(t, "", cmd, tc.args...).String()))
			assertNoTrainJob(t, cl, ns, "bad")
		})
	}
	t.Run("no-kubeconfig", func(t *testing.T) {
		noKubeconfig(t)
		AssertGolden(t, "create/no-kubeconfig", Run(t, "", cmd, "create", "bad", "--runtime", createRuntime).String())
	})

	var names []string
	var list trainer.TrainJobList
	if err := cl.List(t.Context(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, tj := range list.Items {
		names = append(names, tj.Name)
	}
	if diff := cmp.Diff([]string{"by-alice", "dra", "dra-again", "from-file", "from-stdin", "llama", "llama-2"}, names); diff != "" {
		t.Errorf("TrainJobs in the namespace (-want +got):\n%s", diff)
	}
}

// TestCreateWait creates TrainJobs with --wait and --follow and plays their lives by writing their status as
// upstream's controller would: the exit code is the outcome.
func TestCreateWait(t *testing.T) {
	f, kube, n := runtimeFixture(t, sharedCluster(t), createRuntime)
	cl, ns := f.c, f.ns

	finish := func(typ, reason, message string) func(t *testing.T, tj *trainer.TrainJob, _ *Started) {
		return func(t *testing.T, tj *trainer.TrainJob, _ *Started) {
			tj.Status.Conditions = append(tj.Status.Conditions, condition(typ, reason, message, metav1.ConditionTrue, at(tj, 90*time.Second)))
			f.updateStatus(tj)
		}
	}
	for _, tc := range []struct {
		name string
		args []string
		play func(t *testing.T, tj *trainer.TrainJob, run *Started)
	}{
		{"wait-complete", []string{"--wait"}, finish(trainer.TrainJobComplete, "JobSetCompleted", "jobset completed")},
		{"wait-failed", []string{"--wait", "--timeout", "10m"}, finish(trainer.TrainJobFailed, "BackoffLimitExceeded", "jobset failed: job llama-node-0 has failed")},
		{"wait-timeout", []string{"--wait", "--timeout", "2s"}, nil},
		{"follow", []string{"--follow"}, func(t *testing.T, tj *trainer.TrainJob, run *Started) {
			playPipeline(t, f, tj, run)
			finish(trainer.TrainJobComplete, "JobSetCompleted", "jobset completed")(t, tj, run)
		}},
		// Off a terminal, --wait prints each report of the trainer's progress.
		{"wait-progress", []string{"--wait"}, func(t *testing.T, tj *trainer.TrainJob, run *Started) {
			report(t, f, tj, run, 45, 60*time.Second)
			report(t, f, tj, run, 80, 80*time.Second)
			finish(trainer.TrainJobComplete, "JobSetCompleted", "jobset completed")(t, tj, run)
		}},
		// On a terminal, a live line: the stage and why, then the progress bar; erased at the end.
		{"wait-terminal", []string{"--wait"}, func(t *testing.T, tj *trainer.TrainJob, run *Started) {
			run.WaitForOutput(t, "Pending")
			tj.Status.JobsStatus = []trainer.JobStatus{jobStatus(trainer.Node, 1, 1, 0, 0)}
			f.updateStatus(tj)
			run.WaitForOutput(t, "Training")
			report(t, f, tj, run, 45, 60*time.Second)
			finish(trainer.TrainJobComplete, "JobSetCompleted", "jobset completed")(t, tj, run)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := tc.name
			clk := &creationClock{c: cl, key: client.ObjectKey{Namespace: ns, Name: name}, offset: 2 * time.Minute}
			adder := createCmd(clk)
			if name == "wait-terminal" {
				adder = createOnTerminal(clk)
			}
			run := Start(t, "", []plugin.CommandAdder{adder}, slices.Concat(kube, []string{"create", name, "--runtime", createRuntime}, tc.args)...)
			tj := &trainer.TrainJob{}
			cluster.Eventually(t, "the TrainJob is created", waitTimeout, cluster.Holds(func(ctx context.Context) (bool, error) {
				err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, tj)
				return err == nil, client.IgnoreNotFound(err)
			}))
			if tc.play != nil {
				run.WaitForOutput(t, "created")
				tc.play(t, tj, run)
			}
			n := n
			n.Base = tj.CreationTimestamp.Time
			out := strings.NewReplacer("\r", "<CR>", "\x1b", "<ESC>").Replace(run.Wait(t).String())
			AssertGolden(t, "create/"+tc.name, n.Normalize(out))
		})
	}
}

// playPipeline moves a TrainJob through its initializer to training, as upstream's controller and the JobSet
// controller would show it: the JobSet, then jobsStatus as Jobs start and end. Each step waits until the
// follower printed the stage before it, so it sees every stage.
func playPipeline(t *testing.T, f *fixture, tj *trainer.TrainJob, run *Started) {
	t.Helper()
	f.jobSet(tj, trainer.DatasetInitializerName, trainer.Node)
	tj.Status.JobsStatus = []trainer.JobStatus{jobStatus(trainer.DatasetInitializerName, 1, 1, 0, 0), jobStatus(trainer.Node, 0, 0, 0, 0)}
	f.updateStatus(tj)
	run.WaitForOutput(t, "Initializing")
	tj.Status.JobsStatus = []trainer.JobStatus{jobStatus(trainer.DatasetInitializerName, 0, 0, 1, 0), jobStatus(trainer.Node, 1, 1, 0, 0)}
	f.updateStatus(tj)
	run.WaitForOutput(t, "Training")
	tj.Status.JobsStatus = []trainer.JobStatus{jobStatus(trainer.DatasetInitializerName, 0, 0, 1, 0), jobStatus(trainer.Node, 0, 0, 1, 0)}
}

// report writes a report of the trainer's progress, made at d after the TrainJob's creation, and waits until
// the command shows it.
func report(t *testing.T, f *fixture, tj *trainer.TrainJob, run *Started, percent int32, d time.Duration) {
	t.Helper()
	tj.Status.TrainerStatus = &trainer.TrainerStatus{ProgressPercentage: ptr.To(percent), EstimatedRemainingSeconds: ptr.To(int32(100-percent) * 12),
		Metrics: []trainer.Metric{{Name: "loss", Value: fmt.Sprintf("%.2f", 3-float64(percent)/50)}}, LastUpdatedTime: at(tj, d)}
	f.updateStatus(tj)
	run.WaitForOutput(t, fmt.Sprintf("%d%%", percent))
}

// createOnTerminal is `create` writing to a terminal (80 columns), with the clock given.
func createOnTerminal(clk clock.PassiveClock) plugin.CommandAdder {
	return func(f cmdutil.Factory, s cmdutil.Streams) *cobra.Command {
		o := create.NewCreateOptions(s)
		o.Clock, o.Terminal = clk, ptr.To(true)
		return create.NewCmdCreateWithOptions(f, o)
	}
}

// createCmd is `create` with the clock of --follow given.
func createCmd(clk clock.PassiveClock) plugin.CommandAdder {
	return func(f cmdutil.Factory, s cmdutil.Streams) *cobra.Command {
		o := create.NewCreateOptions(s)
		o.Clock = clk
		return create.NewCmdCreateWithOptions(f, o)
	}
}

// creationClock reads as a fixed time after the creation of a TrainJob (once it exists), so that what a
// command prints about "now" is the same in every run.
type creationClock struct {
	c      client.Client
	key    client.ObjectKey
	offset time.Duration

	mu      sync.Mutex
	created time.Time
}

func (k *creationClock) Now() time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.created.IsZero() {
		tj := &trainer.TrainJob{}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := k.c.Get(ctx, k.key, tj); err != nil {
			return time.Now()
		}
		k.created = tj.CreationTimestamp.Time
	}
	return k.created.Add(k.offset)
}

func (k *creationClock) Since(t time.Time) time.Duration { return k.Now().Sub(t) }

// runtimeFixture is a fixture in a new namespace of cluster c that has the ClusterTrainingRuntime runtime, the
// kubectl flags that reach the namespace and a Normalizer of its name: where the tests of the commands that make
// TrainJobs from flags (create, rerun, optimize) start.
func runtimeFixture(t *testing.T, c *cluster.Cluster, runtime string) (*fixture, []string, Normalizer) {
	f := fixtureOn(t, c)
	ensureClusterRuntime(t, f.c, runtime)
	return f, kubeArgs(c, f.ns), Normalizer{Replace: map[string]string{f.ns: "<ns>"}}
}

// ensureClusterRuntime creates a minimal ClusterTrainingRuntime unless another test did already.
func ensureClusterRuntime(t *testing.T, cl client.Client, name string) {
	t.Helper()
	rt := &trainer.ClusterTrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{trainer.FrameworkLabel: "torch"}}, Spec: minimalRuntimeSpec()}
	if err := cl.Create(t.Context(), rt); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// minimalRuntimeSpec is a torch runtime with one trainer node.
func minimalRuntimeSpec() trainer.TrainingRuntimeSpec {
	return trainer.TrainingRuntimeSpec{
		MLPolicy: &trainer.MLPolicy{NumNodes: ptr.To[int32](1), MLPolicySource: trainer.MLPolicySource{Torch: &trainer.TorchMLPolicySource{}}},
		Template: trainer.JobSetTemplateSpec{Spec: jobsetv1alpha2.JobSetSpec{ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{
			Name: trainer.Node, Replicas: 1,
			Template: batchv1.JobTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{trainer.AncestorLabel: trainer.AncestorTrainer}},
				Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: trainer.Node, Image: "pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime",
				}}}}},
			},
		}}}},
	}
}

func assertNoTrainJob(t *testing.T, cl client.Client, ns, name string) {
	t.Helper()
	err := cl.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, &trainer.TrainJob{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("TrainJob %s/%s exists (or cannot be read: %v); bad input must create nothing", ns, name, err)
	}
}

// decodeTrainJob decodes the YAML a command printed.
func decodeTrainJob(t *testing.T, s string) *trainer.TrainJob {
	t.Helper()
	tj := &trainer.TrainJob{}
	if err := yaml.Unmarshal([]byte(strings.TrimSpace(s)), tj); err != nil {
		t.Fatalf("decode %q: %v", s, err)
	}
	return tj
}
