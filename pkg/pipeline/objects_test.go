package pipeline_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/pipelinetest"
)

func TestOwnedObjectMeta(t *testing.T) {
	tj := pipelinetest.TrainJob(t, `{metadata: {name: alpha, namespace: ml}, spec: {runtimeRef: {name: torch}}}`)
	owner := `[{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, name: alpha, uid: uid-0001, controller: true, blockOwnerDeletion: true}]`
	for suffix, want := range map[string]string{
		"":              `{name: alpha, namespace: ml, ownerReferences: ` + owner + `}`,
		"-mpi-hostfile": `{name: alpha-mpi-hostfile, namespace: ml, ownerReferences: ` + owner + `}`,
	} {
		if diff := cmp.Diff(*pipelinetest.Decode[metav1.ObjectMeta](t, want), pipeline.OwnedObjectMeta(tj, suffix)); diff != "" {
			t.Errorf("OwnedObjectMeta(%q) (-want +got):\n%s", suffix, diff)
		}
	}
}

func TestNameSuffix(t *testing.T) {
	for _, tc := range []struct {
		suffix string
		names  map[string]bool
	}{
		{"-flux-entrypoint", map[string]bool{"alpha-flux-entrypoint": true, "alpha-mpi-hostfile": false, "alpha-runtime-snapshot": false}},
		{"-mpi-ssh-auth", map[string]bool{"alpha-mpi-ssh-auth": true, "alpha-flux-curve": false, "alpha": false}},
	} {
		p := pipeline.NameSuffix(tc.suffix)
		for name, want := range tc.names {
			obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name}}
			if got := p.Generic(event.GenericEvent{Object: obj}); got != want {
				t.Errorf("NameSuffix(%q) passes %q: %v, want %v", tc.suffix, name, got, want)
			}
		}
	}
}

func TestControllingTrainJob(t *testing.T) {
	alpha := []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: "ml", Name: "alpha"}}}
	for _, tc := range []struct {
		name, owners string
		want         []reconcile.Request
	}{
		{"controlled by a TrainJob", `[{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, name: alpha, uid: u, controller: true}]`, alpha},
		{"another version of the group", `[{apiVersion: trainer.kubeflow.org/v1beta1, kind: TrainJob, name: alpha, uid: u, controller: true}]`, alpha},
		{"the controller among other owners", `[{apiVersion: v1, kind: ConfigMap, name: x, uid: x}, {apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, name: alpha, uid: u, controller: true}]`, alpha},
		{"owned, not controlled", `[{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, name: alpha, uid: u}]`, nil},
		{"a TrainJob of another group", `[{apiVersion: example.com/v1, kind: TrainJob, name: alpha, uid: u, controller: true}]`, nil},
		{"a core kind named TrainJob", `[{apiVersion: v1, kind: TrainJob, name: alpha, uid: u, controller: true}]`, nil},
		{"another kind", `[{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainingRuntime, name: alpha, uid: u, controller: true}]`, nil},
		{"no owner", `[]`, nil},
	} {
		obj := &metav1.PartialObjectMetadata{ObjectMeta: *pipelinetest.Decode[metav1.ObjectMeta](t, `{name: alpha, namespace: ml, ownerReferences: `+tc.owners+`}`)}
		if diff := cmp.Diff(tc.want, pipeline.ControllingTrainJob(context.Background(), obj)); diff != "" {
			t.Errorf("%s: ControllingTrainJob (-want +got):\n%s", tc.name, diff)
		}
	}
}
