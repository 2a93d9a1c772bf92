package operator_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	schedulerpluginsv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator/apply"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/snapshot"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/integration/operator/internal/optest"
)

// podGroupLabel is the label CoScheduling puts on every pod.
const podGroupLabel = "scheduling.x-k8s.io/pod-group"

// controllerRef is the owner reference every child carries.
func controllerRef(tj *trainer.TrainJob) []metav1.OwnerReference {
	return []metav1.OwnerReference{{
		APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind, Name: tj.Name, UID: tj.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}}
}

// findJob returns the replicated job named name of a JobSet spec.
func findJob(spec *jobsetv1alpha2.JobSetSpec, name string) *jobsetv1alpha2.ReplicatedJob {
	for k := range spec.ReplicatedJobs {
		if spec.ReplicatedJobs[k].Name == name {
			return &spec.ReplicatedJobs[k]
		}
	}
	return nil
}

func container(rj *jobsetv1alpha2.ReplicatedJob, name string) *corev1.Container {
	pod := &rj.Template.Spec.Template.Spec
	for k := range pod.Containers {
		if pod.Containers[k].Name == name {
			return &pod.Containers[k]
		}
	}
	for k := range pod.InitContainers {
		if pod.InitContainers[k].Name == name {
			return &pod.InitContainers[k]
		}
	}
	return nil
}

