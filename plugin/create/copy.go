package create

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
)

// RerunOfAnnotation is set by rerun on the copy: the name of the TrainJob it runs again.
const RerunOfAnnotation = "trainer.kubeflow.org/rerun-of"

// copyOf is the TrainJob --from names as its creator wrote it (asWritten), changed by the flags. rerun names
// the copy when NEW is not given, and says what it is a rerun of.
func (o *CreateOptions) copyOf(ctx context.Context) (*trainer.TrainJob, error) {
	src, err := cmdutil.GetTrainJob(ctx, o.client, o.spec.namespace, o.From)
	if err != nil {
		return nil, err
	}
	o.from = src
	tj, err := asWritten(src)
	if err != nil {
		return nil, err
	}
	tj.TypeMeta = metav1.TypeMeta{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind}
	tj.Namespace, tj.Name = src.Namespace, o.spec.name
	if o.rerun && tj.Name == "" {
		if tj.Name, err = o.rerunName(ctx, src.Name); err != nil {
			return nil, err
		}
	}
	if err := checkName(trainer.TrainJobKind, tj.Name); err != nil {
		return nil, err
	}
	if err := o.spec.applyTo(tj); err != nil {
		return nil, err
	}
	if o.rerun {
		tj.Annotations = merged(tj.Annotations, map[string]string{RerunOfAnnotation: src.Name})
	}
	return tj, nil
}

