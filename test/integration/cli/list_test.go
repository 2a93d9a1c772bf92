package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/list"
)

// listCmd is `list` with its clock pinned at now.
func listCmd(now time.Time) plugin.CommandAdder {
	return func(f cmdutil.Factory, s cmdutil.Streams) *cobra.Command {
		o := list.NewListOptions(s)
		o.Clock = clocktesting.NewFakePassiveClock(now)
		return list.NewCmdListWithOptions(f, o)
	}
}

// smallRuntime is a ClusterTrainingRuntime of 2 nodes with 4 GPUs each, for TrainJobs that do not say, unless
// another test of the shared API server made it already.
func smallRuntime(f *fixture) {
	f.t.Helper()
	rt := &trainer.ClusterTrainingRuntime{
		ObjectMeta: metav1.ObjectMeta{Name: "torch-small", Labels: map[string]string{trainer.FrameworkLabel: "torch"}},
		Spec: trainer.TrainingRuntimeSpec{
			MLPolicy: &trainer.MLPolicy{NumNodes: ptr.To[int32](2), MLPolicySource: trainer.MLPolicySource{Torch: &trainer.TorchMLPolicySource{}}},
			Template: trainer.JobSetTemplateSpec{Spec: jobsetv1alpha2.JobSetSpec{ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{
				Name: trainer.Node, Replicas: 1,
				Template: batchv1.JobTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{trainer.AncestorLabel: trainer.AncestorTrainer}},
					Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
						Containers: []corev1.Container{{Name: trainer.Node, Image: "pytorch/pytorch:2.7.1",
							Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("4")}}}}}}},
				},
			}}}},
		},
	}
	if err := f.c.Create(f.t.Context(), rt); err != nil && !apierrors.IsAlreadyExists(err) {
		f.t.Fatal(err)
	}
}

// listFixture makes one TrainJob in every stage, and one in a second namespace.
func listFixture(t *testing.T, f *fixture) (first, last *trainer.TrainJob) {
	smallRuntime(f)
	first = trainingTrainJob(f, "llama")
	failedTrainJob(f, "oom")
	queued := f.trainJob("queued", 4, false, func(tj *trainer.TrainJob) {
		tj.Spec.Suspend = ptr.To(true)
		tj.Labels["team"] = "vision"
	})
	queued.Status.Conditions = []metav1.Condition{condition(trainer.TrainJobSuspended, trainer.TrainJobSuspendedReason, trainer.TrainJobSuspendedMessage, metav1.ConditionTrue, at(queued, time.Second))}
	f.updateStatus(queued)
	done := f.trainJob("done", 1, false)
	done.Status = trainer.TrainJobStatus{
		Conditions: []metav1.Condition{condition(trainer.TrainJobComplete, "AllJobsCompleted", "jobset completed successfully", metav1.ConditionTrue, at(done, 3*time.Minute))},
		JobsStatus: []trainer.JobStatus{jobStatus("node", 0, 0, 1, 0)},
		TrainerStatus: &trainer.TrainerStatus{ProgressPercentage: ptr.To[int32](100), EstimatedRemainingSeconds: ptr.To[int32](0),
			LastUpdatedTime: at(done, 3*time.Minute)},
	}
	f.updateStatus(done)
	// No nodes or resources of its own: NODES and GPUS come from its runtime.
	f.trainJob("fresh", 0, false, func(tj *trainer.TrainJob) {
		tj.Spec.Trainer = nil
		tj.Spec.RuntimeRef.Name = "torch-small"
	})
	// A runtime that does not exist (or that nobody may read): unknown.
	f.trainJob("mystery", 0, false, func(tj *trainer.TrainJob) {
		tj.Spec.Trainer = nil
		tj.Spec.RuntimeRef.Name = "gone"
		tj.Spec.RuntimeRef.Kind = ptr.To(trainer.TrainingRuntimeKind)
	})
	other := &fixture{t: t, c: f.c, ns: f.ns + "-b"}
	if err := f.c.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: other.ns}}); err != nil {
		t.Fatal(err)
	}
	last = other.trainJob("elsewhere", 2, false)
	return first, last
}

