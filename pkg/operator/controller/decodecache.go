package controller

import (
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// maxDecoded bounds the runtimes decodingCache keeps: a cluster has few
// runtimes, and each version of one is a snapshot's content.
const maxDecoded = 64

// decodingCache decodes each distinct content once. The TrainJobs of a
// runtime share the content of their snapshots (the runtime as it was), and
// every reconcile reads its snapshot: decoding its YAML was 15 % of the
// operator's CPU in make bench, a deep copy of the decoded object is a
// fraction of that. It caches only decodes without defaults or target.
type decodingCache struct {
	decoder runtime.Decoder

	mu      sync.Mutex
	decoded map[string]decoded
}

type decoded struct {
	obj runtime.Object
	gvk *schema.GroupVersionKind
}

func newDecodingCache(d runtime.Decoder) *decodingCache {
	return &decodingCache{decoder: d, decoded: map[string]decoded{}}
}

// Decode returns a copy of what the decoder made of data.
func (c *decodingCache) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	if defaults != nil || into != nil {
		return c.decoder.Decode(data, defaults, into)
	}
	c.mu.Lock()
	d, ok := c.decoded[string(data)]
	c.mu.Unlock()
	if ok {
		gvk := *d.gvk
		return d.obj.DeepCopyObject(), &gvk, nil
	}
	obj, gvk, err := c.decoder.Decode(data, nil, nil)
	if err != nil || gvk == nil {
		return obj, gvk, err
	}
	c.mu.Lock()
	if len(c.decoded) >= maxDecoded {
		forgetOne(c.decoded)
	}
	kept := *gvk
	c.decoded[string(data)] = decoded{obj: obj.DeepCopyObject(), gvk: &kept}
	c.mu.Unlock()
	return obj, gvk, nil
}

// forgetOne deletes any one entry of m: a runtime version no longer in use
// goes eventually.
func forgetOne[K comparable, V any](m map[K]V) {
	for k := range m {
		delete(m, k)
		return
	}
}
