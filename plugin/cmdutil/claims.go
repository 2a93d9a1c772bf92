package cmdutil

import (
	"context"
	"sync"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ClaimTemplates is a reader for the one GPU count of a command that counts the GPUs of many TrainJobs or
// runtimes (pipeline.ReadClaims in list and runtimes): it reads the ResourceClaimTemplates of a namespace in
// one list, at the first Get of one there, rather than one request a TrainJob (create --gpu-claim makes a
// template per TrainJob). Anything else it reads with its client (a ResourceClaim a runtime names). Templates
// the user may not list, or a cluster without resource.k8s.io/v1, are none: their claims count no GPU.
type ClaimTemplates struct {
	c  client.Reader
	mu sync.Mutex
	// byNamespace are the templates of each namespace read, by name.
	byNamespace map[string]map[string]*resourcev1.ResourceClaimTemplate
}

var _ client.Reader = (*ClaimTemplates)(nil)

// NewClaimTemplates reads with c.
func NewClaimTemplates(c client.Reader) *ClaimTemplates {
	return &ClaimTemplates{c: c, byNamespace: map[string]map[string]*resourcev1.ResourceClaimTemplate{}}
}

// Get gets a ResourceClaimTemplate from the list of its namespace, anything else with the client.
func (r *ClaimTemplates) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	t, ok := obj.(*resourcev1.ResourceClaimTemplate)
	if !ok {
		return r.c.Get(ctx, key, obj, opts...)
	}
	templates, err := r.of(ctx, key.Namespace)
	if err != nil {
		return err
	}
	found, ok := templates[key.Name]
	if !ok {
		return apierrors.NewNotFound(resourcev1.Resource("resourceclaimtemplates"), key.Name)
	}
	found.DeepCopyInto(t)
	return nil
}

// List lists with the client.
func (r *ClaimTemplates) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return r.c.List(ctx, list, opts...)
}

// of are the templates of namespace, listed at the first call.
func (r *ClaimTemplates) of(ctx context.Context, namespace string) (map[string]*resourcev1.ResourceClaimTemplate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if templates, ok := r.byNamespace[namespace]; ok {
		return templates, nil
	}
	var list resourcev1.ResourceClaimTemplateList
	err := r.c.List(ctx, &list, client.InNamespace(namespace))
	if err != nil && !apierrors.IsForbidden(err) && !meta.IsNoMatchError(err) && !apierrors.IsNotFound(err) {
		return nil, err
	}
	templates := map[string]*resourcev1.ResourceClaimTemplate{}
	for i := range list.Items {
		templates[list.Items[i].Name] = &list.Items[i]
	}
	r.byNamespace[namespace] = templates
	return templates, nil
}