// TestPlainMLJobSetAndPodGroup: a suspended TrainJob with initializers and
// a runtimePatch of metadata, on a runtime without ML policy source and
// with gang scheduling, gets exactly the expected JobSet and PodGroup.
func TestPlainMLJobSetAndPodGroup(t *testing.T) {
	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	spec := runtimeSpec(&trainer.MLPolicy{NumNodes: ptr.To[int32](100)},
		initializerJob(trainer.DatasetInitializerName), initializerJob(trainer.ModelInitializerName),
		replicatedJob(trainer.Node, trainer.AncestorTrainer, trainer.Node))
	spec.PodGroupPolicy = &trainer.PodGroupPolicy{PodGroupPolicySource: trainer.PodGroupPolicySource{
		Coscheduling: &trainer.CoschedulingPodGroupPolicySource{ScheduleTimeoutSeconds: ptr.To[int32](100)},
	}}
	rt := createTrainingRuntime(t, ns, "plainml", spec)
	tj := trainJobYAML(t, ns, `
metadata: {name: alpha}
spec:
  runtimeRef: {name: plainml, kind: TrainingRuntime}
  suspend: true
  initializer:
    dataset: {storageUri: "hf://trainjob-dataset"}
    model: {storageUri: "hf://trainjob-model"}
  trainer:
    image: trainjob
    command: [trainjob]
    args: [trainjob]
  runtimePatches:
    - manager: test.io/manager
      trainingRuntimeSpec:
        template:
          metadata:
            labels: {testingKey: testingVal}
            annotations: {testingKey: testingVal}
`)
	create(t, tj)

	want := rt.Spec.Template.Spec.DeepCopy()
	want.Suspend = ptr.To(true)
	for k := range want.ReplicatedJobs {
		rj := &want.ReplicatedJobs[k]
		count := int32(1)
		c := &rj.Template.Spec.Template.Spec.Containers[0]
		switch rj.Name {
		case trainer.DatasetInitializerName:
			c.Env = []corev1.EnvVar{{Name: trainer.StorageURIEnv, Value: "hf://trainjob-dataset"}}
		case trainer.ModelInitializerName:
			c.Env = []corev1.EnvVar{{Name: trainer.StorageURIEnv, Value: "hf://trainjob-model"}}
		case trainer.Node:
			count = 100
			c.Image, c.Command, c.Args = "trainjob", []string{"trainjob"}, []string{"trainjob"}
		}
		rj.Template.Spec.Parallelism, rj.Template.Spec.Completions = ptr.To(count), ptr.To(count)
		rj.Template.Spec.Template.Labels = map[string]string{podGroupLabel: "alpha"}
		// JobSet's defaults, which the operator sets.
		rj.Template.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
		if rj.Template.Spec.Template.Spec.RestartPolicy == "" {
			rj.Template.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
		}
	}
	want.SuccessPolicy = &jobsetv1alpha2.SuccessPolicy{Operator: jobsetv1alpha2.OperatorAll}
	want.StartupPolicy = &jobsetv1alpha2.StartupPolicy{StartupPolicyOrder: jobsetv1alpha2.AnyOrder}
	want.Network = &jobsetv1alpha2.Network{EnableDNSHostnames: ptr.To(true), PublishNotReadyAddresses: ptr.To(true)}
	optest.Eventually(t, "the JobSet is built as expected", func(ctx context.Context) error {
		js := &jobsetv1alpha2.JobSet{}
		if err := optest.Get(ctx, env.Client, key(tj), js); err != nil {
			return err
		}
		stored := &trainer.TrainJob{}
		if err := optest.Get(ctx, env.Client, key(tj), stored); err != nil {
			return err
		}
		// The hash of what the operator applied (writes_test.go checks its use).
		hash := js.Annotations[pipeline.AppliedHashAnnotation]
		if hash == "" {
			return fmt.Errorf("JobSet annotations %v: no %s", js.Annotations, pipeline.AppliedHashAnnotation)
		}
		meta := metav1.ObjectMeta{Name: "alpha", Namespace: ns, Labels: map[string]string{"testingKey": "testingVal"},
			Annotations: map[string]string{"testingKey": "testingVal", pipeline.AppliedHashAnnotation: hash}, OwnerReferences: controllerRef(stored)}
		gotMeta := metav1.ObjectMeta{Name: js.Name, Namespace: js.Namespace, Labels: js.Labels, Annotations: js.Annotations, OwnerReferences: js.OwnerReferences}
		if diff := cmp.Diff(meta, gotMeta); diff != "" {
			return fmt.Errorf("JobSet metadata (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(*want, js.Spec, cmpopts.EquateEmpty()); diff != "" {
			return fmt.Errorf("JobSet spec (-want +got):\n%s", diff)
		}
		return nil
	})

	optest.Eventually(t, "the PodGroup is built as expected", func(ctx context.Context) error {
		pg := &schedulerpluginsv1alpha1.PodGroup{}
		if err := optest.Get(ctx, env.Client, key(tj), pg); err != nil {
			return err
		}
		stored := &trainer.TrainJob{}
		if err := optest.Get(ctx, env.Client, key(tj), stored); err != nil {
			return err
		}
		want := schedulerpluginsv1alpha1.PodGroupSpec{
			MinMember: 102,
			MinResources: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("102"),
				corev1.ResourceMemory: resource.MustParse("408Gi"),
			},
			ScheduleTimeoutSeconds: ptr.To[int32](100),
		}
		if diff := cmp.Diff(want, pg.Spec); diff != "" {
			return fmt.Errorf("PodGroup spec (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(controllerRef(stored), pg.OwnerReferences); diff != "" {
			return fmt.Errorf("PodGroup owner (-want +got):\n%s", diff)
		}
		return nil
	})
}

// TestManagedByMultiKueue: a TrainJob another controller manages is left
// alone: no Build, no JobSet, no snapshot, no status.
func TestManagedByMultiKueue(t *testing.T) {
	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	createTrainingRuntime(t, ns, "torch", torchSpec())
	tj := newTrainJob(ns, "alpha", trainer.TrainingRuntimeKind, "torch")
	tj.Spec.ManagedBy = ptr.To(trainer.MultiKueueController)
	create(t, tj)
	// The barrier: a TrainJob created after alpha, built. The controller
	// queued alpha's creation before its own (one informer, first in first
	// out), so it has taken alpha off the queue; once it is settled, alpha's
	// reconcile has ended too.
	barrier := newTrainJob(ns, "barrier", trainer.TrainingRuntimeKind, "torch")
	create(t, barrier)
	trainJobMatches(t, barrier, "the barrier TrainJob is built", hasConditions(componentsCreated))
	optest.Settled(t)

	// Admission sizes the TrainJob's names with the Build phase on the
	// object being created, which has no resourceVersion yet: not the
	// controller's Build.
	if got := slices.DeleteFunc(optest.Builds(key(tj)), func(rv string) bool { return rv == "" }); len(got) > 0 {
		t.Errorf("the Build phase ran on a MultiKueue TrainJob at resourceVersions %v", got)
	}
	if err := optest.Absent(t.Context(), env.Client, key(tj), &jobsetv1alpha2.JobSet{}); err != nil {
		t.Error(err)
	}
	if err := optest.Absent(t.Context(), env.Client, nsName(ns, "alpha"+snapshot.Suffix), &corev1.ConfigMap{}); err != nil {
		t.Error(err)
	}
	got := &trainer.TrainJob{}
	if err := optest.Get(t.Context(), env.Client, key(tj), got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(trainer.TrainJobStatus{}, got.Status, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("status written (-want +got):\n%s", diff)
	}
}

// TestSuspendedRuntimePatches: while suspended, a runtimePatches update
// reaches the JobSet; the trainer is immutable.
func TestSuspendedRuntimePatches(t *testing.T) {
	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	createTrainingRuntime(t, ns, "torch", torchSpec())
	tj := newTrainJob(ns, "alpha", trainer.TrainingRuntimeKind, "torch")
	tj.Spec.Suspend = ptr.To(true)
	tj.Spec.Trainer = &trainer.Trainer{Image: ptr.To("trainer:v1")}
	create(t, tj)
	jobSetOf(t, tj)

	patch := nodePodPatch(t, "kueue.x-k8s.io/manager", "spec: {nodeSelector: {accelerator: h100}}")
	if err := updateTrainJob(t, tj, func(tj *trainer.TrainJob) { tj.Spec.RuntimePatches = append(tj.Spec.RuntimePatches, patch) }); err != nil {
		t.Fatalf("add a nodeSelector patch: %v", err)
	}
	optest.Eventually(t, "the JobSet gets the nodeSelector", func(ctx context.Context) error {
		js := &jobsetv1alpha2.JobSet{}
		if err := optest.Get(ctx, env.Client, key(tj), js); err != nil {
			return err
		}
		got := findJob(&js.Spec, trainer.Node).Template.Spec.Template.Spec.NodeSelector
		if diff := cmp.Diff(map[string]string{"accelerator": "h100"}, got); diff != "" {
			return fmt.Errorf("node pods' nodeSelector (-want +got):\n%s", diff)
		}
		return nil
	})

	err := updateTrainJob(t, tj, func(tj *trainer.TrainJob) { tj.Spec.Trainer.Image = ptr.To("trainer:v2") })
	wantStatus(t, err, 422, `TrainJob.trainer.kubeflow.org "alpha" is invalid: spec.trainer: Invalid value: field is immutable`)
}

// TestSuspendedRuntimePatchRemoved: the JobSet is created (field manager
// trainer, operation Update); a runtimePatch removed while the TrainJob is
// suspended is removed from it, as the operator moves what it created to
// its apply before applying again.
func TestSuspendedRuntimePatchRemoved(t *testing.T) {
	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	createTrainingRuntime(t, ns, "torch", torchSpec())
	tj := newTrainJob(ns, "alpha", trainer.TrainingRuntimeKind, "torch")
	tj.Spec.Suspend = ptr.To(true)
	tj.Spec.RuntimePatches = []trainer.RuntimePatch{nodePodPatch(t, "kueue.x-k8s.io/manager", "spec: {nodeSelector: {accelerator: h100}}")}
	create(t, tj)
	js := jobSetOf(t, tj)
	if got := findJob(&js.Spec, trainer.Node).Template.Spec.Template.Spec.NodeSelector; got["accelerator"] != "h100" {
		t.Fatalf("node pods' nodeSelector %v, want accelerator h100", got)
	}
	managers := func(js *jobsetv1alpha2.JobSet) []string {
		var out []string
		for _, e := range js.ManagedFields {
			if e.Manager == apply.FieldManager {
				out = append(out, string(e.Operation))
			}
		}
		return out
	}
	if got := managers(js); !slices.Equal(got, []string{"Update"}) {
		t.Fatalf("the JobSet's trainer managed fields entries: %v, want the create's (Update)", got)
	}

	if err := updateTrainJob(t, tj, func(tj *trainer.TrainJob) { tj.Spec.RuntimePatches = nil }); err != nil {
		t.Fatalf("remove the runtimePatch: %v", err)
	}
	optest.Eventually(t, "the JobSet loses the nodeSelector", func(ctx context.Context) error {
		if err := optest.Get(ctx, env.Client, key(tj), js); err != nil {
			return err
		}
		if got := findJob(&js.Spec, trainer.Node).Template.Spec.Template.Spec.NodeSelector; len(got) != 0 {
			return fmt.Errorf("node pods' nodeSelector %v", got)
		}
		return nil
	})
	if got := managers(js); !slices.Equal(got, []string{"Apply"}) {
		t.Errorf("the JobSet's trainer managed fields entries: %v, want the apply's only", got)
	}
}

// TestTerminationGracePeriod: a runtimePatch's terminationGracePeriodSeconds
// reaches the node pods.
func TestTerminationGracePeriod(t *testing.T) {
	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	createTrainingRuntime(t, ns, "torch", torchSpec())
	tj := newTrainJob(ns, "alpha", trainer.TrainingRuntimeKind, "torch")
	tj.Spec.RuntimePatches = []trainer.RuntimePatch{nodePodPatch(t, "test.io/manager", "spec: {terminationGracePeriodSeconds: 300}")}
	create(t, tj)
	js := jobSetOf(t, tj)
	if got := findJob(&js.Spec, trainer.Node).Template.Spec.Template.Spec.TerminationGracePeriodSeconds; ptr.Deref(got, 0) != 300 {
		t.Errorf("node pods' terminationGracePeriodSeconds = %v, want 300", ptr.Deref(got, -1))
	}
}

// torchEnv is what Torch gives the trainer of TrainJob alpha with n nodes.
func torchEnv(n string, extra ...corev1.EnvVar) []corev1.EnvVar {
	return append(extra,
		corev1.EnvVar{Name: "PET_NNODES", Value: n},
		corev1.EnvVar{Name: "PET_NPROC_PER_NODE", Value: "1"},
		corev1.EnvVar{Name: "PET_NODE_RANK", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
			FieldPath: "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}},
		corev1.EnvVar{Name: "PET_MASTER_ADDR", Value: "alpha-node-0-0.alpha"},
		corev1.EnvVar{Name: "PET_MASTER_PORT", Value: "29500"},
	)
}

// TestTorch: the trainer gets the TrainJob's env, then the PET_* env and
// the rendezvous port.
func TestTorch(t *testing.T) {
	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	spec := torchSpec()
	spec.MLPolicy.NumNodes = ptr.To[int32](100)
	createTrainingRuntime(t, ns, "torch", spec)
	tj := newTrainJob(ns, "alpha", trainer.TrainingRuntimeKind, "torch")
	tj.Spec.Trainer = &trainer.Trainer{Env: []corev1.EnvVar{{Name: "TRAIN_JOB", Value: "value"}}}
	create(t, tj)
	js := jobSetOf(t, tj)
	node := container(findJob(&js.Spec, trainer.Node), trainer.Node)
	if diff := cmp.Diff(torchEnv("100", corev1.EnvVar{Name: "TRAIN_JOB", Value: "value"}), node.Env); diff != "" {
		t.Errorf("node env (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]corev1.ContainerPort{{ContainerPort: 29500, Protocol: corev1.ProtocolTCP}}, node.Ports); diff != "" {
		t.Errorf("node ports (-want +got):\n%s", diff)
	}
}

// TestTorchRuntimePatches: pod labels and annotations, a service account
// and an init container's env from runtimePatches land in the JobSet next
// to the Torch env.
func TestTorchRuntimePatches(t *testing.T) {
	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	spec := torchSpec()
	spec.MLPolicy.NumNodes = ptr.To[int32](100)
	pod := &spec.Template.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec
	pod.InitContainers = []corev1.Container{{Name: "init", Image: "init:v1"}}
	createTrainingRuntime(t, ns, "torch", spec)
	tj := newTrainJob(ns, "alpha", trainer.TrainingRuntimeKind, "torch")
	tj.Spec.Trainer = &trainer.Trainer{Env: []corev1.EnvVar{{Name: "TRAIN_JOB", Value: "value"}}}
	tj.Spec.RuntimePatches = []trainer.RuntimePatch{nodePodPatch(t, "test.io/manager", `
metadata:
  labels: {podLabel: labelValue}
  annotations: {podAnnotation: annotationValue}
spec:
  serviceAccountName: override-sa
  initContainers:
    - name: init
      env: [{name: INIT_ENV, value: init}]
`)}
	create(t, tj)
	js := jobSetOf(t, tj)
	rj := findJob(&js.Spec, trainer.Node)
	got := map[string]any{
		"labels":         rj.Template.Spec.Template.Labels,
		"annotations":    rj.Template.Spec.Template.Annotations,
		"serviceAccount": rj.Template.Spec.Template.Spec.ServiceAccountName,
		"initEnv":        container(rj, "init").Env,
		"nodeEnv":        container(rj, trainer.Node).Env,
	}
	want := map[string]any{
		"labels":         map[string]string{"podLabel": "labelValue"},
		"annotations":    map[string]string{"podAnnotation": "annotationValue"},
		"serviceAccount": "override-sa",
		"initEnv":        []corev1.EnvVar{{Name: "INIT_ENV", Value: "init"}},
		"nodeEnv":        torchEnv("100", corev1.EnvVar{Name: "TRAIN_JOB", Value: "value"}),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("node job (-want +got):\n%s", diff)
	}
}

// TestConditions: Suspended, then Resumed, then Complete or Failed from the
// JobSet, with jobsStatus copied, and an event at every transition.
func TestConditions(t *testing.T) {
	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	createTrainingRuntime(t, ns, "torch", torchSpec())
	for _, end := range []struct {
		name    string
		jobSet  metav1.Condition
		wantEnd condition
	}{
		{"complete", jobSetCondition(jobsetv1alpha2.JobSetCompleted, "AllJobsCompleted", "jobset completed successfully"),
			condition{trainer.TrainJobComplete, "True", "AllJobsCompleted", "jobset completed successfully"}},
		{"failed", jobSetCondition(jobsetv1alpha2.JobSetFailed, "FailedJobs", "jobset failed due to one or more job failures"),
			condition{trainer.TrainJobFailed, "True", "FailedJobs", "jobset failed due to one or more job failures"}},
	} {
		t.Run(end.name, func(t *testing.T) {
			tj := newTrainJob(ns, end.name, trainer.TrainingRuntimeKind, "torch")
			tj.Spec.Suspend = ptr.To(true)
			create(t, tj)
			trainJobMatches(t, tj, "Suspended", hasConditions(componentsCreated, suspended))

			resume(t, tj)
			trainJobMatches(t, tj, "Resumed", hasConditions(componentsCreated, resumed))
			jobSetResumed(t, tj)

			status := []jobsetv1alpha2.ReplicatedJobStatus{{Name: trainer.Node, Ready: 1, Succeeded: 2, Failed: 3, Active: 4, Suspended: 5}}
			cluster.SetJobSetStatus(t, env.Client, key(tj), optest.Timeout, func(s *jobsetv1alpha2.JobSetStatus) {
				s.Conditions = append(s.Conditions, end.jobSet)
				s.ReplicatedJobsStatus = status
			})
			got := trainJobMatches(t, tj, end.name, hasConditions(componentsCreated, resumed, end.wantEnd))
			wantJobs := []trainer.JobStatus{{Name: trainer.Node, Ready: ptr.To[int32](1), Succeeded: ptr.To[int32](2),
				Failed: ptr.To[int32](3), Active: ptr.To[int32](4), Suspended: ptr.To[int32](5)}}
			if diff := cmp.Diff(wantJobs, got.Status.JobsStatus); diff != "" {
				t.Errorf("jobsStatus (-want +got):\n%s", diff)
			}
			warning := corev1.EventTypeWarning
			if end.wantEnd.Type == trainer.TrainJobComplete {
				warning = corev1.EventTypeNormal
			}
			wantEvents(t, tj,
				event{corev1.EventTypeNormal, trainer.TrainJobJobsCreatedReason, trainer.TrainJobComponentsCreated, componentsCreated.Message},
				event{corev1.EventTypeNormal, trainer.TrainJobSuspendedReason, trainer.TrainJobSuspended, trainer.TrainJobSuspendedMessage},
				event{corev1.EventTypeNormal, trainer.TrainJobResumedReason, trainer.TrainJobSuspended, trainer.TrainJobResumedMessage},
				event{warning, end.wantEnd.Reason, end.wantEnd.Type, end.wantEnd.Message},
			)
		})
	}
}

// TestJobsStatus: jobsStatus follows the JobSet's replicated jobs.
func TestJobsStatus(t *testing.T) {
	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	createTrainingRuntime(t, ns, "torch", torchSpec())
	tj := newTrainJob(ns, "alpha", trainer.TrainingRuntimeKind, "torch")
	create(t, tj)
	jobSetOf(t, tj)
	for _, step := range []jobsetv1alpha2.ReplicatedJobStatus{
		{Name: trainer.Node, Ready: 1, Active: 1},
		{Name: trainer.Node, Failed: 1},
	} {
		cluster.SetJobSetStatus(t, env.Client, key(tj), optest.Timeout, func(s *jobsetv1alpha2.JobSetStatus) {
			s.ReplicatedJobsStatus = []jobsetv1alpha2.ReplicatedJobStatus{step}
		})
		want := []trainer.JobStatus{{Name: step.Name, Ready: ptr.To(step.Ready), Succeeded: ptr.To(step.Succeeded),
			Failed: ptr.To(step.Failed), Active: ptr.To(step.Active), Suspended: ptr.To(step.Suspended)}}
		trainJobMatches(t, tj, "jobsStatus follows the JobSet", func(got *trainer.TrainJob) error {
			if diff := cmp.Diff(want, got.Status.JobsStatus); diff != "" {
				return fmt.Errorf("jobsStatus (-want +got):\n%s", diff)
			}
			return nil
		})
	}
}

// TestActiveDeadline covers activeDeadlineSeconds: a job past it fails
// (DeadlineExceeded) and loses its JobSet; a suspended job's clock is
// stopped, and restarts at resume.
func TestActiveDeadline(t *testing.T) {
	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	createTrainingRuntime(t, ns, "torch", torchSpec())
	deadlineExceeded := condition{trainer.TrainJobFailed, "True", trainer.TrainJobDeadlineExceededReason, trainer.TrainJobDeadlineExceededMessage}
	notFailed := func(ctx context.Context, tj *trainer.TrainJob) error {
		got := &trainer.TrainJob{}
		if err := optest.Get(ctx, env.Client, key(tj), got); err != nil {
			return err
		}
		if meta.IsStatusConditionTrue(got.Status.Conditions, trainer.TrainJobFailed) {
			return fmt.Errorf("TrainJob failed: %+v", conditionsOf(got))
		}
		return nil
	}

	t.Run("exceeded", func(t *testing.T) {
		tj := newTrainJob(ns, "exceeded", trainer.TrainingRuntimeKind, "torch")
		tj.Spec.ActiveDeadlineSeconds = 1
		create(t, tj)
		// Under load the first reconcile can come after the second has passed: the TrainJob then fails
		// without its JobSet ever being built, which is as right as building it and deleting it.
		built, never := hasConditions(componentsCreated, deadlineExceeded), hasConditions(deadlineExceeded)
		trainJobMatches(t, tj, "DeadlineExceeded", func(tj *trainer.TrainJob) error {
			if err := built(tj); err != nil && never(tj) != nil {
				return err
			}
			return nil
		})
		optest.Eventually(t, "the JobSet is deleted", func(ctx context.Context) error {
			return optest.Absent(ctx, env.Client, key(tj), &jobsetv1alpha2.JobSet{})
		})
		// The barrier: the operator's cache has the JobSet's deletion, and its reconcile has ended.
		settle(t, ns)
		if err := optest.Absent(t.Context(), env.Client, key(tj), &jobsetv1alpha2.JobSet{}); err != nil {
			t.Errorf("a failed TrainJob's JobSet is built again: %v", err)
		}
	})
	t.Run("not yet", func(t *testing.T) {
		tj := newTrainJob(ns, "not-yet", trainer.TrainingRuntimeKind, "torch")
		tj.Spec.ActiveDeadlineSeconds = 3600
		create(t, tj)
		jobSetOf(t, tj)
		settle(t, ns)
		if err := notFailed(t.Context(), tj); err != nil {
			t.Errorf("before the deadline: %v", err)
		}
	})
	// suspendedPastDeadline is a suspended TrainJob that stays suspended
	// past its deadline without failing.
	suspendedPastDeadline := func(t *testing.T, name string, deadline int64) *trainer.TrainJob {
		tj := newTrainJob(ns, name, trainer.TrainingRuntimeKind, "torch")
		tj.Spec.ActiveDeadlineSeconds = deadline
		tj.Spec.Suspend = ptr.To(true)
		create(t, tj)
		got := trainJobMatches(t, tj, "Suspended", hasConditions(componentsCreated, suspended))
		// The barrier: once the deadline has passed since the creation, a label the operator does not read
		// makes it reconcile the TrainJob again, and that reconcile has ended.
		optest.Eventually(t, "the deadline has passed since the creation", func(context.Context) error {
			if passed := time.Since(got.CreationTimestamp.Time); passed <= time.Duration(deadline+1)*time.Second {
				return fmt.Errorf("%v since the creation", passed.Round(time.Millisecond))
			}
			return nil
		})
		touch(t, tj, "past-deadline")
		optest.Settled(t)
		if err := notFailed(t.Context(), tj); err != nil {
			t.Errorf("suspended past its deadline: %v", err)
		}
		return tj
	}
	t.Run("suspended", func(t *testing.T) { suspendedPastDeadline(t, "suspended", 1) })
	t.Run("resumed", func(t *testing.T) {
		tj := suspendedPastDeadline(t, "resumed", 2)
		resume(t, tj)
		got := trainJobMatches(t, tj, "DeadlineExceeded after the resume", hasConditions(componentsCreated, resumed, deadlineExceeded))
		resumedAt := meta.FindStatusCondition(got.Status.Conditions, trainer.TrainJobSuspended).LastTransitionTime
		failedAt := meta.FindStatusCondition(got.Status.Conditions, trainer.TrainJobFailed).LastTransitionTime
		if failedAt.Sub(resumedAt.Time).Seconds() < 2 {
			t.Errorf("failed at %v, less than 2s after the resume at %v", failedAt, resumedAt)
		}
		optest.Eventually(t, "the JobSet is deleted", func(ctx context.Context) error {
			return optest.Absent(ctx, env.Client, key(tj), &jobsetv1alpha2.JobSet{})
		})
	})
}

// wantStatus checks an API error by status code and message.
func wantStatus(t testing.TB, err error, code int32, message string) {
	t.Helper()
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		t.Fatalf("error %v, want an API error %d %q", err, code, message)
	}
	got := struct {
		Code    int32
		Message string
	}{status.Status().Code, status.Status().Message}
	want := struct {
		Code    int32
		Message string
	}{code, message}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("API error (-want +got):\n%s", diff)
	}
}
