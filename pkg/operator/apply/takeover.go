package apply

import (
	"bytes"
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/csaupgrade"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// takeOverCreate readies live for the apply of u: the fields the operator
// set when it created the object are owned by that create (field manager
// `trainer`, operation Update), and an apply leaving one of them out would
// not remove it. When u leaves one out, the create's fields are moved to the
// operator's apply first (csaupgrade). Resuming a TrainJob, say, changes
// only what the create set, and writes nothing more than the apply.
func (a *Applier) takeOverCreate(ctx context.Context, u *unstructured.Unstructured, live client.Object) error {
	var created *metav1.ManagedFieldsEntry
	for _, e := range live.GetManagedFields() {
		if e.Manager == FieldManager && e.Operation == metav1.ManagedFieldsOperationUpdate && e.Subresource == "" {
			created = &e
		}
	}
	if created == nil {
		return nil
	}
	if omits, err := omitsAny(u, created.FieldsV1); err != nil || !omits {
		return err
	}
	patch, err := csaupgrade.UpgradeManagedFieldsPatch(live, sets.New(FieldManager), FieldManager)
	if err != nil || patch == nil {
		return err
	}
	return a.client.Patch(ctx, live, client.RawPatch(types.JSONPatchType, patch))
}

// omitsAny tells whether u leaves out any of fields (the managed fields of
// a manager, in FieldsV1).
func omitsAny(u *unstructured.Unstructured, fields *metav1.FieldsV1) (bool, error) {
	if fields == nil {
		return false, nil
	}
	var set fieldpath.Set
	if err := set.FromJSON(bytes.NewReader(fields.Raw)); err != nil {
		return false, fmt.Errorf("decode managed fields: %w", err)
	}
	omits := false
	set.Iterate(func(p fieldpath.Path) {
		if !omits && !hasPath(u.Object, p) {
			omits = true
		}
	})
	return omits, nil
}

// hasPath tells whether the unstructured content obj has the field at p.
func hasPath(obj any, p fieldpath.Path) bool {
	for _, pe := range p {
		switch {
		case pe.FieldName != nil:
			m, ok := obj.(map[string]any)
			if !ok {
				return false
			}
			if obj, ok = m[*pe.FieldName]; !ok {
				return false
			}
		case pe.Index != nil:
			l, ok := obj.([]any)
			if !ok || *pe.Index >= len(l) {
				return false
			}
			obj = l[*pe.Index]
		case pe.Key != nil:
			m, ok := findItem(obj, func(item any) bool {
				m, ok := item.(map[string]any)
				return ok && matchesKey(m, *pe.Key)
			})
			if !ok {
				return false
			}
			obj = m
		case pe.Value != nil:
			v, ok := findItem(obj, func(item any) bool { return value.Equals(value.NewValueInterface(item), *pe.Value) })
			if !ok {
				return false
			}
			obj = v
		default:
			return false
		}
	}
	return true
}

// findItem returns the first item of the list l that matches.
func findItem(l any, matches func(any) bool) (any, bool) {
	items, _ := l.([]any)
	for _, item := range items {
		if matches(item) {
			return item, true
		}
	}
	return nil, false
}

// matchesKey tells whether the list item m has the key fields of key.
func matchesKey(m map[string]any, key value.FieldList) bool {
	for _, f := range key {
		v, ok := m[f.Name]
		if !ok || !value.Equals(value.NewValueInterface(v), f.Value) {
			return false
		}
	}
	return true
}
