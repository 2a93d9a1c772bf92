package create

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
)

// defaultGPUDeviceClass is the DeviceClass --gpu-claim asks for when it names none: that of NVIDIA's DRA driver.
const defaultGPUDeviceClass = "gpu.nvidia.com"

// gpuClaimName names the claim in the trainer's pods and the request in its ResourceClaimTemplate.
const gpuClaimName = "gpu"

// claimGPUsOf takes the GPUs --gpu-claim claims through DRA: --gpus-per-node, else (a copy, rerun --set
// gpu-claim) the nvidia.com/gpu of the trainer t, which the claim replaces. res are --resources-per-node's.
func (s *spec) claimGPUsOf(t *trainer.Trainer, res corev1.ResourceList) error {
	if _, ok := res[gpuResource]; ok {
		return fmt.Errorf("--gpu-claim claims the GPUs through DRA and --resources-per-node asks for %s: give their number with --gpus-per-node instead", gpuResource)
	}
	s.claimedGPUs = ptr.Deref(s.gpusPerNode, 0)
	if t != nil && t.ResourcesPerNode != nil {
		if s.gpusPerNode == nil {
			s.claimedGPUs = pipeline.GPUsPerNode(*t.ResourcesPerNode, nil)
		}
		delete(t.ResourcesPerNode.Requests, gpuResource)
		delete(t.ResourcesPerNode.Limits, gpuResource)
	}
	if s.claimedGPUs <= 0 {
		return fmt.Errorf("--gpu-claim needs the number of GPUs each node claims: add --gpus-per-node, e.g. --gpus-per-node 8 --gpu-claim=%s", s.gpuClaim)
	}
	return nil
}

// claimTemplateName is the name of the ResourceClaimTemplate --gpu-claim makes for the TrainJob tj.
func claimTemplateName(tj *trainer.TrainJob) string { return tj.Name + "-" + gpuClaimName }

// claimGPUs makes the TrainJob's pods claim their GPUs through DRA as KEP-2782 shapes it: a ResourceClaimTemplate
// of count devices of class, from which each trainer pod gets a claim of its own, named in create's runtime
// patch (pod-level resourceClaims: a runtime patch cannot name a container's claims, and a claim a container
// does not name is still allocated before the pod starts). The patch also tolerates the GPU nodes' taint, which
// the API server adds only to pods that ask for nvidia.com/gpu. The class must exist.
func (o *CreateOptions) claimGPUs(ctx context.Context, tj *trainer.TrainJob, rt *pipeline.Runtime, class string, count int64) (*resourcev1.ResourceClaimTemplate, error) {
	if err := o.checkDeviceClass(ctx, class); err != nil {
		return nil, err
	}
	tmpl := &resourcev1.ResourceClaimTemplate{
		TypeMeta:   metav1.TypeMeta{APIVersion: resourcev1.SchemeGroupVersion.String(), Kind: "ResourceClaimTemplate"},
		ObjectMeta: metav1.ObjectMeta{Name: claimTemplateName(tj), Namespace: tj.Namespace},
	}
	tmpl.Spec.Spec.Devices.Requests = []resourcev1.DeviceRequest{{Name: gpuClaimName, Exactly: &resourcev1.ExactDeviceRequest{
		DeviceClassName: class, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: count,
	}}}
	patchTrainerPods(tj, rt, func(p *trainer.PodTemplatePatch) {
		if p.Spec == nil {
			p.Spec = &trainer.PodSpecPatch{}
		}
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: gpuClaimName, ResourceClaimTemplateName: ptr.To(tmpl.Name)}}
		p.Spec.Tolerations = []corev1.Toleration{{Key: string(gpuResource), Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	})
	return tmpl, nil
}

// checkDeviceClass makes sure the DeviceClass class exists, naming those there are when it does not. A user who
// may not read DeviceClasses gets a warning.
func (o *CreateOptions) checkDeviceClass(ctx context.Context, class string) error {
	err := o.client.Get(ctx, client.ObjectKey{Name: class}, &resourcev1.DeviceClass{})
	switch {
	case err == nil:
		return nil
	case meta.IsNoMatchError(err):
		return fmt.Errorf("--gpu-claim claims GPUs through DRA, and the API server does not serve %s (Kubernetes 1.34 or later)", resourcev1.SchemeGroupVersion)
	case apierrors.IsForbidden(err):
		fmt.Fprintf(o.ErrOut, "warning: you may not read deviceclass %q, so whether it exists is not checked\n", class)
		return nil
	case !apierrors.IsNotFound(err):
		return err
	}
	msg := fmt.Sprintf("deviceclass %q not found", class)
	var classes resourcev1.DeviceClassList
	if o.client.List(ctx, &classes) == nil {
		var names []string
		for _, c := range classes.Items {
			names = append(names, c.Name)
		}
		if len(names) == 0 {
			return errors.New(msg + ": the cluster has no DeviceClass, no DRA driver publishes devices; ask for nvidia.com/gpu with --gpus-per-node alone")
		}
		msg += "; the cluster's device classes: " + strings.Join(names, ", ")
	}
	return errors.New(msg + "; use --gpu-claim=DEVICECLASS")
}

