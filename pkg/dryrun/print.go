package dryrun

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
)

// Redacted replaces each Secret value unless secrets are shown.
const Redacted = "<redacted>"

// ToUnstructured turns built objects into what the API server would
// receive: no status, no null creationTimestamp, Secret data redacted
// unless showSecrets, and then the Secret's applied hash too: it is a hash
// of the data (and of a generated key, a different one at each run).
func ToUnstructured(objs []client.Object, showSecrets bool) ([]map[string]any, error) {
	out := make([]map[string]any, 0, len(objs))
	for _, o := range objs {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			return nil, fmt.Errorf("%s/%s: %w", o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), err)
		}
		delete(m, "status")
		unstructured.RemoveNestedField(m, "metadata", "creationTimestamp")
		if m["kind"] == "Secret" && !showSecrets {
			for _, key := range []string{"data", "stringData"} {
				if data, ok := m[key].(map[string]any); ok {
					for k := range data {
						data[k] = Redacted
					}
				}
			}
			if _, ok, _ := unstructured.NestedString(m, "metadata", "annotations", pipeline.AppliedHashAnnotation); ok {
				_ = unstructured.SetNestedField(m, Redacted, "metadata", "annotations", pipeline.AppliedHashAnnotation)
			}
		}
		out = append(out, m)
	}
	return out, nil
}

// WriteYAML writes objects as a YAML stream.
func WriteYAML(w io.Writer, objs []map[string]any) error {
	for i, o := range objs {
		data, err := yaml.Marshal(o)
		if err != nil {
			return err
		}
		if i > 0 {
			if _, err := io.WriteString(w, "---\n"); err != nil {
				return err
			}
		}
		if _, err := w.Write(data); err != nil {
			return err
		}
	}
	return nil
}

// WriteJSON writes objects as a v1 List, as kubectl does for several objects.
func WriteJSON(w io.Writer, objs []map[string]any) error {
	items := slices.Clone(objs)
	if items == nil {
		items = []map[string]any{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "    ")
	return enc.Encode(map[string]any{"apiVersion": "v1", "kind": "List", "items": items, "metadata": map[string]any{}})
}
