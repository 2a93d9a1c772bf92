package kueue

import (
	"context"
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
)

// TestManagedByMultiKueue: a TrainJob whose spec.managedBy is MultiKueue's is left alone by the operator — no
// JobSet, no status — as on a MultiKueue management cluster, where the worker cluster's copy runs. A TrainJob
// created after it, and built, shows that the operator has had its turn at the first.
func TestManagedByMultiKueue(t *testing.T) {
	ns := queueNamespace(t)
	remote := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "remote"},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{Name: "torch-distributed"},
			ManagedBy:  ptr.To(trainer.MultiKueueController),
		},
	}
	local := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "local"},
		Spec:       trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: "torch-distributed"}},
	}
	create(t, remote)
	create(t, local)
	cluster.Eventually(t, "the local TrainJob built and its status written", waitTimeout, func(ctx context.Context) error {
		if err := suite.client.Get(ctx, client.ObjectKeyFromObject(local), &jobsetv1alpha2.JobSet{}); err != nil {
			return err
		}
		got := get(t, local)
		if len(got.Status.Conditions) == 0 {
			return errNoStatus
		}
		return nil
	})
	err := suite.client.Get(t.Context(), client.ObjectKeyFromObject(remote), &jobsetv1alpha2.JobSet{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("the JobSet of the MultiKueue TrainJob: got %v, want NotFound", err)
	}
	if got := get(t, remote); !equality.Semantic.DeepEqual(got.Status, trainer.TrainJobStatus{}) {
		t.Errorf("the operator wrote the status of the MultiKueue TrainJob: %+v", got.Status)
	}
}

var errNoStatus = errors.New("no status conditions yet")