// createClaimTemplate creates tmpl, the ResourceClaimTemplate of the TrainJob created next: first, so that the
// operator counts the GPUs of its claims when it builds the TrainJob.
func (o *CreateOptions) createClaimTemplate(ctx context.Context, tmpl *resourcev1.ResourceClaimTemplate, opts ...client.CreateOption) error {
	err := o.client.Create(ctx, tmpl, opts...)
	if apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("resourceclaimtemplate %q already exists in namespace %q, and --gpu-claim makes one of that name for the TrainJob: choose another name for the TrainJob", tmpl.Name, tmpl.Namespace)
	}
	if err != nil {
		return createError(err, "resourceclaimtemplate", tmpl.Namespace, tmpl.Name)
	}
	return nil
}

// ownClaimTemplate gives tmpl to the TrainJob tj, created after it, so that the garbage collector deletes the
// template with the TrainJob. The claims made from it belong to the pods and go with them.
func (o *CreateOptions) ownClaimTemplate(ctx context.Context, tmpl *resourcev1.ResourceClaimTemplate, tj *trainer.TrainJob) {
	before := tmpl.DeepCopy()
	tmpl.OwnerReferences = append(tmpl.OwnerReferences, metav1.OwnerReference{
		APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind, Name: tj.Name, UID: tj.UID, Controller: ptr.To(true),
	})
	if err := o.client.Patch(ctx, tmpl, client.MergeFrom(before)); err != nil {
		fmt.Fprintf(o.ErrOut, "warning: resourceclaimtemplate %q could not be given to TrainJob %s, so it stays when the TrainJob is deleted: %v\n", tmpl.Name, tj.Name, err)
	}
}

// copyClaimTemplate gives the copy tj of o.from (--from, rerun) a ResourceClaimTemplate of its own when o.from's
// pods claim their GPUs from one that o.from owns (create --gpu-claim's): that template goes with o.from when it
// is deleted, and the copy's pods, made later, would find none. The copy's template asks for the same devices,
// is named as --gpu-claim names it (claimTemplateName) and is owned by the copy once created; the copy's runtime
// patches name it instead. A template o.from does not own (the namespace's, a runtime's) is shared as it is.
// It returns nil when there is none to copy; create makes one template a TrainJob, so it copies the first.
func (o *CreateOptions) copyClaimTemplate(ctx context.Context, tj *trainer.TrainJob) (*resourcev1.ResourceClaimTemplate, error) {
	for _, claim := range patchedClaims(tj) {
		name := ptr.Deref(claim.ResourceClaimTemplateName, "")
		if name == "" {
			continue
		}
		var src resourcev1.ResourceClaimTemplate
		err := o.client.Get(ctx, client.ObjectKey{Namespace: tj.Namespace, Name: name}, &src)
		if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || meta.IsNoMatchError(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if !metav1.IsControlledBy(&src, o.from) {
			continue
		}
		tmpl := &resourcev1.ResourceClaimTemplate{
			TypeMeta:   metav1.TypeMeta{APIVersion: resourcev1.SchemeGroupVersion.String(), Kind: "ResourceClaimTemplate"},
			ObjectMeta: metav1.ObjectMeta{Name: claimTemplateName(tj), Namespace: tj.Namespace, Labels: src.Labels, Annotations: src.Annotations},
			Spec:       src.Spec,
		}
		for _, c := range patchedClaims(tj) {
			if ptr.Deref(c.ResourceClaimTemplateName, "") == name {
				c.ResourceClaimTemplateName = ptr.To(tmpl.Name)
			}
		}
		return tmpl, nil
	}
	return nil, nil
}

// patchedClaims are the pod claims of tj's runtime patches, to read or change in place.
func patchedClaims(tj *trainer.TrainJob) []*corev1.PodResourceClaim {
	var claims []*corev1.PodResourceClaim
	for i := range tj.Spec.RuntimePatches {
		rs := tj.Spec.RuntimePatches[i].TrainingRuntimeSpec
		if rs == nil || rs.Template == nil || rs.Template.Spec == nil {
			continue
		}
		for j := range rs.Template.Spec.ReplicatedJobs {
			t := rs.Template.Spec.ReplicatedJobs[j].Template
			if t == nil || t.Spec == nil || t.Spec.Template == nil || t.Spec.Template.Spec == nil {
				continue
			}
			for k := range t.Spec.Template.Spec.ResourceClaims {
				claims = append(claims, &t.Spec.Template.Spec.ResourceClaims[k])
			}
		}
	}
	return claims
}
