package operator_test

// The controller contract: the operator touches only what a TrainJob
// controls (by UID), puts back what others changed, lets deletion finish,
// and its conditions tell the truth.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	schedulerpluginsv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	volcanov1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator/controller"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/plugins/mpi"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/snapshot"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/integration/operator/internal/optest"
)

// notControlled waits until tj reports, in ComponentsCreated, that a child's
// name is held by an object it does not control, with a message that starts
// with prefix, and returns the TrainJob.
func notControlled(t *testing.T, tj *trainer.TrainJob, prefix string) *trainer.TrainJob {
	t.Helper()
	return trainJobMatches(t, tj, "ComponentsCreated=False "+controller.ComponentNotControlledReason, func(tj *trainer.TrainJob) error {
		c := meta.FindStatusCondition(tj.Status.Conditions, trainer.TrainJobComponentsCreated)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != controller.ComponentNotControlledReason || !strings.HasPrefix(c.Message, prefix) {
			return fmt.Errorf("conditions %+v, want ComponentsCreated False %s starting %q", conditionsOf(tj), controller.ComponentNotControlledReason, prefix)
		}
		return nil
	})
}

// unchanged fails the test when obj was written since it was read.
func unchanged(t *testing.T, obj client.Object) {
	t.Helper()
	got := obj.DeepCopyObject().(client.Object)
	if err := optest.Get(t.Context(), env.Client, key(obj), got); err != nil {
		t.Fatal(err)
	}
	if got.GetResourceVersion() != obj.GetResourceVersion() {
		t.Errorf("%T %s was written: resourceVersion %s → %s, owners %v", obj, obj.GetName(), obj.GetResourceVersion(), got.GetResourceVersion(), got.GetOwnerReferences())
	}
}

// deleteSeen deletes objs and waits until the operator's cache no longer
// has them, so that what follows meets an operator that knows they are gone.
// Gone is by UID: a controller may already have created another object of
// the same name (an OptimizationJob its trial in the name a foreign TrainJob
// held), which the cache may show without ever showing the name free. An
// object given without its UID is read first.
func deleteSeen(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, obj := range objs {
		if obj.GetUID() == "" {
			if err := env.Client.Get(t.Context(), key(obj), obj); err != nil {
				t.Fatal(err)
			}
		}
		if err := env.Client.Delete(t.Context(), obj); err != nil {
			t.Fatal(err)
		}
		optest.Eventually(t, "the operator's cache sees the deletion", func(ctx context.Context) error {
			got := obj.DeepCopyObject().(client.Object)
			switch err := op.Cache().Get(ctx, key(obj), got); {
			case apierrors.IsNotFound(err):
				return nil
			case err != nil:
				return err
			case got.GetUID() != obj.GetUID():
				return nil
			}
			return fmt.Errorf("%T %s (UID %s) is still in the cache", obj, key(obj), obj.GetUID())
		})
	}
}

// barrier creates a TrainJob in ns and waits until the operator has built
// it, then until its TrainJob controller is settled: the reconciles of what
// happened before in ns were queued first (its watch delivers events in
// order), and a worker may still be running one of them when the barrier is
// built; settled, they have all ended.
func barrier(t *testing.T, ns, runtime string) {
	t.Helper()
	tj := newTrainJob(ns, "barrier-"+strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")), trainer.TrainingRuntimeKind, runtime)
	tj.Name = tj.Name[:min(len(tj.Name), 40)]
	create(t, tj)
	trainJobMatches(t, tj, "the barrier TrainJob is built", func(tj *trainer.TrainJob) error {
		if !meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobComponentsCreated) {
			return fmt.Errorf("conditions %+v", conditionsOf(tj))
		}
		return nil
	})
	optest.Settled(t)
}

