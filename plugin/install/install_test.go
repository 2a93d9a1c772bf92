package install

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-trainjob/kubectl-trainjob/plugin"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/golden"
)

// TestManifestsAreConfigDefault checks that the embedded CRDs and install.yaml are, together, exactly what
// `kustomize build config/default` gives now: it fails when install.yaml is stale (run `make generate`) or
// when config/default gains a CRD that config/crd does not embed.
func TestManifestsAreConfigDefault(t *testing.T) {
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join("..", "..", "config", "default"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]any{}
	for _, r := range resources.Resources() {
		data, err := r.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(data); err != nil {
			t.Fatal(err)
		}
		want[key(u)] = viaJSON(t, u.Object)
	}
	objs, err := Manifests()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]any{}
	for _, u := range objs {
		if _, dup := got[key(u)]; dup {
			t.Errorf("%s is embedded twice", key(u))
		}
		got[key(u)] = viaJSON(t, u.Object)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("embedded manifests differ from kustomize build config/default (-want +got); run `make generate`:\n%s", diff)
	}
	if !isCRD(objs[0]) || !isCRD(objs[1]) || !isCRD(objs[2]) {
		t.Errorf("the CRDs must come first, got %s, %s, %s", key(objs[0]), key(objs[1]), key(objs[2]))
	}
}

// viaJSON is obj as encoding/json reads it back (numbers float64), so that objects decoded from YAML and
// from kustomize compare equal.
func viaJSON(t *testing.T, obj map[string]any) map[string]any {
	t.Helper()
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func key(u *unstructured.Unstructured) string {
	return u.GroupVersionKind().String() + " " + u.GetNamespace() + "/" + u.GetName()
}

// TestSetNamespace moves every reference to the operator's namespace, so that none is left behind.
func TestSetNamespace(t *testing.T) {
	objs, err := Manifests()
	if err != nil {
		t.Fatal(err)
	}
	if err := SetNamespace(objs, DefaultNamespace, "team-a"); err != nil {
		t.Fatal(err)
	}
	for _, u := range objs {
		data, err := yaml.Marshal(u.Object)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(data), DefaultNamespace) {
			t.Errorf("%s still names %s:\n%s", key(u), DefaultNamespace, data)
		}
	}
	field := func(kind, name string, path ...any) any {
		u := find(objs, kind, name)
		if u == nil {
			t.Fatalf("no %s %s", kind, name)
		}
		var v any = u.Object
		for _, p := range path {
			switch p := p.(type) {
			case string:
				v = v.(map[string]any)[p]
			case int:
				v = v.([]any)[p]
			}
		}
		return v
	}
	for _, tc := range []struct {
		what string
		got  any
	}{
		{"the Namespace", field("Namespace", "team-a", "metadata", "name")},
		{"the Deployment", field("Deployment", OperatorDeployment, "metadata", "namespace")},
		{"the ClusterRoleBinding's subject", field("ClusterRoleBinding", "kubectl-trainjob-operator", "subjects", 0, "namespace")},
		{"the validating webhook's Service", field("ValidatingWebhookConfiguration", "validator.trainer.kubeflow.org", "webhooks", 2, "clientConfig", "service", "namespace")},
	} {
		if tc.got != "team-a" {
			t.Errorf("%s is in %v, want team-a", tc.what, tc.got)
		}
	}
}

func TestImage(t *testing.T) {
	objs, err := Manifests()
	if err != nil {
		t.Fatal(err)
	}
	manifest := OperatorImage(objs)
	if manifest != OperatorImageRepository+":latest" {
		t.Fatalf("the manifests' operator image is %q", manifest)
	}
	for _, tc := range []struct {
		name, binaryVersion, want string
	}{
		{"release", "v0.3.1", OperatorImageRepository + ":v0.3.1"},
		{"development build", "v0.0.0-dev", manifest},
		{"pre-release", "v0.4.0-rc.1", manifest},
		{"untagged commit", "v0.0.0-dev+c8ddb35-dirty", manifest},
		{"not a version", "c8ddb35", manifest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := DefaultImage(objs, tc.binaryVersion); got != tc.want {
				t.Errorf("DefaultImage(%q) = %q, want %q", tc.binaryVersion, got, tc.want)
			}
		})
	}
	if err := SetImage(objs, "registry.example.com/kubectl-trainjob:v9"); err != nil {
		t.Fatal(err)
	}
	if got := OperatorImage(objs); got != "registry.example.com/kubectl-trainjob:v9" {
		t.Errorf("after SetImage the image is %q", got)
	}
}

func TestUninstallOrder(t *testing.T) {
	objs, err := Manifests()
	if err != nil {
		t.Fatal(err)
	}
	order := UninstallOrder(objs, false)
	if len(order) != len(objs) {
		t.Fatalf("%d objects to delete, %d applied", len(order), len(objs))
	}
	if k := order[0].GetKind(); k != "ValidatingWebhookConfiguration" {
		t.Errorf("first deleted: %s, want the webhook configurations first", k)
	}
	for i, u := range order {
		if isCRD(u) != (i >= len(order)-4) {
			t.Errorf("position %d of %d: %s; want the 4 CRDs last", i, len(order), key(u))
		}
	}
	for _, u := range UninstallOrder(objs, true) {
		if isCRD(u) {
			t.Errorf("--keep-crds deletes %s", key(u))
		}
	}
}

