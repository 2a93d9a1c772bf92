package apply

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// creator creates the objects the Build phase returned, as field manager
// `trainer`. A custom resource (a JobSet, a PodGroup) is POSTed as JSON and
// the API server's answer is not decoded: the operator already holds what
// it sent, and the answer would only add what the server sets (uid,
// resourceVersion, timestamps, managed fields), which no plugin reads, and
// decoding a custom resource's JSON answer is costly. A Kubernetes kind (a ConfigMap, a Secret) goes through the client, in
// protobuf, and the answer fills the object.
type creator struct {
	client client.Client
	// config and httpClient reach the API server; without them (unit tests
	// on a fake client), every kind goes through the client.
	config     *rest.Config
	httpClient *http.Client
	codecs     serializer.CodecFactory

	mu   sync.Mutex
	rest map[schema.GroupVersionKind]rest.Interface
}

func newCreator(c client.Client, config *rest.Config, httpClient *http.Client, scheme *runtime.Scheme) *creator {
	return &creator{client: c, config: config, httpClient: httpClient, codecs: serializer.NewCodecFactory(scheme),
		rest: map[schema.GroupVersionKind]rest.Interface{}}
}

// create creates built, of kind gvk. Afterwards built is the object as
// stored (a Kubernetes kind) or as sent (a custom resource), without
// managed fields; a failed create leaves it as it was.
func (c *creator) create(ctx context.Context, built client.Object, gvk schema.GroupVersionKind) error {
	if c.config == nil || clientgoscheme.Scheme.Recognizes(gvk) {
		if err := c.client.Create(ctx, built, client.FieldOwner(FieldManager)); err != nil {
			return err
		}
		built.SetManagedFields(nil)
		return nil
	}
	mapping, err := c.client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return err
	}
	rc, err := c.restFor(gvk)
	if err != nil {
		return err
	}
	body, err := json.Marshal(built)
	if err != nil {
		return err
	}
	req := rc.Post().Resource(mapping.Resource.Resource).Param("fieldManager", FieldManager).
		SetHeader("Content-Type", runtime.ContentTypeJSON).Body(body)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		req = req.Namespace(built.GetNamespace())
	}
	return req.Do(ctx).Error()
}

// restFor is the REST client of gvk's group and version.
func (c *creator) restFor(gvk schema.GroupVersionKind) (rest.Interface, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if rc, ok := c.rest[gvk]; ok {
		return rc, nil
	}
	rc, err := apiutil.RESTClientForGVK(gvk, true, false, c.config, c.codecs, c.httpClient)
	if err != nil {
		return nil, err
	}
	c.rest[gvk] = rc
	return rc, nil
}
