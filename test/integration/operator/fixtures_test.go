package operator_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	"sigs.k8s.io/yaml"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/integration/operator/internal/optest"
)

// replicatedJob is a replicated job of a runtime template: a job named name
// whose pods run one container named container, labelled with ancestor
// when it is not empty.
func replicatedJob(name, ancestor, container string) jobsetv1alpha2.ReplicatedJob {
	rj := jobsetv1alpha2.ReplicatedJob{Name: name, Replicas: 1}
	if ancestor != "" {
		rj.Template.Labels = map[string]string{trainer.AncestorLabel: ancestor}
	}
	rj.Template.Spec.Template.Spec = corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		Containers: []corev1.Container{{
			Name:  container,
			Image: "runtime-" + name + ":v1",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("1"),
				corev1.ResourceMemory: resource.MustParse("4Gi"),
			}},
		}},
	}
	return rj
}

// initializerJob is an initializer step mounting the shared volume.
func initializerJob(name string) jobsetv1alpha2.ReplicatedJob {
	rj := replicatedJob(name, name, name)
	c := &rj.Template.Spec.Template.Spec.Containers[0]
	c.VolumeMounts = []corev1.VolumeMount{{Name: trainer.InitializerVolume, MountPath: "/workspace"}}
	return rj
}

// runtimeSpec is a runtime template with the given jobs and ML policy.
func runtimeSpec(ml *trainer.MLPolicy, jobs ...jobsetv1alpha2.ReplicatedJob) trainer.TrainingRuntimeSpec {
	spec := trainer.TrainingRuntimeSpec{MLPolicy: ml}
	spec.Template.Spec.ReplicatedJobs = jobs
	return spec
}

// torchSpec is a one-job torch runtime.
func torchSpec() trainer.TrainingRuntimeSpec {
	return runtimeSpec(&trainer.MLPolicy{NumNodes: ptr.To[int32](1), MLPolicySource: trainer.MLPolicySource{Torch: &trainer.TorchMLPolicySource{}}},
		replicatedJob(trainer.Node, trainer.AncestorTrainer, trainer.Node))
}

// createTrainingRuntime creates a TrainingRuntime in ns and returns it as
// the API server stored it (defaults applied).
func createTrainingRuntime(t testing.TB, ns, name string, spec trainer.TrainingRuntimeSpec) *trainer.TrainingRuntime {
	t.Helper()
	rt := &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
	if err := env.Client.Create(t.Context(), rt); err != nil {
		t.Fatalf("create TrainingRuntime %s: %v", name, err)
	}
	return rt
}

// createClusterTrainingRuntime creates a ClusterTrainingRuntime with a
// unique name (they are cluster-scoped) and deletes it after the test.
func createClusterTrainingRuntime(t testing.TB, prefix string, spec trainer.TrainingRuntimeSpec, labels map[string]string) *trainer.ClusterTrainingRuntime {
	t.Helper()
	rt := &trainer.ClusterTrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: prefix + "-" + rand.String(5), Labels: labels}, Spec: spec}
	if err := env.Client.Create(t.Context(), rt); err != nil {
		t.Fatalf("create ClusterTrainingRuntime %s: %v", rt.Name, err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), rt) })
	return rt
}

// newTrainJob is a TrainJob referencing a runtime by kind and name.
func newTrainJob(ns, name, kind, runtime string) *trainer.TrainJob {
	return &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{
			Name: runtime, APIGroup: ptr.To(trainer.GroupVersion.Group), Kind: ptr.To(kind),
		}},
	}
}

func create(t testing.TB, obj client.Object) {
	t.Helper()
	if err := env.Client.Create(t.Context(), obj); err != nil {
		t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
}

func key(obj client.Object) client.ObjectKey { return client.ObjectKeyFromObject(obj) }

// jobSetOf waits for the TrainJob's JobSet and returns it.
func jobSetOf(t testing.TB, tj *trainer.TrainJob) *jobsetv1alpha2.JobSet {
	t.Helper()
	js := &jobsetv1alpha2.JobSet{}
	optest.Eventually(t, "the TrainJob's JobSet exists", func(ctx context.Context) error {
		return optest.Get(ctx, env.Client, key(tj), js)
	})
	return js
}

// trainJobMatches waits until the stored TrainJob satisfies check.
func trainJobMatches(t testing.TB, tj *trainer.TrainJob, what string, check func(*trainer.TrainJob) error) *trainer.TrainJob {
	t.Helper()
	got := &trainer.TrainJob{}
	optest.Eventually(t, what, func(ctx context.Context) error {
		if err := optest.Get(ctx, env.Client, key(tj), got); err != nil {
			return err
		}
		return check(got)
	})
	return got
}

// condition is a condition as the tests compare them: type, status,
// reason and message.
type condition struct{ Type, Status, Reason, Message string }

func conditionsOf(tj *trainer.TrainJob) []condition {
	var out []condition
	for _, c := range tj.Status.Conditions {
		out = append(out, condition{c.Type, string(c.Status), c.Reason, c.Message})
	}
	slices.SortFunc(out, byType)
	return out
}

func byType(a, b condition) int { return strings.Compare(a.Type, b.Type) }

// hasConditions is a check that the TrainJob has exactly these conditions.
func hasConditions(want ...condition) func(*trainer.TrainJob) error {
	slices.SortFunc(want, byType)
	return func(tj *trainer.TrainJob) error {
		if got := conditionsOf(tj); !slices.Equal(got, want) {
			return fmt.Errorf("conditions\n got %+v\nwant %+v", got, want)
		}
		return nil
	}
}

var (
	componentsCreated = condition{trainer.TrainJobComponentsCreated, "True", trainer.TrainJobJobsCreatedReason, "TrainJob components are created"}
	suspended         = condition{trainer.TrainJobSuspended, "True", trainer.TrainJobSuspendedReason, trainer.TrainJobSuspendedMessage}
	resumed           = condition{trainer.TrainJobSuspended, "False", trainer.TrainJobResumedReason, trainer.TrainJobResumedMessage}
)

// decode decodes a YAML fixture strictly.
func decode[T any](t testing.TB, doc string, obj *T) *T {
	t.Helper()
	if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
		t.Fatalf("fixture: %v\n%s", err, doc)
	}
	return obj
}

