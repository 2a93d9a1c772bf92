// Package render_test checks the promise of `kubectl trainjob render`: for
// the operator's configuration, it prints exactly the objects the operator
// applies. One API server and one operator with the TrainJobStatus gate on
// (whose plugin adds a ConfigMap and changes the pods) serve the package.
package render_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	"sigs.k8s.io/yaml"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/config"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/render"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/integration/operator/internal/optest"
)

var (
	env *optest.Env
	op  *optest.Operator
)

func TestMain(m *testing.M) {
	os.Exit(optest.Main(m, func(ctx context.Context, e *optest.Env) error {
		env = e
		cfg, err := optest.NewConfig(e.LogDir)
		if err != nil {
			return err
		}
		cfg.FeatureGates[config.FeatureTrainJobStatus] = true
		if err := optest.InstallWebhooks(ctx, e.Client, *cfg.Webhook.Port); err != nil {
			return err
		}
		if op, err = optest.StartOperator(ctx, e.Cluster.Config, cfg); err != nil {
			return err
		}
		if err := optest.Poll(ctx, time.Minute, op.Ready); err != nil {
			return err
		}
		return optest.Poll(ctx, time.Minute, func(ctx context.Context) error { return optest.WebhooksServed(ctx, e.Client) })
	}))
}

const runtimeYAML = `
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainingRuntime
metadata:
  name: torch-distributed
  labels: {trainer.kubeflow.org/framework: torch}
spec:
  mlPolicy: {numNodes: 1, torch: {}}
  template:
    spec:
      replicatedJobs:
      - name: node
        template:
          metadata:
            labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}
          spec:
            template:
              spec:
                containers:
                - name: node
                  image: pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime
                  command: [torchrun, /workspace/train.py]
`

const trainJobYAML = `
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: fine-tune
spec:
  runtimeRef: {name: torch-distributed, kind: TrainingRuntime}
  trainer:
    numNodes: 2
    env: [{name: EPOCHS, value: "3"}]
    resourcesPerNode:
      limits: {nvidia.com/gpu: 4}
`

// TestRenderIsWhatTheOperatorApplies: `render --feature-gates
// TrainJobStatus=true`, given the operator's configuration file and what
// the cluster holds (the TrainJob as stored, its runtime, the webhook
// certificate Secret), prints the objects the operator with the gate on
// applied, byte for byte: the same objects, the same fields, labels and
// annotations (the applied hash is of the whole object as built); only
// what the API server sets (uid, resourceVersion, generation,
// creationTimestamp, managedFields, status) is left out of the comparison.
func TestRenderIsWhatTheOperatorApplies(t *testing.T) {
	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	rt := &trainer.TrainingRuntime{}
	tj := &trainer.TrainJob{}
	// The runtime first: the webhook refuses a TrainJob whose runtime does not exist (a map's order is random).
	for _, d := range []struct {
		doc string
		obj client.Object
	}{{runtimeYAML, rt}, {trainJobYAML, tj}} {
		doc, obj := d.doc, d.obj
		if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
			t.Fatal(err)
		}
		obj.SetNamespace(ns)
		if err := env.Client.Create(t.Context(), obj); err != nil {
			t.Fatalf("create %s: %v", obj.GetName(), err)
		}
	}
	jobSet := &jobsetv1alpha2.JobSet{}
	caConfigMap := &corev1.ConfigMap{}
	optest.Eventually(t, "the operator applies the JobSet and the CA ConfigMap", func(ctx context.Context) error {
		if err := optest.Get(ctx, env.Client, client.ObjectKeyFromObject(tj), jobSet); err != nil {
			return err
		}
		return optest.Get(ctx, env.Client, client.ObjectKey{Namespace: ns, Name: tj.Name + "-tls-config"}, caConfigMap)
	})
	optest.Settled(t)

	// What render is given: the operator's configuration without its gates
	// (they come from --feature-gates), and the cluster's objects as
	// `kubectl get -o yaml` prints them.
	dir := t.TempDir()
	cfg := *op.Config
	cfg.FeatureGates = nil
	data, err := yaml.Marshal(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	configFile := writeFile(t, dir, "config.yaml", data)
	stored := &trainer.TrainJob{}
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(tj), stored); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(rt), rt); err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: optest.Namespace, Name: op.Config.CertManagement.WebhookSecretName}, secret); err != nil {
		t.Fatal(err)
	}
	out := runRender(t, "-f", writeYAML(t, dir, "trainjob.yaml", stored), "-f", writeYAML(t, dir, "webhook-cert.yaml", secret),
		"--runtime", writeYAML(t, dir, "runtime.yaml", rt), "--config", configFile, "--feature-gates", "TrainJobStatus=true")

	rendered := decodeAll(t, out)
	var names []string
	for _, r := range rendered {
		names = append(names, r.GetKind()+"/"+r.GetName())
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(r.GroupVersionKind())
		if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(r), live); err != nil {
			t.Errorf("render printed %s %s, which the operator did not apply: %v", r.GetKind(), r.GetName(), err)
			continue
		}
		if r.GetAnnotations()[pipeline.AppliedHashAnnotation] == "" {
			t.Errorf("%s %s: render printed no %s", r.GetKind(), r.GetName(), pipeline.AppliedHashAnnotation)
		}
		withoutServerFields(live)
		if diff := cmp.Diff(r.Object, live.Object); diff != "" {
			t.Errorf("%s %s: render (-) and the operator (+) differ:\n%s", r.GetKind(), r.GetName(), diff)
		}
	}
	if want := []string{"ConfigMap/" + caConfigMap.Name, "JobSet/" + jobSet.Name}; !slices.Equal(names, want) {
		t.Errorf("render printed %v, want %v: the objects the operator applied, in its order", names, want)
	}
}

// withoutServerFields drops what the API server sets on an object.
func withoutServerFields(u *unstructured.Unstructured) {
	for _, f := range []string{"uid", "resourceVersion", "generation", "creationTimestamp", "managedFields"} {
		unstructured.RemoveNestedField(u.Object, "metadata", f)
	}
	unstructured.RemoveNestedField(u.Object, "status")
}

// writeYAML writes obj, without its managed fields, to dir/name.
func writeYAML(t *testing.T, dir, name string, obj client.Object) string {
	t.Helper()
	obj = obj.DeepCopyObject().(client.Object)
	obj.SetManagedFields(nil)
	gvk, err := apiutil.GVKForObject(obj, env.Client.Scheme())
	if err != nil {
		t.Fatal(err)
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	data, err := yaml.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, dir, name, data)
}

func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// runRender runs `kubectl trainjob render ARGS`, with the operator's
// out-of-tree plugins, and returns what it printed.
func runRender(t *testing.T, args ...string) string {
	t.Helper()
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
	var out, errOut bytes.Buffer
	streams := genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}
	root := plugin.NewRootCommand(cmdutil.NewFactory(), streams, render.NewCmd(optest.OutOfTree()))
	root.SetArgs(append([]string{"render"}, args...))
	if err := root.ExecuteContext(t.Context()); err != nil {
		t.Fatalf("render: %v\n%s", err, errOut.String())
	}
	return out.String()
}

// decodeAll decodes the YAML documents render printed.
func decodeAll(t *testing.T, out string) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(out), 4096)
	for {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return objs
			}
			t.Fatalf("render's output: %v\n%s", err, out)
		}
		// Unstructured's own decoding keeps integers int64, as the client does.
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw); err != nil {
			t.Fatalf("render's output: %v\n%s", err, raw)
		}
		objs = append(objs, u)
	}
}
