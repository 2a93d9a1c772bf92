package pipeline

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/scheme"
)

// Handle is what a plugin may use beyond the RuntimeInfo, as the
// scheduler's framework.Handle: a reader of the cluster and the operator's
// facts. Offline (render, describe-pipeline) the reader is a cluster that
// holds only what the input files hold, so a plugin has one code path: an
// object it looks for and that is not there is NotFound, online or not.
type Handle interface {
	// Reader reads the cluster; in the operator, through its cache.
	Reader() client.Reader
	// RESTMapper tells which kinds the cluster serves (offline: none).
	RESTMapper() meta.RESTMapper
	// Operator tells plugins where the operator runs and serves.
	Operator() OperatorInfo
	// ServingCA is the CA bundle of the operator's serving certificate.
	ServingCA() ServingCA
}

// ServingCA is the CA bundle (PEM) that the certificate of the operator's
// webhook and status servers chains to: what their clients trust.
type ServingCA interface {
	// Bundle is the bundle now; it waits for the first one until ctx ends.
	Bundle(ctx context.Context) ([]byte, error)
	// Notify calls f after each change of the bundle.
	Notify(f func())
}

// NewHandle is the Handle of a reader, its cluster's kinds, and the
// operator's facts; its ServingCA is read from the webhook certificate
// Secret at each call.
func NewHandle(r client.Reader, m meta.RESTMapper, op OperatorInfo) Handle {
	return handle{reader: r, mapper: m, operator: op, ca: secretCA{reader: r, operator: op}}
}

// NewOperatorHandle is the operator's Handle: as NewHandle, but the
// ServingCA is the one the operator keeps in memory from its own
// certificate management, so that no build reads the Secret (and none
// fails while the Secret is gone).
func NewOperatorHandle(r client.Reader, m meta.RESTMapper, op OperatorInfo, ca ServingCA) Handle {
	return handle{reader: r, mapper: m, operator: op, ca: ca}
}

// OfflineHandle is the Handle of the framework without a cluster: its
// reader holds objs, and answers NotFound for anything else; it serves no
// kinds beyond the built-in ones. The ServingCA is the webhook certificate
// Secret's among objs.
func OfflineHandle(op OperatorInfo, objs ...client.Object) Handle {
	r := newObjectReader(objs)
	return handle{reader: r, mapper: meta.NewDefaultRESTMapper(nil), operator: op, ca: secretCA{reader: r, operator: op}}
}

type handle struct {
	reader   client.Reader
	mapper   meta.RESTMapper
	operator OperatorInfo
	ca       ServingCA
}

func (h handle) Reader() client.Reader       { return h.reader }
func (h handle) RESTMapper() meta.RESTMapper { return h.mapper }
func (h handle) Operator() OperatorInfo      { return h.operator }
func (h handle) ServingCA() ServingCA        { return h.ca }

// ServingCAKey is the CA's key in the webhook certificate Secret.
const ServingCAKey = "ca.crt"

// secretCA reads the CA from the webhook certificate Secret.
type secretCA struct {
	reader   client.Reader
	operator OperatorInfo
}

func (c secretCA) Bundle(ctx context.Context) ([]byte, error) {
	key := client.ObjectKey{Namespace: c.operator.Namespace, Name: c.operator.WebhookSecretName}
	var secret corev1.Secret
	if err := c.reader.Get(ctx, key, &secret); err != nil {
		return nil, fmt.Errorf("read webhook certificate Secret %s: %w", key, err)
	}
	ca := secret.Data[ServingCAKey]
	if len(ca) == 0 {
		return nil, fmt.Errorf("webhook certificate Secret %s has no %s yet", key, ServingCAKey)
	}
	return ca, nil
}

// Notify does nothing: a Secret read at each call follows it anyway.
func (secretCA) Notify(func()) {}

// objectReader is a cluster made of a few objects, for the offline handle.
type objectReader struct {
	scheme  *runtime.Scheme
	objects map[schema.GroupVersionKind]map[client.ObjectKey]map[string]any
}

func newObjectReader(objs []client.Object) *objectReader {
	r := &objectReader{scheme: scheme.New(), objects: map[schema.GroupVersionKind]map[client.ObjectKey]map[string]any{}}
	for _, obj := range objs {
		gvk, err := r.gvk(obj)
		if err != nil {
			// A kind the binary does not know is no object a plugin reads.
			continue
		}
		content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			continue
		}
		if r.objects[gvk] == nil {
			r.objects[gvk] = map[client.ObjectKey]map[string]any{}
		}
		r.objects[gvk][client.ObjectKeyFromObject(obj)] = content
	}
	return r
}

// gvk is obj's kind: its TypeMeta's (unstructured objects, metadata-only
// reads), else the scheme's.
func (r *objectReader) gvk(obj runtime.Object) (schema.GroupVersionKind, error) {
	if gvk := obj.GetObjectKind().GroupVersionKind(); gvk.Kind != "" {
		return gvk, nil
	}
	return apiutil.GVKForObject(obj, r.scheme)
}

// Get copies the object of key and obj's kind into obj, or answers NotFound.
func (r *objectReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	gvk, err := r.gvk(obj)
	if err != nil {
		return err
	}
	content, ok := r.objects[gvk][key]
	if !ok {
		// Worded as the API server words it, with the resource's name.
		plural, _ := meta.UnsafeGuessKindToResource(gvk)
		return apierrors.NewNotFound(plural.GroupResource(), key.Name)
	}
	if u, ok := obj.(*unstructured.Unstructured); ok {
		u.Object = runtime.DeepCopyJSON(content)
		return nil
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(runtime.DeepCopyJSON(content), obj); err != nil {
		return fmt.Errorf("offline %s %s: %w", gvk.Kind, key, err)
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return nil
}

// List lists the objects of the list's kind that opts select (namespace,
// labels), by namespace and name.
func (r *objectReader) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	gvk, err := r.gvk(list)
	if err != nil {
		return err
	}
	o := (&client.ListOptions{}).ApplyOptions(opts)
	gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	keys := slices.SortedFunc(maps.Keys(r.objects[gvk]), func(a, b client.ObjectKey) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	var items []runtime.Object
	for _, key := range keys {
		u := &unstructured.Unstructured{Object: runtime.DeepCopyJSON(r.objects[gvk][key])}
		if o.Namespace != "" && key.Namespace != o.Namespace || o.LabelSelector != nil && !o.LabelSelector.Matches(labels.Set(u.GetLabels())) {
			continue
		}
		if ul, ok := list.(*unstructured.UnstructuredList); ok {
			ul.Items = append(ul.Items, *u)
			continue
		}
		obj, err := r.scheme.New(gvk)
		if err != nil {
			return err
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
			return err
		}
		items = append(items, obj)
	}
	if _, ok := list.(*unstructured.UnstructuredList); ok {
		return nil
	}
	return meta.SetList(list, items)
}
