package webhook

import (
	"context"
	"fmt"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	trainjobadmission "github.com/kubectl-trainjob/kubectl-trainjob/pkg/admission"
	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/snapshot"
)

// TrainJobDefaulter stamps every runtimePatch with the time its manager last
// changed it. Every other default is in the CRD schema.
type TrainJobDefaulter struct {
	// now is time.Now when nil.
	now func() time.Time
}

var _ admission.Defaulter[*trainer.TrainJob] = (*TrainJobDefaulter)(nil)

// Default stamps the runtimePatches of a TrainJob being created or updated.
func (d *TrainJobDefaulter) Default(ctx context.Context, tj *trainer.TrainJob) error {
	now := time.Now
	if d.now != nil {
		now = d.now
	}
	var old *trainer.TrainJob
	if req, err := admission.RequestFromContext(ctx); err == nil && req.Operation == admissionv1.Update && len(req.OldObject.Raw) > 0 {
		old = &trainer.TrainJob{}
		if err := json.Unmarshal(req.OldObject.Raw, old); err != nil {
			return apierrors.NewBadRequest(fmt.Sprintf("decode the TrainJob before the update: %v", err))
		}
	}
	var oldPatches []trainer.RuntimePatch
	if old != nil {
		oldPatches = old.Spec.RuntimePatches
	}
	StampRuntimePatches(oldPatches, tj.Spec.RuntimePatches, metav1.NewTime(now()))
	return nil
}

// StampRuntimePatches sets the time of each patch in patches, given the
// patches before the update (nil on create): a patch its manager left
// unchanged (time aside) keeps its old time, a changed one gets now, a new
// one keeps the time it brings or gets now.
func StampRuntimePatches(old, patches []trainer.RuntimePatch, now metav1.Time) {
	before := make(map[string]*trainer.RuntimePatch, len(old))
	for k := range old {
		before[old[k].Manager] = &old[k]
	}
	for k := range patches {
		p := &patches[k]
		prev, existed := before[p.Manager]
		switch {
		case !existed:
			if p.Time == nil {
				p.Time = now.DeepCopy()
			}
		case samePatch(prev, p):
			p.Time = prev.Time.DeepCopy()
			if p.Time == nil {
				p.Time = now.DeepCopy()
			}
		default:
			p.Time = now.DeepCopy()
		}
	}
}

func samePatch(a, b *trainer.RuntimePatch) bool {
	x, y := *a, *b
	x.Time, y.Time = nil, nil
	return equality.Semantic.DeepEqual(x, y)
}

// TrainJobValidator checks a TrainJob against the runtime it references:
// the runtime must exist, then every CustomValidation plugin has its say.
type TrainJobValidator struct {
	client    client.Reader
	live      client.Reader
	decoder   runtime.Decoder
	framework *pipeline.Framework
}

var _ admission.Validator[*trainer.TrainJob] = (*TrainJobValidator)(nil)

// ValidateCreate validates a new TrainJob.
func (v *TrainJobValidator) ValidateCreate(ctx context.Context, tj *trainer.TrainJob) (admission.Warnings, error) {
	return trainjobadmission.Admit(ctx, v.framework, trainjobadmission.ResolverFunc(v.runtime), nil, tj)
}

// ValidateUpdate validates a changed TrainJob (trainjobadmission.Admit says which updates pass as they are).
func (v *TrainJobValidator) ValidateUpdate(ctx context.Context, oldObj, newObj *trainer.TrainJob) (admission.Warnings, error) {
	return trainjobadmission.Admit(ctx, v.framework, trainjobadmission.ResolverFunc(v.runtime), oldObj, newObj)
}

// ValidateDelete allows every deletion.
func (v *TrainJobValidator) ValidateDelete(context.Context, *trainer.TrainJob) (admission.Warnings, error) {
	return nil, nil
}

// runtime is the runtime to check a TrainJob against. A TrainJob already
// built runs from its snapshot, whatever became of its runtime since
// (changed, or deleted): an update is checked against the snapshot, so that
// a TrainJob whose runtime is gone can still be resumed. Upstream checks
// every update against the live runtime.
func (v *TrainJobValidator) runtime(ctx context.Context, oldObj, newObj *trainer.TrainJob) (*pipeline.Runtime, error) {
	if oldObj != nil {
		if rt, err := snapshot.Read(ctx, v.client, v.live, v.decoder, newObj); err == nil {
			return rt, nil
		}
	}
	return snapshot.LiveRuntime(ctx, v.client, v.live, newObj)
}