// trainJobYAML is a TrainJob fixture in namespace ns.
func trainJobYAML(t testing.TB, ns, doc string) *trainer.TrainJob {
	t.Helper()
	tj := decode(t, doc, &trainer.TrainJob{})
	tj.Namespace = ns
	return tj
}

func nsName(ns, name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }

// event is an event as the tests compare them.
type event struct{ Type, Reason, Action, Note string }

// wantEvents waits until every wanted event has been recorded on tj.
func wantEvents(t testing.TB, tj *trainer.TrainJob, want ...event) {
	t.Helper()
	optest.Eventually(t, "events recorded", func(ctx context.Context) error {
		got, err := eventsOf(ctx, tj)
		if err != nil {
			return err
		}
		var missing []event
		for _, w := range want {
			if !slices.Contains(got, w) {
				missing = append(missing, w)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("missing events %+v among %+v", missing, got)
		}
		return nil
	})
}

// eventsOf lists the events.k8s.io events regarding tj.
func eventsOf(ctx context.Context, tj *trainer.TrainJob) ([]event, error) {
	var list eventsv1.EventList
	if err := env.Client.List(ctx, &list, client.InNamespace(tj.Namespace)); err != nil {
		return nil, err
	}
	var out []event
	for _, e := range list.Items {
		if e.Regarding.Kind == trainer.TrainJobKind && e.Regarding.Name == tj.Name {
			out = append(out, event{e.Type, e.Reason, e.Action, e.Note})
		}
	}
	return out, nil
}

// jobSetCondition is a JobSet condition True since now.
func jobSetCondition(typ jobsetv1alpha2.JobSetConditionType, reason, message string) metav1.Condition {
	return metav1.Condition{Type: string(typ), Status: metav1.ConditionTrue, Reason: reason, Message: message, LastTransitionTime: metav1.Now()}
}

// updateTrainJob reads tj, edits it and writes it back, again when the
// operator wrote its status in between (a conflict); it returns the write's
// outcome.
func updateTrainJob(t testing.TB, tj *trainer.TrainJob, edit func(*trainer.TrainJob)) error {
	t.Helper()
	var err error
	optest.Eventually(t, "update the TrainJob", func(ctx context.Context) error {
		if err := optest.Get(ctx, env.Client, key(tj), tj); err != nil {
			return err
		}
		edit(tj)
		if err = env.Client.Update(ctx, tj); apierrors.IsConflict(err) {
			return err
		}
		return nil
	})
	return err
}

// resume unsuspends a TrainJob.
func resume(t testing.TB, tj *trainer.TrainJob) {
	t.Helper()
	if err := updateTrainJob(t, tj, func(tj *trainer.TrainJob) { tj.Spec.Suspend = ptr.To(false) }); err != nil {
		t.Fatalf("resume: %v", err)
	}
}

// nodePodPatch is a runtimePatch of manager on the pod template of the
// `node` job, given as YAML.
func nodePodPatch(t testing.TB, manager, podTemplate string) trainer.RuntimePatch {
	t.Helper()
	pod := decode(t, podTemplate, &trainer.PodTemplatePatch{})
	return trainer.RuntimePatch{Manager: manager, TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{
		Template: &trainer.JobSetTemplatePatch{Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: []trainer.ReplicatedJobPatch{{
			Name: trainer.Node, Template: &trainer.JobTemplatePatch{Spec: &trainer.JobSpecPatch{Template: pod}},
		}}}},
	}}
}

// jobSetResumed waits until the TrainJob's JobSet is not suspended.
func jobSetResumed(t testing.TB, tj *trainer.TrainJob) {
	t.Helper()
	optest.Eventually(t, "the JobSet is resumed", func(ctx context.Context) error {
		js := &jobsetv1alpha2.JobSet{}
		if err := optest.Get(ctx, env.Client, key(tj), js); err != nil {
			return err
		}
		if ptr.Deref(js.Spec.Suspend, true) {
			return errors.New("the JobSet is still suspended")
		}
		return nil
	})
}
