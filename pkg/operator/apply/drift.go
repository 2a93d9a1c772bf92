package apply

import (
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// drifted tells whether current no longer holds what the operator built:
// a label or an annotation it set is gone or changed, or a field it set
// differs. What others added and the operator does not set (defaults, the
// status, a label of theirs) is not drift. Only a write of the operator's
// brings the hash annotation, so an object with the hash differs from built
// only where someone else changed it.
func drifted(current, built client.Object) bool {
	if !contains(current.GetLabels(), built.GetLabels()) || !contains(current.GetAnnotations(), built.GetAnnotations()) {
		return true
	}
	have, err := runtime.DefaultUnstructuredConverter.ToUnstructured(current)
	if err != nil {
		return true
	}
	want, err := runtime.DefaultUnstructuredConverter.ToUnstructured(built)
	if err != nil {
		return true
	}
	for k, v := range want {
		if k == "metadata" || k == "status" || k == "apiVersion" || k == "kind" {
			continue
		}
		if !holds(have[k], v) {
			return true
		}
	}
	return false
}

// contains tells whether every entry of want is in have.
func contains(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// holds tells whether the unstructured value have holds want: every field
// of a map that want sets is held, lists have want's items in want's order
// (and no others: an item someone added to a list the operator sets is
// drift), scalars are equal. An empty or null value in want is held by an
// absent one, as the API server drops them.
func holds(have, want any) bool {
	switch w := want.(type) {
	case nil:
		return true
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return len(w) == 0 && have == nil
		}
		for k, v := range w {
			if !holds(h[k], v) {
				return false
			}
		}
		return true
	case []any:
		h, ok := have.([]any)
		if !ok {
			return len(w) == 0 && have == nil
		}
		if len(h) != len(w) {
			return false
		}
		for i := range w {
			if !holds(h[i], w[i]) {
				return false
			}
		}
		return true
	case string:
		if w == "" && have == nil {
			return true
		}
	}
	return equality.Semantic.DeepEqual(have, want)
}
