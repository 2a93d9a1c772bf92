package snapshot

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// decodingCache decodes each distinct content once. The TrainJobs of a
// runtime share the content of their snapshots (the runtime as it was), and
// every reconcile reads its snapshot: decoding its YAML costs far more
// than a deep copy of the decoded object. It caches only decodes without defaults or target.
type decodingCache struct {
	decoder runtime.Decoder
	decoded VersionCache[string, decoded]
}

type decoded struct {
	obj runtime.Object
	gvk *schema.GroupVersionKind
}

func newDecodingCache(d runtime.Decoder) *decodingCache {
	return &decodingCache{decoder: d}
}

// Decode returns a copy of what the decoder made of data.
func (c *decodingCache) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	if defaults != nil || into != nil {
		return c.decoder.Decode(data, defaults, into)
	}
	if d, ok := c.decoded.Get(string(data)); ok {
		gvk := *d.gvk
		return d.obj.DeepCopyObject(), &gvk, nil
	}
	obj, gvk, err := c.decoder.Decode(data, nil, nil)
	if err != nil || gvk == nil {
		return obj, gvk, err
	}
	kept := *gvk
	c.decoded.Add(string(data), decoded{obj: obj.DeepCopyObject(), gvk: &kept})
	return obj, gvk, nil
}
