package pipeline

import (
	"context"
	"fmt"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ReadClaims sets each pod set's DeviceRequests from the DRA claims of its
// pod (KEP-2782): the ResourceClaimTemplates and ResourceClaims they name,
// in namespace, read through r. A claim whose object does not exist, or a
// cluster without resource.k8s.io/v1, asks for nothing: the pods then wait
// for the scheduler, which says why; upstream counts such a claim's GPUs as
// 0 too.
func (i *RuntimeInfo) ReadClaims(ctx context.Context, r client.Reader, namespace string) error {
	for k := range i.PodSets {
		ps := &i.PodSets[k]
		ps.DeviceRequests = nil
		for _, c := range ps.Template.Spec.ResourceClaims {
			reqs, err := ClaimDeviceRequests(ctx, r, namespace, c.ResourceClaimName, c.ResourceClaimTemplateName)
			if err != nil {
				return fmt.Errorf("pod set %s, claim %s: %w", ps.Name, c.Name, err)
			}
			ps.DeviceRequests = append(ps.DeviceRequests, reqs...)
		}
	}
	return nil
}

// ClaimDeviceRequests are the device requests of the ResourceClaim named
// claim, else of the ResourceClaimTemplate named template, in namespace;
// none when neither is set or the object does not exist.
func ClaimDeviceRequests(ctx context.Context, r client.Reader, namespace string, claim, template *string) ([]resourcev1.DeviceRequest, error) {
	var reqs []resourcev1.DeviceRequest
	var err error
	switch {
	case claim != nil && *claim != "":
		var c resourcev1.ResourceClaim
		err = r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: *claim}, &c)
		reqs = c.Spec.Devices.Requests
	case template != nil && *template != "":
		var t resourcev1.ResourceClaimTemplate
		err = r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: *template}, &t)
		reqs = t.Spec.Spec.Devices.Requests
	}
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return nil, nil
	}
	return reqs, err
}