// TestList lists TrainJobs in every stage and in every output format.
func TestList(t *testing.T) {
	// Its own API server: it lists with -A.
	c := apiCluster(t)
	f := fixtureOn(t, c)
	first, last := listFixture(t, f)
	// Every AGE is "10m" however long the fixtures took to make (under 30s).
	now := last.CreationTimestamp.Add(10*time.Minute + 30*time.Second)
	n := f.normalizer(first)
	n.Replace[f.ns+"-b"] = "<ns-b>"
	cmd := []plugin.CommandAdder{listCmd(now)}
	kube := kubeArgs(c, f.ns)
	empty := f.ns + "-empty"
	if err := f.c.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: empty}}); err != nil {
		t.Fatal(err)
	}
	n.Replace[empty] = "<empty-ns>"
	for _, tc := range []struct {
		name string
		args []string
		// base names the TrainJob whose creation the printed times are offsets from.
		base string
	}{
		{"table", withArgs(kube, "list"), ""},
		{"alias-get", withArgs(kube, "get"), ""},
		{"wide", withArgs(kube, "ls", "-o", "wide"), ""},
		{"no-headers", withArgs(kube, "list", "--no-headers"), ""},
		{"all-namespaces", withArgs(kube, "list", "-A"), ""},
		{"selector", withArgs(kube, "list", "-l", "team=vision"), ""},
		{"field-selector", withArgs(kube, "list", "--field-selector", "metadata.name=oom"), ""},
		{"stage", withArgs(kube, "list", "--stage", "training,Failed"), ""},
		{"stage-none", withArgs(kube, "list", "--stage", "Initializing"), ""},
		{"chunk-size", withArgs(kube, "list", "--chunk-size", "2"), ""},
		{"name", withArgs(kube, "list", "-o", "name"), ""},
		{"json", withArgs(kube, "list", "-l", "team=vision", "-o", "json"), "queued"},
		{"yaml", withArgs(kube, "list", "--field-selector", "metadata.name=done", "-o", "yaml"), "done"},
		{"jsonpath", withArgs(kube, "list", "-o", `jsonpath={range .items[*]}{.metadata.name}{"\t"}{.spec.runtimeRef.name}{"\n"}{end}`), ""},
		{"go-template", withArgs(kube, "list", "-o", `go-template={{range .items}}{{.metadata.name}} {{.spec.suspend}}{{"\n"}}{{end}}`), ""},
		{"empty", withArgs(kubeArgs(c, empty), "list"), ""},
		{"error-bad-stage", withArgs(kube, "list", "--stage", "Running"), ""},
		{"error-bad-output", withArgs(kube, "list", "-o", "table"), ""},
		{"error-bad-selector", withArgs(kube, "list", "-l", "team in nlp"), ""},
		{"error-bad-field-selector", withArgs(kube, "list", "--field-selector", "spec.suspend=true"), ""},
		{"error-unknown-flag", withArgs(kube, "list", "--stages", "Training"), ""},
		{"error-argument", withArgs(kube, "list", "llama"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := n
			if tc.base != "" {
				tj := &trainer.TrainJob{}
				if err := f.c.Get(t.Context(), clientKey(f.ns, tc.base), tj); err != nil {
					t.Fatal(err)
				}
				n.Base = tj.CreationTimestamp.Time
			}
			AssertGolden(t, "list/"+tc.name, n.Normalize(Run(t, "", cmd, tc.args...).String()))
		})
	}

	t.Run("watch", func(t *testing.T) {
		run := Start(t, "", cmd, withArgs(kube, "list", "-w", "-l", "team=vision")...)
		run.WaitForOutput(t, "queued")
		queued := &trainer.TrainJob{}
		if err := f.c.Get(t.Context(), clientKey(f.ns, "queued"), queued); err != nil {
			t.Fatal(err)
		}
		queued.Spec.Suspend = ptr.To(false)
		if err := f.c.Update(t.Context(), queued); err != nil {
			t.Fatal(err)
		}
		queued.Status.Conditions = []metav1.Condition{condition(trainer.TrainJobSuspended, trainer.TrainJobResumedReason, trainer.TrainJobResumedMessage, metav1.ConditionFalse, at(queued, time.Minute))}
		queued.Status.JobsStatus = []trainer.JobStatus{jobStatus("node", 1, 1, 0, 0)}
		f.updateStatus(queued)
		run.WaitForOutput(t, "Training")
		// Rows are appended as kubectl get -w does; the command runs until interrupted (the test's end).
		got := run.out.String()
		if i := strings.Index(got, "Training"); i >= 0 {
			got = got[:i+strings.Index(got[i:], "\n")+1]
		}
		AssertGolden(t, "list/watch", n.Normalize(got))
	})

	// The trainer reports its progress: each report is a row with its PROGRESS and ETA.
	t.Run("watch-progress", func(t *testing.T) {
		run := Start(t, "", cmd, withArgs(kube, "list", "-w", "--field-selector", "metadata.name=queued")...)
		run.WaitForOutput(t, "queued")
		queued := &trainer.TrainJob{}
		for _, report := range []struct {
			percent, left int32
			text          string
		}{{30, 1200, "30%"}, {60, 480, "60%"}} {
			if err := f.c.Get(t.Context(), clientKey(f.ns, "queued"), queued); err != nil {
				t.Fatal(err)
			}
			queued.Status.TrainerStatus = &trainer.TrainerStatus{ProgressPercentage: ptr.To(report.percent),
				EstimatedRemainingSeconds: ptr.To(report.left), LastUpdatedTime: at(queued, 2*time.Minute)}
			f.updateStatus(queued)
			run.WaitForOutput(t, report.text)
		}
		got := run.out.String()
		if i := strings.Index(got, "60%"); i >= 0 {
			got = got[:i+strings.Index(got[i:], "\n")+1]
		}
		AssertGolden(t, "list/watch-progress", n.Normalize(got))
	})
}