func TestWebhookAnswered(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"admitted", nil, true},
		{"denied", fmt.Errorf(`admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request: spec.runtimeRef: not found`), true},
		{"unreachable", fmt.Errorf(`Internal error occurred: failed calling webhook "defaulter.trainjob.trainer.kubeflow.org": failed to call webhook: Post "https://kubectl-trainjob-webhook-service.kubectl-trainjob-system.svc:443/mutate": dial tcp 10.0.0.1:443: connect: connection refused`), false},
		{"no CA yet", fmt.Errorf(`Internal error occurred: failed calling webhook "defaulter.trainjob.trainer.kubeflow.org": failed to call webhook: tls: failed to verify certificate: x509: certificate signed by unknown authority`), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, _ := webhookAnswered(tc.err); got != tc.want {
				t.Errorf("webhookAnswered = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRolloutStatus(t *testing.T) {
	for _, tc := range []struct {
		name   string
		d      appsv1.Deployment
		done   bool
		status string
	}{
		{"not observed", deployment(2, 1, appsv1.DeploymentStatus{ObservedGeneration: 1}), false, "the new spec is not observed yet"},
		{"no pod yet", deployment(1, 1, appsv1.DeploymentStatus{ObservedGeneration: 1}), false, "0 of 1 replicas updated"},
		{"old pod", deployment(1, 1, appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 2, UpdatedReplicas: 1, AvailableReplicas: 1}), false, "1 old replicas are pending termination"},
		{"not available", deployment(1, 1, appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, UpdatedReplicas: 1}), false, "0 of 1 updated replicas available"},
		{"available", deployment(1, 1, appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1}), true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			done, status := rolloutStatus(&tc.d)
			if done != tc.done || status != tc.status {
				t.Errorf("rolloutStatus = %v, %q; want %v, %q", done, status, tc.done, tc.status)
			}
		})
	}
}

func deployment(generation int64, replicas int32, status appsv1.DeploymentStatus) appsv1.Deployment {
	d := appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas)}, Status: status}
	d.Generation = generation
	return d
}

// TestOffline runs what needs no cluster: printing the manifests, client dry runs, bad flags.
func TestOffline(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"dry-run-client", []string{"install", "--dry-run=client"}},
		{"dry-run-client-namespace-image", []string{"install", "--dry-run", "-n", "team-a", "--image", "registry.example.com/kubectl-trainjob:v9"}},
		{"uninstall-dry-run-client", []string{"install", "--uninstall", "--dry-run=client"}},
		{"uninstall-keep-crds-dry-run-client", []string{"install", "--uninstall", "--keep-crds", "--dry-run=client"}},
		{"bad-dry-run", []string{"install", "--dry-run=maybe"}},
		{"bad-output", []string{"install", "-o", "wide"}},
		{"uninstall-output", []string{"install", "--uninstall", "-o", "yaml"}},
		{"yes-without-uninstall", []string{"install", "--yes"}},
		{"bad-namespace", []string{"install", "-n", "Team_A", "-o", "yaml"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			golden.Assert(t, filepath.Join("testdata", tc.name+".golden"), []byte(run(t, tc.args...)))
		})
	}
}

// TestOutputYAML prints the rewritten manifests: the same objects as applied, in the same order.
func TestOutputYAML(t *testing.T) {
	out := run(t, "install", "-o", "yaml", "-n", "team-a")
	stdout, stderr, ok := strings.Cut(strings.TrimPrefix(out, "exit code: 0\n--- stdout\n"), "--- stderr\n")
	if !ok || stderr != "" {
		t.Fatalf("install -o yaml failed:\n%s", out)
	}
	objs, err := decode([]byte(stdout))
	if err != nil {
		t.Fatal(err)
	}
	want, err := Manifests()
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != len(want) {
		t.Fatalf("-o yaml printed %d objects, want %d", len(objs), len(want))
	}
	for i := range objs {
		if objs[i].GetName() != want[i].GetName() && objs[i].GetKind() != "Namespace" {
			t.Errorf("object %d is %s, want %s", i, key(objs[i]), key(want[i]))
		}
		if objs[i].GetNamespace() != "" && objs[i].GetNamespace() != "team-a" {
			t.Errorf("%s is not in team-a", key(objs[i]))
		}
	}
}

// run runs `kubectl trainjob ARGS…` with only the install command, as main does, with no kubeconfig.
func run(t *testing.T, args ...string) string {
	t.Helper()
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
	var out, errOut bytes.Buffer
	streams := cmdutil.Streams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}
	root := plugin.NewRootCommand(cmdutil.NewFactory(), streams, NewCmdInstall)
	root.SetArgs(args)
	code := cmdutil.CheckErr(&errOut, root.ExecuteContext(t.Context()))
	return fmt.Sprintf("exit code: %d\n--- stdout\n%s--- stderr\n%s", code, out.String(), errOut.String())
}
