package stack

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
)

// The annotations the PersistentVolume controller writes on a claim it has bound; the scheduler's
// VolumeBinding plugin takes a claim as bound only with bind-completed.
const (
	annBindCompleted     = "pv.kubernetes.io/bind-completed"
	annBoundByController = "pv.kubernetes.io/bound-by-controller"
	// The finalizers the StorageObjectInUseProtection admission plugin adds, which the (absent)
	// protection controllers would remove.
	pvcProtectionFinalizer = "kubernetes.io/pvc-protection"
	pvProtectionFinalizer  = "kubernetes.io/pv-protection"
	// provisionedForAnnotation names the claim a volume was made for.
	provisionedForAnnotation = "stack.kubectl-trainjob.dev/provisioned-for"
	// defaultClaimSize is the size of a volume whose claim asks for none.
	defaultClaimSize = "1Gi"
	// volumeResync retries what failed, since the handlers do not requeue.
	volumeResync = 2 * time.Second
)

// bindVolumes plays, until ctx ends, the parts of a cluster's storage that the local cluster lacks (its
// kube-controller-manager runs no volume controllers, and there is no provisioner): every pending
// PersistentVolumeClaim — such as those JobSet creates from a runtime's volumeClaimPolicies — gets a
// hostPath PersistentVolume of its size and access modes, bound to it as the PersistentVolume controller
// binds, so that pods using it can be scheduled; and a deleted claim loses its protection finalizer and its
// volume, so that its namespace can go. KWOK never mounts anything, so the path is never created.
func bindVolumes(ctx context.Context, cs kubernetes.Interface, logf func(string, ...any)) error {
	factory := informers.NewSharedInformerFactory(cs, volumeResync)
	informer := factory.Core().V1().PersistentVolumeClaims().Informer()
	// The handler runs on one goroutine; each claim's error is reported once until it changes.
	lastErr := map[types.UID]string{}
	sync := func(obj any) {
		pvc, ok := obj.(*corev1.PersistentVolumeClaim)
		if !ok {
			return
		}
		err := syncClaim(ctx, cs, pvc)
		switch {
		case err == nil:
			delete(lastErr, pvc.UID)
		case ctx.Err() == nil && err.Error() != lastErr[pvc.UID]:
			lastErr[pvc.UID] = err.Error()
			logf("volume of PersistentVolumeClaim %s/%s: %v (retrying)", pvc.Namespace, pvc.Name, err)
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    sync,
		UpdateFunc: func(_, obj any) { sync(obj) },
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		return fmt.Errorf("PersistentVolumeClaim informer: %w", ctx.Err())
	}
	go func() {
		<-ctx.Done()
		factory.Shutdown()
	}()
	return nil
}

// syncClaim binds a pending claim to a volume of its own, or releases a deleted one.
func syncClaim(ctx context.Context, cs kubernetes.Interface, pvc *corev1.PersistentVolumeClaim) error {
	pvName := "pvc-" + string(pvc.UID)
	if pvc.DeletionTimestamp != nil {
		return releaseClaim(ctx, cs, pvc, pvName)
	}
	if pvc.Status.Phase == corev1.ClaimBound {
		return nil
	}
	if pvc.Spec.VolumeName != "" && pvc.Spec.VolumeName != pvName {
		return nil // pre-bound to a volume someone else made
	}
	size := resource.MustParse(defaultClaimSize)
	if q, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; ok {
		size = q
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pvName, Annotations: map[string]string{provisionedForAnnotation: pvc.Namespace + "/" + pvc.Name}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   pvc.Spec.AccessModes,
			VolumeMode:                    pvc.Spec.VolumeMode,
			StorageClassName:              ptr.Deref(pvc.Spec.StorageClassName, ""),
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/kubectl-trainjob-stack/" + pvName, Type: ptr.To(corev1.HostPathDirectoryOrCreate)},
			},
			ClaimRef: &corev1.ObjectReference{
				Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID, ResourceVersion: pvc.ResourceVersion,
			},
		},
	}
	created, err := cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err):
		if created, err = cs.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{}); err != nil {
			return err
		}
	case err != nil:
		return err
	}
	if created.Status.Phase != corev1.VolumeBound {
		created.Status.Phase = corev1.VolumeBound
		if _, err := cs.CoreV1().PersistentVolumes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}

	claims := cs.CoreV1().PersistentVolumeClaims(pvc.Namespace)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		claim, err := claims.Get(ctx, pvc.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if claim.UID != pvc.UID || claim.DeletionTimestamp != nil {
			return nil
		}
		claim.Spec.VolumeName = pvName
		metav1.SetMetaDataAnnotation(&claim.ObjectMeta, annBindCompleted, "yes")
		metav1.SetMetaDataAnnotation(&claim.ObjectMeta, annBoundByController, "yes")
		if claim, err = claims.Update(ctx, claim, metav1.UpdateOptions{}); err != nil {
			return err
		}
		claim.Status.Phase = corev1.ClaimBound
		claim.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: size}
		claim.Status.AccessModes = claim.Spec.AccessModes
		_, err = claims.UpdateStatus(ctx, claim, metav1.UpdateOptions{})
		return err
	})
}

// releaseClaim lets a deleted claim go, and deletes the volume made for it (reclaim policy Delete).
func releaseClaim(ctx context.Context, cs kubernetes.Interface, pvc *corev1.PersistentVolumeClaim, pvName string) error {
	pv, err := cs.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return err
	default:
		if i := slices.Index(pv.Finalizers, pvProtectionFinalizer); i >= 0 {
			pv.Finalizers = slices.Delete(pv.Finalizers, i, i+1)
			if _, err := cs.CoreV1().PersistentVolumes().Update(ctx, pv, metav1.UpdateOptions{}); err != nil {
				return err
			}
		}
		if err := cs.CoreV1().PersistentVolumes().Delete(ctx, pvName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	claims := cs.CoreV1().PersistentVolumeClaims(pvc.Namespace)
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		claim, err := claims.Get(ctx, pvc.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		i := slices.Index(claim.Finalizers, pvcProtectionFinalizer)
		if i < 0 {
			return nil
		}
		claim.Finalizers = slices.Delete(claim.Finalizers, i, i+1)
		_, err = claims.Update(ctx, claim, metav1.UpdateOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