// TestNotControlledJobSet: a user's JobSet of the TrainJob's name (no
// controller, Completed) is not adopted, written or read: the TrainJob says
// so and takes none of its status; once the user deletes it, the TrainJob
// is built.
func TestNotControlledJobSet(t *testing.T) {
	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	createTrainingRuntime(t, ns, "torch", torchSpec())
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alpha", Labels: map[string]string{"team": "theirs"}}}
	js.Spec.Suspend = ptr.To(true)
	js.Spec.ReplicatedJobs = []jobsetv1alpha2.ReplicatedJob{replicatedJob("theirs", "", "theirs")}
	create(t, js)
	js.Status.Conditions = []metav1.Condition{jobSetCondition(jobsetv1alpha2.JobSetCompleted, "AllJobsCompleted", "theirs completed")}
	if err := env.Client.Status().Update(t.Context(), js); err != nil {
		t.Fatal(err)
	}

	tj := newTrainJob(ns, "alpha", trainer.TrainingRuntimeKind, "torch")
	create(t, tj)
	want := fmt.Sprintf(`JobSet %s/alpha exists and is not controlled by TrainJob "alpha": it has no controller`, ns)
	got := notControlled(t, tj, want)
	if meta.FindStatusCondition(got.Status.Conditions, trainer.TrainJobComplete) != nil || got.Status.JobsStatus != nil {
		t.Errorf("the TrainJob took the user's JobSet's status: conditions %+v, jobsStatus %+v", conditionsOf(got), got.Status.JobsStatus)
	}
	c := meta.FindStatusCondition(got.Status.Conditions, trainer.TrainJobComponentsCreated)
	wantEvents(t, tj, event{corev1.EventTypeWarning, controller.ComponentNotControlledReason, trainer.TrainJobComponentsCreated, c.Message})
	unchanged(t, js)
	// The snapshot was taken (it comes first), the user's JobSet was not.
	snap := &corev1.ConfigMap{}
	if err := optest.Get(t.Context(), env.Client, nsName(ns, "alpha"+snapshot.Suffix), snap); err != nil || !metav1.IsControlledBy(snap, got) {
		t.Errorf("snapshot: %v, owners %v", err, snap.OwnerReferences)
	}

	if err := env.Client.Delete(t.Context(), js, client.Preconditions{UID: ptr.To(js.UID)}); err != nil {
		t.Fatal(err)
	}
	trainJobMatches(t, tj, "built once the name is free", hasConditions(componentsCreated))
	built := jobSetOf(t, got)
	if !metav1.IsControlledBy(built, got) || built.UID == js.UID {
		t.Errorf("JobSet %s (uid %s) owners %v, want a new one controlled by the TrainJob", built.Name, built.UID, built.OwnerReferences)
	}
}

// TestEarlierTrainJobsChildren: the children of a deleted TrainJob of the
// same name that the garbage collector has not removed yet are not the new
// TrainJob's: neither its snapshot (which would pin another runtime) nor
// its JobSet is used, and the new TrainJob is built once they are gone.
func TestEarlierTrainJobsChildren(t *testing.T) {
	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	createTrainingRuntime(t, ns, "torch", torchSpec())
	earlier := []metav1.OwnerReference{{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind, Name: "alpha",
		UID: "0e5e5e5e-0000-4000-8000-000000000001", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
	snapshot := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alpha" + snapshot.Suffix,
		Labels: map[string]string{pipeline.TrainJobNameLabel: "alpha"}, OwnerReferences: earlier},
		Data: map[string]string{snapshot.Key: "kind: TrainingRuntime\napiVersion: trainer.kubeflow.org/v1alpha1\nmetadata: {name: torch}\n"}}
	create(t, snapshot)
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alpha", OwnerReferences: earlier}}
	js.Spec.ReplicatedJobs = []jobsetv1alpha2.ReplicatedJob{replicatedJob("old", "", "old")}
	create(t, js)

	tj := newTrainJob(ns, "alpha", trainer.TrainingRuntimeKind, "torch")
	create(t, tj)
	notControlled(t, tj, fmt.Sprintf(`ConfigMap %s/alpha-runtime-snapshot exists and is not controlled by TrainJob "alpha": its controller is an earlier TrainJob "alpha"`, ns))
	if err := env.Client.Delete(t.Context(), snapshot); err != nil {
		t.Fatal(err)
	}
	notControlled(t, tj, fmt.Sprintf(`JobSet %s/alpha exists and is not controlled by TrainJob "alpha": its controller is an earlier TrainJob "alpha"`, ns))
	unchanged(t, js)
	if err := env.Client.Delete(t.Context(), js); err != nil {
		t.Fatal(err)
	}
	trainJobMatches(t, tj, "built once the names are free", hasConditions(componentsCreated))
}

