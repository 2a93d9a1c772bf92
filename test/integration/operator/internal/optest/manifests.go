package optest

import (
	"context"
	"fmt"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
)

// Build runs `kustomize build` on a folder of config/ (through the
// kustomize API, which the pinned kustomize binary is built from) and
// returns the objects in kustomize's apply order (namespaces and CRDs
// first, webhook configurations last).
func Build(dir string) ([]*unstructured.Unstructured, error) {
	root, err := cluster.RepoRoot()
	if err != nil {
		return nil, err
	}
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	resources, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join(root, "config", dir))
	if err != nil {
		return nil, fmt.Errorf("kustomize build config/%s: %w", dir, err)
	}
	var objs []*unstructured.Unstructured
	for _, r := range resources.Resources() {
		// Through JSON: kustomize's maps hold int, not the int64 of
		// unstructured objects.
		data, err := r.MarshalJSON()
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(data); err != nil {
			return nil, err
		}
		objs = append(objs, u)
	}
	return objs, nil
}

// ApplyAll server-side applies objects in order, as `kubectl apply
// --server-side` would (field manager kubectl, conflicts forced).
func ApplyAll(ctx context.Context, c client.Client, objs []*unstructured.Unstructured) error {
	for _, u := range objs {
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u.DeepCopy()), client.FieldOwner("kubectl"), client.ForceOwnership); err != nil {
			return fmt.Errorf("apply %s %s: %w", u.GetKind(), client.ObjectKeyFromObject(u), err)
		}
	}
	return nil
}
