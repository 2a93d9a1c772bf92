package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"gomodules.xyz/jsonpatch/v2"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	trainjobadmission "github.com/kubectl-trainjob/kubectl-trainjob/pkg/admission"
	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/snapshot"
)

// TrainJobDefaulter stamps every runtimePatch with the time its manager last
// changed it. Every other default is in the CRD schema.
//
// It answers with a JSON patch of those times alone. controller-runtime's
// admission.WithDefaulter (upstream's) answers with the difference between
// the request's object and the object decoded and encoded again, which
// rewrites what the Go types spell otherwise: `cpu: 1000m` became `cpu: "1"`
// in every TrainJob whose runtimePatches it stamped.
type TrainJobDefaulter struct {
	// now is time.Now when nil.
	now func() time.Time
}

var _ admission.Handler = (*TrainJobDefaulter)(nil)

// trainJobDefaulterWebhook is the TrainJob defaulter's webhook, as Setup
// registers it.
func trainJobDefaulterWebhook(d *TrainJobDefaulter) *admission.Webhook {
	return &admission.Webhook{Handler: d}
}

// Handle stamps the runtimePatches of a TrainJob being created or updated.
func (d *TrainJobDefaulter) Handle(_ context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	// The patches as sent, each kept raw: a time is added only to those
	// that are objects (the schema refuses the others after us).
	var sent struct {
		Spec struct {
			RuntimePatches []json.RawMessage `json:"runtimePatches"`
		} `json:"spec"`
	}
	tj := &trainer.TrainJob{}
	if err := json.Unmarshal(req.Object.Raw, &sent); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode the TrainJob: %w", err))
	}
	if err := json.Unmarshal(req.Object.Raw, tj); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode the TrainJob: %w", err))
	}
	var oldPatches []trainer.RuntimePatch
	if req.Operation == admissionv1.Update && len(req.OldObject.Raw) > 0 {
		old := &trainer.TrainJob{}
		if err := json.Unmarshal(req.OldObject.Raw, old); err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode the TrainJob before the update: %w", err))
		}
		oldPatches = old.Spec.RuntimePatches
	}
	now := time.Now
	if d.now != nil {
		now = d.now
	}
	stamped := make([]trainer.RuntimePatch, len(tj.Spec.RuntimePatches))
	for k := range stamped {
		tj.Spec.RuntimePatches[k].DeepCopyInto(&stamped[k])
	}
	StampRuntimePatches(oldPatches, stamped, metav1.NewTime(now()))
	var ops []jsonpatch.JsonPatchOperation
	for k, p := range stamped {
		if !bytes.HasPrefix(bytes.TrimSpace(sent.Spec.RuntimePatches[k]), []byte("{")) || p.Time.Equal(tj.Spec.RuntimePatches[k].Time) {
			continue
		}
		ops = append(ops, jsonpatch.NewOperation("add", fmt.Sprintf("/spec/runtimePatches/%d/time", k), p.Time))
	}
	if len(ops) == 0 {
		return admission.Allowed("")
	}
	return admission.Patched("", ops...)
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
