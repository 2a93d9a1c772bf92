package operator_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/integration/operator/internal/optest"
)

// unservedLabel marks the objects of one test that the unserved copies of
// the webhook configurations intercept (its value is the test's namespace).
const unservedLabel = "test.kubectl-trainjob.io/unserved-webhooks"

// installUnservedWebhooks creates copies of config/webhook's configurations
// that nothing serves (the operator's Deployment scaled to zero), limited to
// the objects labelled unservedLabel=ns, and deletes them after the test.
func installUnservedWebhooks(t *testing.T, ns string) {
	t.Helper()
	mutating, validating, err := optest.WebhookConfigurations()
	if err != nil {
		t.Fatal(err)
	}
	only := metav1.LabelSelectorRequirement{Key: unservedLabel, Operator: metav1.LabelSelectorOpIn, Values: []string{ns}}
	unserved := func(cc *admissionv1.WebhookClientConfig, selector **metav1.LabelSelector) {
		// Nothing listens on port 1: every call is refused at once.
		cc.URL, cc.Service = ptr.To("https://127.0.0.1:1"+ptr.Deref(cc.Service.Path, "/")), nil
		if *selector == nil {
			*selector = &metav1.LabelSelector{}
		}
		(*selector).MatchExpressions = append((*selector).MatchExpressions, only)
	}
	for k := range mutating.Webhooks {
		unserved(&mutating.Webhooks[k].ClientConfig, &mutating.Webhooks[k].ObjectSelector)
	}
	for k := range validating.Webhooks {
		unserved(&validating.Webhooks[k].ClientConfig, &validating.Webhooks[k].ObjectSelector)
	}
	// The probe is created before the copies, which would refuse its create.
	probe := newTrainJob(ns, "probe", trainer.TrainingRuntimeKind, "torch")
	probe.Labels = map[string]string{unservedLabel: ns}
	probe.Spec.Suspend = ptr.To(true)
	create(t, probe)
	mutating.Name, validating.Name = ns+"-unserved."+mutating.Name, ns+"-unserved."+validating.Name
	for _, obj := range []client.Object{mutating, validating} {
		if err := env.Client.Create(t.Context(), obj); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), obj) })
	}
	// The API server's view of webhook configurations follows a watch: the
	// copies are in force once a spec change of a labelled TrainJob is refused.
	optest.Eventually(t, "the unserved webhooks are in force", func(ctx context.Context) error {
		if err := optest.Get(ctx, env.Client, key(probe), probe); err != nil {
			return err
		}
		probe.Spec.Suspend = ptr.To(!*probe.Spec.Suspend)
		if err := env.Client.Update(ctx, probe); !unservedRefusal(err) {
			return fmt.Errorf("a spec change was not refused by the unserved webhook: %v", err)
		}
		return nil
	})
}

// unservedRefusal reports whether err is the API server's failure to call
// a webhook nobody serves.
func unservedRefusal(err error) bool {
	return err != nil && strings.Contains(err.Error(), "failed calling webhook")
}

// TestDeletionWithoutOperator: with the operator scaled to zero and its
// webhook configurations left in place, what finishing a deletion needs
// passes admission: adding or removing a finalizer or label, a foreground
// delete, and taking the finalizers off a deleted object (as the garbage
// collector does); each webhook still sees every change of a spec it checks.
func TestDeletionWithoutOperator(t *testing.T) {
	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	labels := map[string]string{unservedLabel: ns}
	createTrainingRuntime(t, ns, "torch", torchSpec())
	tj := newTrainJob(ns, "alpha", trainer.TrainingRuntimeKind, "torch")
	tj.Labels = labels
	tj.Spec.Suspend = ptr.To(true)
	// runtimePatches: the defaulter intercepts it too.
	tj.Spec.RuntimePatches = []trainer.RuntimePatch{{Manager: "test.io/manager"}}
	create(t, tj)
	rt := createTrainingRuntime(t, ns, "labelled", torchSpec())
	rt.Labels = labels
	if err := env.Client.Update(t.Context(), rt); err != nil {
		t.Fatal(err)
	}
	ctr := createClusterTrainingRuntime(t, "deletion", torchSpec(), labels)
	installUnservedWebhooks(t, ns)

	cases := []struct {
		obj client.Object
		// specChange changes what the validating webhook checks; nil when
		// it checks no update.
		specChange func(client.Object)
	}{
		{obj: tj, specChange: func(o client.Object) { o.(*trainer.TrainJob).Spec.Suspend = ptr.To(false) }},
		{obj: rt},
		{obj: ctr, specChange: func(o client.Object) { o.(*trainer.ClusterTrainingRuntime).Spec.MLPolicy.NumNodes = ptr.To[int32](2) }},
	}
	for _, tc := range cases {
		name := fmt.Sprintf("%T %s", tc.obj, tc.obj.GetName())
		// update edits the object as stored, again after a conflict with
		// the operator's status writes.
		update := func(ctx context.Context, edit func(client.Object)) error {
			return retry.RetryOnConflict(retry.DefaultRetry, func() error {
				if err := optest.Get(ctx, env.Client, key(tc.obj), tc.obj); err != nil {
					return err
				}
				edit(tc.obj)
				return env.Client.Update(ctx, tc.obj)
			})
		}
		if err := update(t.Context(), func(o client.Object) {
			o.SetFinalizers(append(o.GetFinalizers(), "test.kubectl-trainjob.io/hold"))
			o.SetAnnotations(map[string]string{"note": "metadata only"})
		}); err != nil {
			t.Fatalf("%s: add a finalizer and an annotation: %v", name, err)
		}
		if tc.specChange != nil {
			if err := update(t.Context(), tc.specChange); !unservedRefusal(err) {
				t.Errorf("%s: a spec change with the webhook unserved: %v, want a refusal", name, err)
			}
		}
		if err := env.Client.Delete(t.Context(), tc.obj, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
			t.Fatalf("%s: delete in the foreground: %v", name, err)
		}
		// The API server of these tests runs no garbage collector: the test
		// takes off its finalizer and the foreground one.
		if err := update(t.Context(), func(o client.Object) { o.SetFinalizers(nil) }); err != nil {
			t.Fatalf("%s: take the finalizers off the deleted object: %v", name, err)
		}
		optest.Eventually(t, name+" is gone", func(ctx context.Context) error {
			return optest.Absent(ctx, env.Client, key(tc.obj), tc.obj)
		})
	}
}