// TestNotControlledSSHSecret: an MPI TrainJob whose SSH Secret name is held
// by a Secret it does not control does not mount someone else's key.
func TestNotControlledSSHSecret(t *testing.T) {
	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	spec := runtimeSpec(&trainer.MLPolicy{NumNodes: ptr.To[int32](1), MLPolicySource: trainer.MLPolicySource{MPI: &trainer.MPIMLPolicySource{}}},
		replicatedJob(trainer.Launcher, trainer.AncestorTrainer, trainer.Node), replicatedJob(trainer.Node, "", trainer.Node))
	createTrainingRuntime(t, ns, "mpi", spec)
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alpha" + mpi.SSHAuthSecretSuffix},
		Type:       corev1.SecretTypeSSHAuth,
		Data:       map[string][]byte{"ssh-privatekey": []byte("key of another controller")},
	}
	create(t, secret)
	tj := newTrainJob(ns, "alpha", trainer.TrainingRuntimeKind, "mpi")
	create(t, tj)
	notControlled(t, tj, fmt.Sprintf(`Secret %s/alpha-mpi-ssh-auth exists and is not controlled by TrainJob "alpha": it has no controller`, ns))
	if err := optest.Absent(t.Context(), env.Client, key(tj), &jobsetv1alpha2.JobSet{}); err != nil {
		t.Errorf("the JobSet was built with someone else's key: %v", err)
	}
	unchanged(t, secret)
}

// TestNotControlledPodGroup: a user's PodGroup of the TrainJob's name (no
// controller), of either gang scheduler, is neither taken as the TrainJob's
// nor written: the TrainJob says so, as for a user's JobSet, and builds no
// JobSet whose pods would wait in someone else's gang; once the user deletes
// it, the TrainJob is built with its own.
func TestNotControlledPodGroup(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy trainer.PodGroupPolicySource
		theirs client.Object
	}{
		{"coscheduling", trainer.PodGroupPolicySource{Coscheduling: &trainer.CoschedulingPodGroupPolicySource{}},
			&schedulerpluginsv1alpha1.PodGroup{Spec: schedulerpluginsv1alpha1.PodGroupSpec{MinMember: 7}}},
		{"volcano", trainer.PodGroupPolicySource{Volcano: &trainer.VolcanoPodGroupPolicySource{}},
			&volcanov1beta1.PodGroup{Spec: volcanov1beta1.PodGroupSpec{MinMember: 7}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := cluster.NewNamespace(t, env.Client, "test-", nil)
			spec := torchSpec()
			spec.PodGroupPolicy = &trainer.PodGroupPolicy{PodGroupPolicySource: tc.policy}
			createTrainingRuntime(t, ns, "gang", spec)
			theirs := tc.theirs
			theirs.SetNamespace(ns)
			theirs.SetName("alpha")
			create(t, theirs)

			tj := newTrainJob(ns, "alpha", trainer.TrainingRuntimeKind, "gang")
			create(t, tj)
			got := notControlled(t, tj, fmt.Sprintf(`PodGroup %s/alpha exists and is not controlled by TrainJob "alpha": it has no controller`, ns))
			c := meta.FindStatusCondition(got.Status.Conditions, trainer.TrainJobComponentsCreated)
			wantEvents(t, tj, event{corev1.EventTypeWarning, controller.ComponentNotControlledReason, trainer.TrainJobComponentsCreated, c.Message})
			if err := optest.Absent(t.Context(), env.Client, key(tj), &jobsetv1alpha2.JobSet{}); err != nil {
				t.Errorf("the JobSet was built into someone else's PodGroup: %v", err)
			}
			unchanged(t, theirs)

			if err := env.Client.Delete(t.Context(), theirs, client.Preconditions{UID: ptr.To(theirs.GetUID())}); err != nil {
				t.Fatal(err)
			}
			built := trainJobMatches(t, tj, "built once the name is free", hasConditions(componentsCreated))
			ours := theirs.DeepCopyObject().(client.Object)
			optest.Eventually(t, "the TrainJob's own PodGroup", func(ctx context.Context) error {
				if err := optest.Get(ctx, env.Client, key(theirs), ours); err != nil {
					return err
				}
				if !metav1.IsControlledBy(ours, built) {
					return fmt.Errorf("PodGroup owners %v", ours.GetOwnerReferences())
				}
				return nil
			})
		})
	}
}

