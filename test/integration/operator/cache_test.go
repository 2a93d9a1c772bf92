package operator_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/snapshot"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/integration/operator/internal/optest"
)

// TestCacheScope: the operator caches the ConfigMaps and Secrets it applied
// (labelled with their TrainJob), not the others of the cluster
// (kubeflow/trainer#3374), in full or as metadata.
func TestCacheScope(t *testing.T) {
	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	unrelated := map[string]client.Object{
		"ConfigMap": &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unrelated"}, Data: map[string]string{"big": "data"}},
		"Secret":    &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unrelated"}, StringData: map[string]string{"password": "x"}},
	}
	for _, obj := range unrelated {
		create(t, obj)
	}
	// The barriers, created after the unrelated objects: an MPI TrainJob's
	// runtime snapshot (a ConfigMap) and SSH keys (a Secret), which the
	// operator applies. Once the cache holds them, it has received every
	// earlier event of the same kind it would have received: an informer
	// delivers a kind's events in the order the API server stored them.
	spec := runtimeSpec(&trainer.MLPolicy{NumNodes: ptr.To[int32](1), MLPolicySource: trainer.MLPolicySource{MPI: &trainer.MPIMLPolicySource{}}},
		replicatedJob(trainer.Launcher, trainer.AncestorTrainer, trainer.Node), replicatedJob(trainer.Node, "", trainer.Node))
	createTrainingRuntime(t, ns, "mpi", spec)
	tj := newTrainJob(ns, "alpha", trainer.TrainingRuntimeKind, "mpi")
	tj.Spec.Suspend = ptr.To(true)
	create(t, tj)
	barriers := map[string]client.ObjectKey{
		"ConfigMap": nsName(ns, "alpha"+snapshot.Suffix),
		"Secret":    nsName(ns, "alpha-mpi-ssh-auth"),
	}

	for kind, obj := range unrelated {
		full := func() client.Object { return obj.DeepCopyObject().(client.Object) }
		metadata := func() client.Object {
			m := &metav1.PartialObjectMetadata{}
			m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kind))
			return m
		}
		for form, newObj := range map[string]func() client.Object{"in full": full, "as metadata": metadata} {
			optest.Eventually(t, "the operator's cache holds the "+kind+" it applied, "+form, func(ctx context.Context) error {
				return optest.Get(ctx, op.Cache(), barriers[kind], newObj())
			})
			if err := optest.Absent(t.Context(), op.Cache(), key(obj), newObj()); err != nil {
				t.Errorf("%s: %v", form, err)
			}
		}
	}
	var list corev1.ConfigMapList
	if err := op.Cache().List(t.Context(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	// As stored: the cache drops the labels of the snapshots it holds.
	for _, cm := range list.Items {
		stored := &corev1.ConfigMap{}
		if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(&cm), stored); err != nil {
			t.Fatal(err)
		}
		if stored.Labels[pipeline.TrainJobNameLabel] == "" {
			t.Errorf("the cache lists ConfigMap %s", cm.Name)
		}
	}
}

// TestCacheTrimsJobSets: the operator's cache holds a JobSet without its
// pod templates (jobset.TrimForCache), what the TrainJob's status needs
// still there: spec.suspend, the status, and the replicated jobs' names
// until the status lists them.
func TestCacheTrimsJobSets(t *testing.T) {
	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	createTrainingRuntime(t, ns, "torch", torchSpec())
	tj := newTrainJob(ns, "trimmed", trainer.TrainingRuntimeKind, "torch")
	tj.Spec.Suspend = ptr.To(true)
	create(t, tj)
	stored := jobSetOf(t, tj)
	if len(stored.Spec.ReplicatedJobs) == 0 || len(stored.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers) == 0 {
		t.Fatalf("the stored JobSet has no pod template: %+v", stored.Spec)
	}
	var want []string
	for _, rj := range stored.Spec.ReplicatedJobs {
		want = append(want, rj.Name)
	}
	var cached jobsetv1alpha2.JobSet
	optest.Eventually(t, "the operator's cache holds the JobSet", func(ctx context.Context) error {
		return optest.Get(ctx, op.Cache(), key(tj), &cached)
	})
	var names []string
	for _, rj := range cached.Spec.ReplicatedJobs {
		names = append(names, rj.Name)
		if !equality.Semantic.DeepEqual(rj.Template, batchv1.JobTemplateSpec{}) {
			t.Errorf("the cached JobSet keeps the template of %s: %+v", rj.Name, rj.Template)
		}
	}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("cached replicated jobs before the JobSet controller reports (-stored +cached):\n%s", diff)
	}

	cluster.SetJobSetStatus(t, env.Client, key(tj), optest.Timeout, func(s *jobsetv1alpha2.JobSetStatus) {
		s.ReplicatedJobsStatus = []jobsetv1alpha2.ReplicatedJobStatus{{Name: trainer.Node, Suspended: 1}}
	})
	optest.Eventually(t, "the operator's cache holds the JobSet with its status", func(ctx context.Context) error {
		if err := optest.Get(ctx, op.Cache(), key(tj), &cached); err != nil {
			return err
		}
		if len(cached.Status.ReplicatedJobsStatus) == 0 {
			return errors.New("no status yet")
		}
		return nil
	})
	if len(cached.Spec.ReplicatedJobs) != 0 {
		t.Errorf("the cached JobSet keeps %d replicated jobs in its spec once its status lists them", len(cached.Spec.ReplicatedJobs))
	}
	if !ptr.Deref(cached.Spec.Suspend, false) {
		t.Error("the cached JobSet lost spec.suspend")
	}
	if cached.Annotations[pipeline.AppliedHashAnnotation] == "" || cached.ManagedFields != nil {
		t.Errorf("cached metadata: annotations %v, %d managed fields; want the applied hash and no managed fields",
			cached.Annotations, len(cached.ManagedFields))
	}
	trainJobMatches(t, tj, "the TrainJob reports the JobSet's replicated job suspended", func(got *trainer.TrainJob) error {
		for _, js := range got.Status.JobsStatus {
			if js.Name == trainer.Node && ptr.Deref(js.Suspended, 0) == 1 {
				return nil
			}
		}
		return fmt.Errorf("jobsStatus %+v", got.Status.JobsStatus)
	})
}

