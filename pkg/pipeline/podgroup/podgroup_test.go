package podgroup_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/pipelinetest"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/podgroup"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/scheme"
)

func TestRequeueSuspendedTrainJobs(t *testing.T) {
	runtimeWithClass := func(kind, namespace, name, class string) client.Object {
		spec := pipelinetest.Decode[trainer.TrainingRuntimeSpec](t, `
template:
  spec:
    replicatedJobs:
    - name: node
      template: {spec: {template: {spec: {containers: [{name: node, image: app:v1}]}}}}`)
		if class != "" {
			spec.Template.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.RuntimeClassName = &class
		}
		if kind == trainer.TrainingRuntimeKind {
			return &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, Spec: *spec}
		}
		return &trainer.ClusterTrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: *spec}
	}
	trainJob := func(namespace, name, runtimeKind, runtime string, suspend bool) client.Object {
		tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
		tj.Spec.RuntimeRef.Name = runtime
		if runtimeKind != "" {
			tj.Spec.RuntimeRef.Kind = &runtimeKind
		}
		tj.Spec.Suspend = &suspend
		return tj
	}
	objs := []client.Object{
		runtimeWithClass(trainer.TrainingRuntimeKind, "team-a", "kata-runtime", "kata"),
		runtimeWithClass(trainer.ClusterTrainingRuntimeKind, "", "kata-cluster-runtime", "kata"),
		runtimeWithClass(trainer.ClusterTrainingRuntimeKind, "", "plain", ""),
		trainJob("team-a", "suspended-namespaced", trainer.TrainingRuntimeKind, "kata-runtime", true),
		trainJob("team-a", "running-namespaced", trainer.TrainingRuntimeKind, "kata-runtime", false),
		trainJob("team-b", "other-namespace-same-name", trainer.TrainingRuntimeKind, "kata-runtime", true),
		trainJob("team-b", "suspended-cluster", "", "kata-cluster-runtime", true),
		trainJob("team-a", "suspended-plain", "", "plain", true),
	}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).Build()
	req := func(namespace, name string) reconcile.Request {
		return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: namespace, Name: name}}
	}
	byName := cmpopts.SortSlices(func(a, b reconcile.Request) bool { return a.String() < b.String() })

	cases := map[string]struct {
		requeue func(context.Context, client.Object) []reconcile.Request
		event   client.Object
		want    []reconcile.Request
	}{
		"LimitRange requeues the suspended TrainJobs of its namespace": {
			requeue: podgroup.SuspendedTrainJobsInNamespace(c),
			event:   &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "limits", Namespace: "team-a"}},
			want:    []reconcile.Request{req("team-a", "suspended-namespaced"), req("team-a", "suspended-plain")},
		},
		"RuntimeClass requeues the suspended TrainJobs whose runtime uses it": {
			requeue: podgroup.SuspendedTrainJobsUsingRuntimeClass(c),
			event:   &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "kata"}},
			want:    []reconcile.Request{req("team-a", "suspended-namespaced"), req("team-b", "suspended-cluster")},
		},
		"RuntimeClass no runtime uses requeues nothing": {
			requeue: podgroup.SuspendedTrainJobsUsingRuntimeClass(c),
			event:   &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "gvisor"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := tc.requeue(context.Background(), tc.event)
			if diff := cmp.Diff(tc.want, got, byName); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
		})
	}
}