// TestDriftPutBack: a JobSet resumed behind its suspended TrainJob's back (a
// quota bypass under Kueue) is suspended again; a label the operator set
// and an edited MPI hostfile are put back.
func TestDriftPutBack(t *testing.T) {
	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	spec := runtimeSpec(&trainer.MLPolicy{NumNodes: ptr.To[int32](2), MLPolicySource: trainer.MLPolicySource{MPI: &trainer.MPIMLPolicySource{}}},
		replicatedJob(trainer.Launcher, trainer.AncestorTrainer, trainer.Node), replicatedJob(trainer.Node, "", trainer.Node))
	spec.Template.Labels = map[string]string{"team": "ml"}
	createTrainingRuntime(t, ns, "mpi", spec)
	tj := newTrainJob(ns, "alpha", trainer.TrainingRuntimeKind, "mpi")
	tj.Spec.Suspend = ptr.To(true)
	create(t, tj)
	trainJobMatches(t, tj, "built suspended", hasConditions(componentsCreated, suspended))
	js := jobSetOf(t, tj)
	hostfile := &corev1.ConfigMap{}
	optest.Eventually(t, "the hostfile exists", func(ctx context.Context) error {
		return optest.Get(ctx, env.Client, nsName(ns, "alpha"+mpi.HostfileConfigMapSuffix), hostfile)
	})
	wantHostfile := hostfile.Data

	patch := []byte(`{"metadata":{"labels":{"team":null}},"spec":{"suspend":false}}`)
	if err := env.Client.Patch(t.Context(), js, client.RawPatch(types.MergePatchType, patch), client.FieldOwner("someone")); err != nil {
		t.Fatal(err)
	}
	hostfile.Data = map[string]string{"hostfile": "evil-host slots=8\n"}
	if err := env.Client.Update(t.Context(), hostfile, client.FieldOwner("someone")); err != nil {
		t.Fatal(err)
	}
	optest.Eventually(t, "the JobSet is suspended and labelled again", func(ctx context.Context) error {
		got := &jobsetv1alpha2.JobSet{}
		if err := optest.Get(ctx, env.Client, key(js), got); err != nil {
			return err
		}
		if !ptr.Deref(got.Spec.Suspend, false) || got.Labels["team"] != "ml" {
			return fmt.Errorf("suspend %v, labels %v", ptr.Deref(got.Spec.Suspend, false), got.Labels)
		}
		return nil
	})
	optest.Eventually(t, "the hostfile is put back", func(ctx context.Context) error {
		got := &corev1.ConfigMap{}
		if err := optest.Get(ctx, env.Client, key(hostfile), got); err != nil {
			return err
		}
		if !equality.Semantic.DeepEqual(got.Data, wantHostfile) {
			return fmt.Errorf("hostfile %v, want %v", got.Data, wantHostfile)
		}
		return nil
	})
	trainJobMatches(t, tj, "still suspended and built", hasConditions(componentsCreated, suspended))
}