// TestCacheSharesSnapshotContents: the runtime snapshots of two TrainJobs of
// one runtime hold the same content, and the operator's cache keeps one copy
// of it (snapshot.SharedContents).
func TestCacheSharesSnapshotContents(t *testing.T) {
	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	createTrainingRuntime(t, ns, "torch", torchSpec())
	var contents []string
	for _, name := range []string{"first", "second"} {
		tj := newTrainJob(ns, name, trainer.TrainingRuntimeKind, "torch")
		tj.Spec.Suspend = ptr.To(true)
		create(t, tj)
		var cm corev1.ConfigMap
		optest.Eventually(t, "the operator's cache holds the snapshot of "+name, func(ctx context.Context) error {
			return optest.Get(ctx, op.Cache(), nsName(ns, name+snapshot.Suffix), &cm)
		})
		contents = append(contents, cm.Data[snapshot.Key])
	}
	if contents[0] == "" || contents[0] != contents[1] {
		t.Fatalf("the snapshots differ:\n%s\n---\n%s", contents[0], contents[1])
	}
	if unsafe.StringData(contents[0]) != unsafe.StringData(contents[1]) {
		t.Error("the cache keeps a copy of the same snapshot content for each TrainJob")
	}
}

// TestCacheHoldsNoForeignData (issue 36, item 2): ConfigMaps and Secrets
// that carry the label the operator sets on its own, but that no TrainJob
// controls, a megabyte each, do not grow the operator's heap: anyone who
// may write ConfigMaps in one namespace can set the label, and the cache
// of every replica would hold them whole. The cache keeps a stand-in of
// each (its name, so that readers see it is not theirs), and the operator
// goes on building TrainJobs.
func TestCacheHoldsNoForeignData(t *testing.T) {
	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	createTrainingRuntime(t, ns, "torch", torchSpec())
	labels := map[string]string{pipeline.TrainJobNameLabel: "forged"}
	// Under the API server's limit of 1 MiB an object; the test's own
	// copies are garbage by the time the heap is measured.
	const objects, size = 200, 1000 * 1000
	payload := strings.Repeat("x", size)
	before := heapInUse()
	for i := range objects {
		meta := metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("forged-%03d", i), Labels: labels}
		if i%2 == 0 {
			create(t, &corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{"big": payload}})
		} else {
			create(t, &corev1.Secret{ObjectMeta: meta, Data: map[string][]byte{"big": []byte(payload)}})
		}
	}
	// Each kind's informer delivers its events in order: once the cache has
	// the last object of each kind, it has seen them all.
	for _, obj := range []client.Object{&corev1.ConfigMap{}, &corev1.Secret{}} {
		name := fmt.Sprintf("forged-%03d", objects-2)
		if _, ok := obj.(*corev1.Secret); ok {
			name = fmt.Sprintf("forged-%03d", objects-1)
		}
		optest.Eventually(t, fmt.Sprintf("the operator's cache has %T %s", obj, name), func(ctx context.Context) error {
			return optest.Get(ctx, op.Cache(), nsName(ns, name), obj)
		})
		switch obj := obj.(type) {
		case *corev1.ConfigMap:
			if len(obj.Data) != 0 {
				t.Errorf("the operator's cache holds the data of ConfigMap %s, which no TrainJob controls", name)
			}
		case *corev1.Secret:
			if len(obj.Data) != 0 {
				t.Errorf("the operator's cache holds the data of Secret %s, which no TrainJob controls", name)
			}
		}
	}
	payload = ""
	const maxGrowth = 8 << 20
	if after := heapInUse(); after > before+maxGrowth {
		t.Errorf("live heap grew from %d to %d bytes over %d MB of labelled ConfigMaps and Secrets no TrainJob controls, want at most %d more",
			before, after, objects*size>>20, maxGrowth)
	}
	// The operator still admits and builds.
	tj := newTrainJob(ns, "after", trainer.TrainingRuntimeKind, "torch")
	tj.Spec.Suspend = ptr.To(true)
	create(t, tj)
	jobSetOf(t, tj)
}
