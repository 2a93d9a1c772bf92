package admission

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
)

// refuseNodes is a CustomValidation plugin that refuses more than 4 nodes.
type refuseNodes struct{ calls int }

func (v *refuseNodes) Validate(_ context.Context, _ *pipeline.Runtime, _, tj *trainer.TrainJob) (admission.Warnings, field.ErrorList) {
	v.calls++
	if tj.Spec.Trainer != nil && ptr.Deref(tj.Spec.Trainer.NumNodes, 0) > 4 {
		return admission.Warnings{"plugin warning"}, field.ErrorList{field.Invalid(field.NewPath("spec", "trainer", "numNodes"), *tj.Spec.Trainer.NumNodes, "at most 4")}
	}
	return admission.Warnings{"plugin warning"}, nil
}

// only resolves the ClusterTrainingRuntime rt, and nothing else.
func only(rt *trainer.ClusterTrainingRuntime) Resolver {
	return ResolverFunc(func(_ context.Context, _, tj *trainer.TrainJob) (*pipeline.Runtime, error) {
		if tj.Spec.RuntimeRef.Name != rt.Name || pipeline.RuntimeRefGroupKind(tj) != ClusterTrainingRuntime {
			return nil, apierrors.NewNotFound(schema.GroupResource{Group: trainer.GroupVersion.Group, Resource: "clustertrainingruntimes"}, tj.Spec.RuntimeRef.Name)
		}
		return pipeline.RuntimeOf(rt)
	})
}

// TestAdmit: the webhook's decision as both the operator and render take it.
func TestAdmit(t *testing.T) {
	torch := &trainer.ClusterTrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "torch"}}
	old := &trainer.ClusterTrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "old", Labels: map[string]string{trainer.SupportLabel: trainer.SupportDeprecated}}}
	tj := func(runtime string, nodes int32, edit ...func(*trainer.TrainJob)) *trainer.TrainJob {
		j := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "j"}}
		j.Spec.RuntimeRef.Name = runtime
		j.Spec.Trainer = &trainer.Trainer{NumNodes: ptr.To(nodes)}
		for _, e := range edit {
			e(j)
		}
		return j
	}
	deleting := func(j *trainer.TrainJob) { j.DeletionTimestamp = ptr.To(metav1.Now()) }
	tests := []struct {
		name         string
		resolver     Resolver
		oldObj, obj  *trainer.TrainJob
		wantErr      string
		wantWarnings int
		wantCalls    int
	}{
		{name: "admitted", resolver: only(torch), obj: tj("torch", 2), wantWarnings: 1, wantCalls: 1},
		{name: "refused by a plugin", resolver: only(torch), obj: tj("torch", 8), wantWarnings: 1, wantCalls: 1,
			wantErr: "spec.trainer.numNodes: Invalid value: 8: at most 4"},
		{name: "runtime missing", resolver: only(torch), obj: tj("gone", 2),
			wantErr: `spec.runtimeRef: Invalid value: "gone": clustertrainingruntimes.trainer.kubeflow.org "gone" not found: specified clusterTrainingRuntime must be created before the TrainJob is created`},
		{name: "TrainingRuntime missing", resolver: only(torch), obj: tj("torch", 2, func(j *trainer.TrainJob) { j.Spec.RuntimeRef.Kind = ptr.To(trainer.TrainingRuntimeKind) }),
			wantErr: `spec.runtimeRef: Invalid value: "torch": clustertrainingruntimes.trainer.kubeflow.org "torch" not found: specified trainingRuntime must be created before the TrainJob is created`},
		{name: "unsupported kind", resolver: only(torch), obj: tj("torch", 2, func(j *trainer.TrainJob) { j.Spec.RuntimeRef.APIGroup = ptr.To("example.com") }),
			wantErr: "unsupported runtime: ClusterTrainingRuntime.example.com"},
		{name: "deprecated runtime warns", resolver: only(old), obj: tj("old", 2), wantWarnings: 2, wantCalls: 1},
		{name: "update that leaves the spec: admitted though the runtime is gone", resolver: only(torch),
			oldObj: tj("gone", 2), obj: tj("gone", 2, func(j *trainer.TrainJob) { j.Labels = map[string]string{"a": "b"} })},
		{name: "update of a TrainJob being deleted: admitted", resolver: only(torch), oldObj: tj("gone", 2), obj: tj("gone", 3, deleting)},
		{name: "update of the spec: checked", resolver: only(torch), oldObj: tj("torch", 2), obj: tj("torch", 8), wantWarnings: 1, wantCalls: 1,
			wantErr: "spec.trainer.numNodes: Invalid value: 8: at most 4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := &refuseNodes{}
			warnings, err := Admit(context.Background(), v, tt.resolver, tt.oldObj, tt.obj)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.wantErr {
				t.Errorf("error:\n got %s\nwant %s", got, tt.wantErr)
			}
			if len(warnings) != tt.wantWarnings || v.calls != tt.wantCalls {
				t.Errorf("%d warnings (%q), %d plugin calls; want %d, %d", len(warnings), warnings, v.calls, tt.wantWarnings, tt.wantCalls)
			}
		})
	}
}

func TestDenied(t *testing.T) {
	err := Denied(UnsupportedError(schema.GroupKind{Group: "example.com", Kind: "Runtime"}))
	want := `trainjobs.trainer.kubeflow.org is forbidden: admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request: unsupported runtime: Runtime.example.com`
	if !apierrors.IsForbidden(err) || err.Error() != want {
		t.Errorf("Denied = %v (forbidden: %v), want %s", err, apierrors.IsForbidden(err), want)
	}
}