// TestDeletionCompletes: a TrainJob being deleted (held by a finalizer) is
// not rebuilt when its children go, and the finalizer's removal is admitted
// although its runtime and snapshot are gone.
func TestDeletionCompletes(t *testing.T) {
	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	rt := createTrainingRuntime(t, ns, "torch", torchSpec())
	tj := newTrainJob(ns, "alpha", trainer.TrainingRuntimeKind, "torch")
	tj.Finalizers = []string{"example.com/hold"}
	tj.Spec.Suspend = ptr.To(true)
	create(t, tj)
	trainJobMatches(t, tj, "built", hasConditions(componentsCreated, suspended))
	js := jobSetOf(t, tj)
	if err := env.Client.Delete(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	trainJobMatches(t, tj, "being deleted", func(tj *trainer.TrainJob) error {
		if tj.DeletionTimestamp.IsZero() {
			return errors.New("no deletionTimestamp")
		}
		return nil
	})
	snapshot := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alpha" + snapshot.Suffix}}
	for _, obj := range []client.Object{js, snapshot} {
		if err := env.Client.Delete(t.Context(), obj); err != nil {
			t.Fatal(err)
		}
	}
	createTrainingRuntime(t, ns, "barrier", torchSpec())
	barrier(t, ns, "barrier")
	for _, obj := range []client.Object{&jobsetv1alpha2.JobSet{}, &corev1.ConfigMap{}} {
		name := key(js)
		if _, ok := obj.(*corev1.ConfigMap); ok {
			name = key(snapshot)
		}
		if err := optest.Absent(t.Context(), env.Client, name, obj); err != nil {
			t.Errorf("rebuilt under a TrainJob being deleted: %v", err)
		}
	}
	deleteSeen(t, rt)
	if err := updateTrainJob(t, tj, func(tj *trainer.TrainJob) { tj.Finalizers = nil }); err != nil {
		t.Fatalf("removing the finalizer of a TrainJob being deleted: %v", err)
	}
	optest.Eventually(t, "the TrainJob is gone", func(ctx context.Context) error {
		return optest.Absent(ctx, env.Client, key(tj), &trainer.TrainJob{})
	})
}

// TestMetadataUpdateWithoutRuntime: a label added to a TrainJob whose
// runtime and snapshot are gone is admitted (the spec is unchanged).
func TestMetadataUpdateWithoutRuntime(t *testing.T) {
	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	rt := createTrainingRuntime(t, ns, "torch", torchSpec())
	tj := newTrainJob(ns, "alpha", trainer.TrainingRuntimeKind, "torch")
	tj.Spec.Suspend = ptr.To(true)
	create(t, tj)
	trainJobMatches(t, tj, "built", hasConditions(componentsCreated, suspended))
	snapshot := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alpha" + snapshot.Suffix}}
	deleteSeen(t, rt, snapshot)
	if err := updateTrainJob(t, tj, func(tj *trainer.TrainJob) { tj.Labels = map[string]string{"team": "ml"} }); err != nil {
		t.Fatalf("labelling a TrainJob whose runtime is gone: %v", err)
	}
}

// refuseJobSetUpdates makes the API server refuse, in ns, the JobSet
// updates that expression (CEL, on object and oldObject) refuses, with
// message, once it refuses to set spec.suspend to suspend on a JobSet
// where it is not. Deleting the binding it returns ends it.
func refuseJobSetUpdates(t *testing.T, ns, expression, message string, suspend bool) client.Object {
	t.Helper()
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "refuse-jobset-updates-"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"jobset.x-k8s.io"}, APIVersions: []string{"*"}, Resources: []string{"jobsets"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: expression, Message: message}},
		},
	}
	create(t, policy)
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), policy) })
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "refuse-jobset-updates-"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{corev1.LabelMetadataName: ns}}},
		},
	}
	create(t, binding)
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), binding) })
	// The policy is in force once an update it refuses is refused.
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"}}
	js.Spec.Suspend = ptr.To(!suspend)
	js.Spec.ReplicatedJobs = []jobsetv1alpha2.ReplicatedJob{replicatedJob("probe", "", "probe")}
	create(t, js)
	probe := client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"spec":{"suspend":%t}}`, suspend)))
	optest.Eventually(t, "the policy refuses the probe's update", func(ctx context.Context) error {
		if err := env.Client.Patch(ctx, js, probe, client.DryRunAll); err == nil || !strings.Contains(err.Error(), message) {
			return fmt.Errorf("the probe's update gave %v", err)
		}
		return nil
	})
	return binding
}

// creationFailed waits for the Warning event of a write of tj's children
// that the API server refused with a message containing cause, and returns
// the TrainJob as it was then: the status of that reconcile was written
// before its events.
func creationFailed(t *testing.T, tj *trainer.TrainJob, cause string) *trainer.TrainJob {
	t.Helper()
	optest.Eventually(t, "a Warning event says the write failed", func(ctx context.Context) error {
		events, err := eventsOf(ctx, tj)
		if err != nil {
			return err
		}
		for _, e := range events {
			if e.Type == corev1.EventTypeWarning && e.Reason == controller.ReasonResourcesCreationFailed && strings.Contains(e.Note, cause) {
				return nil
			}
		}
		return fmt.Errorf("no %s event with %q among %+v", controller.ReasonResourcesCreationFailed, cause, events)
	})
	got := &trainer.TrainJob{}
	if err := optest.Get(t.Context(), env.Client, key(tj), got); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestSuspendedOnlyWhenJobSetIs: a TrainJob suspended while its JobSet
// cannot be suspended (an admission policy refuses it) does not claim to be
// Suspended; its components stay created (they exist, and run), and a
// Warning event says what failed; once the JobSet can be suspended, it is.
func TestSuspendedOnlyWhenJobSetIs(t *testing.T) {
	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	createTrainingRuntime(t, ns, "torch", torchSpec())
	tj := newTrainJob(ns, "alpha", trainer.TrainingRuntimeKind, "torch")
	create(t, tj)
	trainJobMatches(t, tj, "built", hasConditions(componentsCreated))
	jobSetOf(t, tj)
	const refused = "this test refuses to suspend JobSets"
	binding := refuseJobSetUpdates(t, ns, "!has(object.spec.suspend) || !object.spec.suspend || (has(oldObject.spec.suspend) && oldObject.spec.suspend)",
		refused, true)

	if err := updateTrainJob(t, tj, func(tj *trainer.TrainJob) { tj.Spec.Suspend = ptr.To(true) }); err != nil {
		t.Fatal(err)
	}
	got := creationFailed(t, tj, refused)
	if err := hasConditions(componentsCreated)(got); err != nil {
		t.Errorf("after the JobSet's suspension failed: %v", err)
	}
	if meta.IsStatusConditionTrue(got.Status.Conditions, trainer.TrainJobSuspended) {
		t.Errorf("Suspended=True while the JobSet runs: %+v", conditionsOf(got))
	}
	if err := env.Client.Delete(t.Context(), binding); err != nil {
		t.Fatal(err)
	}
	trainJobMatches(t, tj, "suspended once the JobSet is", hasConditions(componentsCreated, suspended))
}

// TestResumedOnlyWhenJobSetRuns: a suspended TrainJob resumed while its
// JobSet cannot be resumed (an admission policy refuses it) is not Resumed,
// and its deadline's clock does not start; once the JobSet runs, it is.
func TestResumedOnlyWhenJobSetRuns(t *testing.T) {
	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	createTrainingRuntime(t, ns, "torch", torchSpec())
	tj := newTrainJob(ns, "alpha", trainer.TrainingRuntimeKind, "torch")
	tj.Spec.Suspend = ptr.To(true)
	create(t, tj)
	trainJobMatches(t, tj, "built suspended", hasConditions(componentsCreated, suspended))
	const refused = "this test refuses to resume JobSets"
	binding := refuseJobSetUpdates(t, ns, "!has(oldObject.spec.suspend) || !oldObject.spec.suspend || (has(object.spec.suspend) && object.spec.suspend)",
		refused, false)

	resume(t, tj)
	got := creationFailed(t, tj, refused)
	if err := hasConditions(componentsCreated, suspended)(got); err != nil {
		t.Errorf("after the JobSet's resume failed: %v", err)
	}
	if err := env.Client.Delete(t.Context(), binding); err != nil {
		t.Fatal(err)
	}
	trainJobMatches(t, tj, "Resumed once the JobSet runs", hasConditions(componentsCreated, resumed))
	jobSetResumed(t, tj)
}

// TestFinishedNeverSuspended: a Complete TrainJob suspended afterwards does
// not say Suspended, nor gets its JobSet again once it is gone.
func TestFinishedNeverSuspended(t *testing.T) {
	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	createTrainingRuntime(t, ns, "torch", torchSpec())
	tj := newTrainJob(ns, "alpha", trainer.TrainingRuntimeKind, "torch")
	create(t, tj)
	js := jobSetOf(t, tj)
	cluster.SetJobSetStatus(t, env.Client, key(tj), optest.Timeout, func(s *jobsetv1alpha2.JobSetStatus) {
		s.Conditions = []metav1.Condition{jobSetCondition(jobsetv1alpha2.JobSetCompleted, "AllJobsCompleted", "jobset completed")}
	})
	complete := condition{trainer.TrainJobComplete, "True", "AllJobsCompleted", "jobset completed"}
	trainJobMatches(t, tj, "Complete", hasConditions(componentsCreated, complete))
	deleteSeen(t, js)
	if err := updateTrainJob(t, tj, func(tj *trainer.TrainJob) { tj.Spec.Suspend = ptr.To(true) }); err != nil {
		t.Fatal(err)
	}
	createTrainingRuntime(t, ns, "barrier", torchSpec())
	barrier(t, ns, "barrier")
	optest.Settled(t)
	got := &trainer.TrainJob{}
	if err := optest.Get(t.Context(), env.Client, key(tj), got); err != nil {
		t.Fatal(err)
	}
	if err := hasConditions(componentsCreated, complete)(got); err != nil {
		t.Errorf("a Complete TrainJob suspended: %v", err)
	}
	if err := optest.Absent(t.Context(), env.Client, key(tj), &jobsetv1alpha2.JobSet{}); err != nil {
		t.Errorf("a Complete TrainJob got a JobSet again: %v", err)
	}
}

// restartOperator stops the package's operator, runs down, and starts the
// operator again: what down does happens while no replica runs, and the
// operator's first look at it is with a fresh cache.
func restartOperator(t *testing.T, down func()) {
	t.Helper()
	// The status server's standby is behind the same Lease: it would take it while the operator is down, and
	// the restarted one would never lead.
	stopStandby(t)
	if err := op.Stop(); err != nil {
		t.Logf("the operator stopped with %v", err)
	}
	down()
	restarted, err := optest.StartOperator(context.Background(), opConfig, op.Config)
	if err != nil {
		t.Fatalf("start the operator again: %v", err)
	}
	op = restarted
	select {
	case <-op.Elected():
	case <-time.After(optest.Timeout):
		t.Fatal("the operator started again does not lead")
	}
	optest.Eventually(t, "the webhooks are served again", func(ctx context.Context) error { return optest.WebhooksServed(ctx, env.Client) })
}

// TestFailedIsTerminal: a JobSet that reports Completed after its TrainJob
// failed (restarted by someone) does not make the TrainJob Complete too.
func TestFailedIsTerminal(t *testing.T) {
	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	createTrainingRuntime(t, ns, "torch", torchSpec())
	tj := newTrainJob(ns, "alpha", trainer.TrainingRuntimeKind, "torch")
	create(t, tj)
	jobSetOf(t, tj)
	failed := jobSetCondition(jobsetv1alpha2.JobSetFailed, "FailedJobs", "jobset failed")
	cluster.SetJobSetStatus(t, env.Client, key(tj), optest.Timeout, func(s *jobsetv1alpha2.JobSetStatus) { s.Conditions = []metav1.Condition{failed} })
	trainJobMatches(t, tj, "Failed", func(tj *trainer.TrainJob) error {
		if !meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobFailed) {
			return fmt.Errorf("conditions %+v", conditionsOf(tj))
		}
		return nil
	})
	cluster.SetJobSetStatus(t, env.Client, key(tj), optest.Timeout, func(s *jobsetv1alpha2.JobSetStatus) {
		s.Conditions = []metav1.Condition{jobSetCondition(jobsetv1alpha2.JobSetCompleted, "AllJobsCompleted", "jobset completed")}
		s.ReplicatedJobsStatus = []jobsetv1alpha2.ReplicatedJobStatus{{Name: trainer.Node, Succeeded: 1}}
	})
	// The operator has read the Completed JobSet once it copied its jobs.
	got := trainJobMatches(t, tj, "the restarted JobSet's jobs status is copied", func(tj *trainer.TrainJob) error {
		for _, j := range tj.Status.JobsStatus {
			if j.Name == trainer.Node && ptr.Deref(j.Succeeded, 0) == 1 {
				return nil
			}
		}
		return fmt.Errorf("jobsStatus %+v", tj.Status.JobsStatus)
	})
	if !meta.IsStatusConditionTrue(got.Status.Conditions, trainer.TrainJobFailed) || meta.IsStatusConditionTrue(got.Status.Conditions, trainer.TrainJobComplete) {
		t.Errorf("conditions %+v, want Failed and not Complete", conditionsOf(got))
	}
}
