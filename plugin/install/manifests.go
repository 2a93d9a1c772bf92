package install

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/version"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/kubectl-trainjob/kubectl-trainjob/config/crd"
	configinstall "github.com/kubectl-trainjob/kubectl-trainjob/config/install"
)

// What config/default names, and what --namespace and --image rewrite.
const (
	// DefaultNamespace is the operator's namespace in config/default.
	DefaultNamespace = "kubectl-trainjob-system"
	// OperatorDeployment and OperatorContainer run the operator (config/manager).
	OperatorDeployment = "kubectl-trainjob-operator"
	OperatorContainer  = "operator"
	// OperatorImageRepository is the image config/manager pins (tag latest).
	OperatorImageRepository = "ghcr.io/kubectl-trainjob/kubectl-trainjob"
	// ManagedLabel marks the Namespace as install's own: uninstall deletes a namespace only when it has it,
	// so that `install -n team-a` never deletes a namespace it found there.
	ManagedLabel      = "app.kubernetes.io/name"
	ManagedLabelValue = "kubectl-trainjob"
)

// Manifests returns config/default's objects, CRDs first (they must be served before the runtimes apply),
// then config/install's in kustomize's order.
func Manifests() ([]*unstructured.Unstructured, error) {
	names, err := fs.Glob(crd.Bases, "bases/*.yaml")
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	var objs []*unstructured.Unstructured
	for _, name := range names {
		data, err := fs.ReadFile(crd.Bases, name)
		if err != nil {
			return nil, err
		}
		crds, err := decode(data)
		if err != nil {
			return nil, fmt.Errorf("config/crd/%s: %w", name, err)
		}
		objs = append(objs, crds...)
	}
	rest, err := decode(configinstall.Manifests)
	if err != nil {
		return nil, fmt.Errorf("config/install/install.yaml: %w", err)
	}
	return append(objs, rest...), nil
}

func decode(data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, err
		}
		if len(u.Object) == 0 {
			continue
		}
		objs = append(objs, u)
	}
}

// SetNamespace moves the operator from namespace from to namespace to: the Namespace object, every
// namespaced object, the ServiceAccount the bindings name, and the Service the webhooks call.
func SetNamespace(objs []*unstructured.Unstructured, from, to string) error {
	if from == to {
		return nil
	}
	for _, u := range objs {
		if u.GetKind() == "Namespace" && u.GetAPIVersion() == "v1" && u.GetName() == from {
			u.SetName(to)
		}
		if u.GetNamespace() == from {
			u.SetNamespace(to)
		}
		var err error
		switch u.GetKind() {
		case "RoleBinding", "ClusterRoleBinding":
			err = eachMap(u.Object, []string{"subjects"}, func(m map[string]any) error {
				return replaceString(m, from, to, "namespace")
			})
		case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
			err = eachMap(u.Object, []string{"webhooks"}, func(m map[string]any) error {
				return replaceString(m, from, to, "clientConfig", "service", "namespace")
			})
		case "CustomResourceDefinition":
			err = replaceString(u.Object, from, to, "spec", "conversion", "webhook", "clientConfig", "service", "namespace")
		}
		if err != nil {
			return fmt.Errorf("%s/%s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	return nil
}

// eachMap calls fn on every item of the list at path.
func eachMap(obj map[string]any, path []string, fn func(map[string]any) error) error {
	items, _, err := unstructured.NestedSlice(obj, path...)
	if err != nil {
		return err
	}
	for i, item := range items {
		m, ok := item.(map[string]any)
		if !ok {
			continue
		}
		if err := fn(m); err != nil {
			return err
		}
		items[i] = m
	}
	if len(items) == 0 {
		return nil
	}
	return unstructured.SetNestedSlice(obj, items, path...)
}

func replaceString(obj map[string]any, from, to string, path ...string) error {
	v, found, err := unstructured.NestedString(obj, path...)
	if err != nil || !found || v != from {
		return err
	}
	return unstructured.SetNestedField(obj, to, path...)
}

// SetImage makes the operator's container run image.
func SetImage(objs []*unstructured.Unstructured, image string) error {
	d := find(objs, "Deployment", OperatorDeployment)
	if d == nil {
		return fmt.Errorf("the embedded manifests have no Deployment %s", OperatorDeployment)
	}
	set := false
	err := eachMap(d.Object, []string{"spec", "template", "spec", "containers"}, func(c map[string]any) error {
		if c["name"] == OperatorContainer {
			c["image"] = image
			set = true
		}
		return nil
	})
	if err == nil && !set {
		err = fmt.Errorf("the Deployment %s of the embedded manifests has no container %q", OperatorDeployment, OperatorContainer)
	}
	return err
}

// OperatorImage is the image the operator's container runs in objs.
func OperatorImage(objs []*unstructured.Unstructured) string {
	d := find(objs, "Deployment", OperatorDeployment)
	if d == nil {
		return ""
	}
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	for _, c := range containers {
		if m, ok := c.(map[string]any); ok && m["name"] == OperatorContainer {
			image, _ := m["image"].(string)
			return image
		}
	}
	return ""
}

// DefaultImage is the operator image that goes with this binary: the release of the same version when the
// binary is a release (vX.Y.Z, no pre-release), else the manifests' own (the latest tag).
func DefaultImage(objs []*unstructured.Unstructured, binaryVersion string) string {
	if v, err := version.ParseSemantic(binaryVersion); err == nil && v.PreRelease() == "" && v.BuildMetadata() == "" && binaryVersion[0] == 'v' {
		return OperatorImageRepository + ":" + binaryVersion
	}
	return OperatorImage(objs)
}

func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, u := range objs {
		if u.GetKind() == kind && u.GetName() == name {
			return u
		}
	}
	return nil
}