// asWritten is a TrainJob that holds what src's creator wrote: the fields of its spec and the annotations
// its creator set, and all its labels — no name, status or what the API server keeps.
//
// What the creator wrote is told by src's managedFields, not by kubectl apply's last-applied annotation: the
// API server records managedFields for every create, apply and update, while only kubectl apply (and create
// --save-config) writes that annotation — kubectl trainjob create, kubectl create, the Kubeflow SDK and
// server-side apply do not. The creator is every field manager of the TrainJob itself (not of its status)
// that owns spec.runtimeRef: it is required and immutable, so only the create set it (or an apply of the same
// file again). Left out are the fields other managers took since — Kueue's runtimePatches and its changes of
// spec.suspend, a later kubectl edit, the status — and what a mutating webhook added, which the API server
// does not record (the runtimePatches' times). A later change by the creator's own manager (suspend, resume)
// counts as written. The CRD schema's defaults are recorded as the creator's and so copied, which changes
// nothing: a new TrainJob gets the same.
func asWritten(src *trainer.TrainJob) (*trainer.TrainJob, error) {
	var fields map[string]any
	for _, e := range src.ManagedFields {
		if e.Subresource != "" || e.FieldsV1 == nil {
			continue
		}
		var f map[string]any
		if err := json.Unmarshal(e.FieldsV1.Raw, &f); err != nil {
			return nil, fmt.Errorf("cannot read the fields field manager %s owns of TrainJob %s: %w", e.Manager, src.Name, err)
		}
		if owns(f, "f:spec", "f:runtimeRef") {
			fields = union(fields, f)
		}
	}
	if fields == nil {
		return nil, fmt.Errorf("cannot tell what the creator of TrainJob %s wrote: no field manager owns its spec.runtimeRef "+
			"(kubectl get trainjob %s --show-managed-fields -o yaml shows them); copy it by hand: kubectl get trainjob %s -o yaml, edit, then kubectl trainjob create -f FILE",
			src.Name, src.Name, src.Name)
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(src)
	if err != nil {
		return nil, err
	}
	kept, _ := prune(obj, fields).(map[string]any)
	out := &trainer.TrainJob{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(map[string]any{"spec": kept["spec"]}, out); err != nil {
		return nil, fmt.Errorf("cannot copy the spec of TrainJob %s: %w", src.Name, err)
	}
	out.Labels = maps.Clone(src.Labels)
	metadata, _ := kept["metadata"].(map[string]any)
	annotations, _ := metadata["annotations"].(map[string]any)
	for k, v := range annotations {
		value, ok := v.(string)
		// kubectl apply's record of the last apply is about the original, and a copy is no rerun of what the
		// original reran.
		if !ok || k == corev1.LastAppliedConfigAnnotation || k == RerunOfAnnotation {
			continue
		}
		out.Annotations = merged(out.Annotations, map[string]string{k: value})
	}
	return out, nil
}

// owns tells whether the managed fields f (FieldsV1) hold the path of "f:NAME" keys.
func owns(f map[string]any, path ...string) bool {
	for _, key := range path {
		sub, ok := f[key].(map[string]any)
		if !ok {
			return false
		}
		f = sub
	}
	return true
}

// union is the managed fields of a and b together.
func union(a, b map[string]any) map[string]any {
	if a == nil {
		a = map[string]any{}
	}
	for k, bv := range b {
		if av, ok := a[k].(map[string]any); ok {
			if bm, ok := bv.(map[string]any); ok {
				a[k] = union(av, bm)
				continue
			}
		}
		a[k] = bv
	}
	return a
}

// prune is what of the value v the managed fields f name, in the API server's FieldsV1 notation: "f:NAME" is
// the field NAME of an object, "k:{…}" the item of a list whose keys have those values, "v:VALUE" the item of
// a set, "i:N" the item at index N, and "." the item itself. A field named with nothing below it is kept
// whole (a scalar, or an atomic list or map).
func prune(v any, f map[string]any) any {
	children := map[string]any{}
	for k, sub := range f {
		if k != "." {
			children[k] = sub
		}
	}
	if len(children) == 0 {
		return v
	}
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, sub := range children {
			name, ok := strings.CutPrefix(k, "f:")
			if !ok {
				continue
			}
			if child, ok := v[name]; ok {
				out[name] = prune(child, asFields(sub))
			}
		}
		return out
	case []any:
		var out []any
		for i, item := range v {
			if sub, keys, ok := itemFields(children, i, item); ok {
				kept := prune(item, sub)
				// An item's keys are part of it even where its fields do not list them.
				if m, ok := kept.(map[string]any); ok {
					for name := range keys {
						if _, ok := m[name]; !ok {
							m[name] = item.(map[string]any)[name]
						}
					}
				}
				out = append(out, kept)
			}
		}
		return out
	}
	return v
}

// itemFields are the managed fields of the item at index i of a list, and the values of its keys when it is
// named by them ("k:{…}"); ok is false when f does not name it.
func itemFields(f map[string]any, i int, item any) (sub, keys map[string]any, ok bool) {
	for k, s := range f {
		switch {
		case strings.HasPrefix(k, "k:"):
			var want map[string]any
			if err := json.Unmarshal([]byte(k[2:]), &want); err != nil {
				continue
			}
			m, matches := item.(map[string]any)
			for name, value := range want {
				matches = matches && sameJSON(m[name], value)
			}
			if matches {
				return asFields(s), want, true
			}
		case strings.HasPrefix(k, "v:"):
			var want any
			if json.Unmarshal([]byte(k[2:]), &want) == nil && sameJSON(item, want) {
				return asFields(s), nil, true
			}
		case strings.HasPrefix(k, "i:"):
			if n, err := strconv.Atoi(k[2:]); err == nil && n == i {
				return asFields(s), nil, true
			}
		}
	}
	return nil, nil, false
}

func asFields(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// sameJSON tells whether a and b are the same JSON value (an object's int64 and the key's float64 alike).
func sameJSON(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && string(ja) == string(jb)
}

// rerunSuffix is what rerun appends to a name when it chooses the name of the copy.
var rerunSuffix = regexp.MustCompile(`-rerun-([1-9][0-9]*)$`)

// rerunName is the name of the next run of the TrainJob from: BASE-rerun-N, BASE being from without a
// -rerun-N of its own and N one more than the highest of the namespace's TrainJobs named so. A counter rather
// than generateName's random suffix: the names sort in the order of the runs, say which run each is, and are
// the names the user types next (status, logs).
func (o *CreateOptions) rerunName(ctx context.Context, from string) (string, error) {
	base := rerunSuffix.ReplaceAllString(from, "")
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(trainer.GroupVersion.WithKind(trainer.TrainJobKind + "List"))
	if err := o.client.List(ctx, list, client.InNamespace(o.spec.namespace)); err != nil {
		return "", fmt.Errorf("cannot choose a name for the rerun of %s: %w; give one: kubectl trainjob rerun %s NEW", from, cmdutil.DescribeError(err, o.spec.namespace, ""), from)
	}
	last := 0
	for _, item := range list.Items {
		rest, ok := strings.CutPrefix(item.Name, base)
		if m := rerunSuffix.FindStringSubmatch(rest); ok && m != nil && m[0] == rest {
			n, _ := strconv.Atoi(m[1])
			last = max(last, n)
		}
	}
	name := fmt.Sprintf("%s-rerun-%d", base, last+1)
	if len(name) > validation.DNS1035LabelMaxLength {
		return "", fmt.Errorf("the rerun of %s would be named %s, longer than %d characters: give a name: kubectl trainjob rerun %s NEW", from, name, validation.DNS1035LabelMaxLength, from)
	}
	return name, nil
}
