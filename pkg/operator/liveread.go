package operator

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator/apply"
)

// liveOnMiss is the client the plugins read through. What the reconcile
// itself applied comes first: the cache may not have it yet. The cache
// holds only the ConfigMaps and Secrets the operator labelled; one it does
// not hold may still exist (written by another controller, or by this
// operator a moment ago), so a plugin asking whether it exists gets the API
// server's answer. A plugin asks such questions only until it has built the
// object (MPI's SSH key Secret), so the live reads are few.
type liveOnMiss struct {
	client.Client
	live client.Reader
}

// scopedKinds are the kinds the cache selects by label.
var scopedKinds = map[schema.GroupKind]bool{
	{Kind: "ConfigMap"}: true,
	{Kind: "Secret"}:    true,
}

// liveKinds are read from the API server only: there is one ResourceClaim
// per GPU pod of the cluster, which the cache must not hold, and the
// pipeline reads one only when a runtime names it (KEP-2782).
var liveKinds = map[schema.GroupKind]bool{
	{Group: "resource.k8s.io", Kind: "ResourceClaim"}: true,
}

// Get reads what the reconcile of ctx wrote, else from the cache, else from
// the API server when the cache does not have a ConfigMap or Secret.
func (c *liveOnMiss) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	gvk, gvkErr := apiutil.GVKForObject(obj, c.Scheme())
	if gvkErr == nil && apply.Written(ctx, gvk, key, obj) {
		return nil
	}
	if gvkErr == nil && liveKinds[gvk.GroupKind()] {
		return c.live.Get(ctx, key, obj, opts...)
	}
	err := c.Client.Get(ctx, key, obj, opts...)
	if !apierrors.IsNotFound(err) || gvkErr != nil || !scopedKinds[gvk.GroupKind()] {
		return err
	}
	return c.live.Get(ctx, key, obj, opts...)
}
