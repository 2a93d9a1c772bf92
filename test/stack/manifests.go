package stack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
)

// FieldOwner is the field manager of everything this package applies.
const FieldOwner = "kubectl-trainjob-stack"

// kustomizationDir is the kustomization that installs everything, relative to the repository root.
const kustomizationDir = "config/default"

// buildManifests runs `kustomize build config/default` with the kustomize `make tools` built, and returns the
// objects in kustomize's order (namespaces and CRDs first, webhook configurations last).
func buildManifests(ctx context.Context, root string) ([]*unstructured.Unstructured, error) {
	return kustomizeBuild(ctx, root, filepath.Join(root, kustomizationDir))
}

// kustomizeBuild runs `kustomize build` (the kustomize `make tools` built) with args and decodes its output.
func kustomizeBuild(ctx context.Context, root string, args ...string) ([]*unstructured.Unstructured, error) {
	toolsDir := os.Getenv(cluster.ToolsEnv)
	if toolsDir == "" {
		toolsDir = filepath.Join(root, "bin", "tools")
	}
	kustomize := filepath.Join(toolsDir, "kustomize")
	if _, err := os.Stat(kustomize); err != nil {
		return nil, fmt.Errorf("kustomize not found in %s: run `make tools` (or set %s)", toolsDir, cluster.ToolsEnv)
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, kustomize, append([]string{"build"}, args...)...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return decodeObjects(out)
}

// decodeObjects splits a multi-document YAML stream into objects, skipping empty documents.
func decodeObjects(data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

// applyObjects applies objs server-side, in order, taking over fields others set (as `kubectl apply
// --server-side --force-conflicts` does).
func applyObjects(ctx context.Context, c client.Client, objs []*unstructured.Unstructured) error {
	for _, u := range objs {
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
			return fmt.Errorf("apply %s %s: %w", u.GetKind(), client.ObjectKeyFromObject(u), err)
		}
	}
	return nil
}

// ApplyFile applies every object of a YAML file server-side, as `kubectl apply --server-side -n namespace -f
// path` does: namespaced objects that name no namespace go to namespace.
func ApplyFile(ctx context.Context, c client.Client, path, namespace string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	objs, err := decodeObjects(data)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	for _, u := range objs {
		namespaced, err := c.IsObjectNamespaced(u)
		if err != nil {
			return fmt.Errorf("%s: %s: %w", path, u.GetKind(), err)
		}
		if namespaced && u.GetNamespace() == "" {
			u.SetNamespace(namespace)
		}
	}
	return applyObjects(ctx, c, objs)
}

// webhooksByURL points every webhook of a Mutating- or ValidatingWebhookConfiguration at
// https://localhost:port/<path of its Service reference>: nothing serves the Service, the operator listens
// on loopback, and the certificate it generates is valid for "localhost" (certManagement.extraDNSNames).
func webhooksByURL(u *unstructured.Unstructured, port int) error {
	webhooks, _, err := unstructured.NestedSlice(u.Object, "webhooks")
	if err != nil {
		return err
	}
	for i, w := range webhooks {
		hook, ok := w.(map[string]any)
		if !ok {
			return fmt.Errorf("%s %s: webhooks[%d] is not an object", u.GetKind(), u.GetName(), i)
		}
		path, _, _ := unstructured.NestedString(hook, "clientConfig", "service", "path")
		unstructured.RemoveNestedField(hook, "clientConfig", "service")
		if err := unstructured.SetNestedField(hook, "https://localhost:"+strconv.Itoa(port)+path, "clientConfig", "url"); err != nil {
			return err
		}
	}
	return unstructured.SetNestedSlice(u.Object, webhooks, "webhooks")
}
