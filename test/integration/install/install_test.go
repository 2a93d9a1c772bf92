// Package install tests `kubectl trainjob install` against the local cluster's full profile, started without
// the project's CRDs so that install brings them: the operator's Deployment gets a pod that KWOK runs (its
// image is never pulled), so install can wait for the Deployment to be Available. The webhook cannot answer
// (the pod is simulated), so the installs here pass --wait-for-webhook=false, and one case checks that the
// webhook wait times out with exit code 3 and says why.
package install

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"

	"github.com/kubectl-trainjob/kubectl-trainjob/plugin"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/install"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
)

const (
	operatorNamespace = "trainjob-op"
	image             = "registry.example.com/kubectl-trainjob:v0.0.0-test"
	newImage          = "registry.example.com/kubectl-trainjob:v0.0.1-test"
)

func TestInstallUninstall(t *testing.T) {
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	c := cluster.StartForTest(t, cluster.Options{Profile: cluster.ProfileFull, CRDDirs: []string{filepath.Join(root, "test", "crds")}})
	api := newAPI(t, c)
	kube := []string{"--kubeconfig", c.KubeconfigPath}
	want := expected(t, operatorNamespace, image)

	step := func(name string, f func(t *testing.T)) {
		if !t.Run(name, f) {
			t.FailNow()
		}
	}

	step("server dry run changes nothing", func(t *testing.T) {
		r := run(t, "", false, append(kube, "install", "-n", operatorNamespace, "--image", image, "--dry-run=server")...)
		r.expect(t, 0, "customresourcedefinition.apiextensions.k8s.io/trainjobs.trainer.kubeflow.org serverside-applied (server dry run)",
			"clusterrole.rbac.authorization.k8s.io/kubectl-trainjob-operator serverside-applied (server dry run)",
			"deployment.apps/kubectl-trainjob-operator skipped (server dry run: namespace trainjob-op is not created yet)",
			"clustertrainingruntime.trainer.kubeflow.org/torch-distributed skipped (server dry run: its CRD is not installed yet)")
		for _, u := range want {
			if api.exists(t, u) {
				t.Errorf("%s exists after a dry run", ref(u))
			}
		}
	})

	step("install", func(t *testing.T) {
		r := run(t, "", false, append(kube, "install", "-n", operatorNamespace, "--image", image, "--wait-for-webhook=false", "--timeout=2m")...)
		r.expect(t, 0, "Waiting for the CRDs to be served", "Waiting for deployment trainjob-op/kubectl-trainjob-operator to be Available",
			"The operator is ready in namespace trainjob-op.")
		for _, u := range want {
			got := api.get(t, u)
			if got == nil {
				t.Errorf("%s was not created", ref(u))
				continue
			}
			if !appliedBy(got, install.FieldManager) {
				t.Errorf("%s has no fields applied by %s: %v", ref(u), install.FieldManager, got.GetManagedFields())
			}
		}
		pods, err := api.clientset.CoreV1().Pods(operatorNamespace).List(t.Context(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=operator"})
		if err != nil {
			t.Fatal(err)
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.Spec.Containers[0].Image == image {
				running++
			}
		}
		if len(pods.Items) != 2 || running != 2 {
			t.Errorf("want the Deployment's two Running operator pods of image %s, got %v", image, podSummary(pods.Items))
		}
	})

	step("install again upgrades the operator", func(t *testing.T) {
		run(t, "", false, append(kube, "install", "-n", operatorNamespace, "--image", newImage, "--wait-for-webhook=false", "--timeout=2m")...).
			expect(t, 0, "The operator is ready in namespace trainjob-op.")
		d, err := api.clientset.AppsV1().Deployments(operatorNamespace).Get(t.Context(), install.OperatorDeployment, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := d.Spec.Template.Spec.Containers[0].Image; got != newImage || d.Status.AvailableReplicas != 2 || d.Status.UpdatedReplicas != 2 {
			t.Errorf("after the upgrade: image %s, %d updated and %d available replicas; want %s, 2, 2", got, d.Status.UpdatedReplicas, d.Status.AvailableReplicas, newImage)
		}
	})

	// --timeout bounds the whole install, its applies included: 5 s ran out before the webhook's turn in a cold
	// CI at a load of 9 (the server-side applies of 25 objects took them all). 30 s leaves the waits before the
	// webhook's room on a loaded machine; the webhook never answers, so the step takes the 30 s.
	step("the webhook of a simulated pod never answers", func(t *testing.T) {
		run(t, "", false, append(kube, "install", "-n", operatorNamespace, "--image", newImage, "--timeout=30s")...).
			expect(t, cmdutil.ExitTimeout, "Waiting for the operator's webhook to answer", "failed calling webhook",
				"error: timed out after 30s waiting for the operator's webhook to answer")
	})

	// A TrainingRuntime in a team's namespace: deleting the CRDs would delete it. It opts out of the runtime
	// webhook, as the shipped runtimes do, since the simulated operator cannot answer it.
	teamRuntime := runtimeIn(t, want, "team-a")
	if err := api.clientset.CoreV1().Namespaces().Delete(t.Context(), "team-a", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	if _, err := api.clientset.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := api.resource(t, teamRuntime).Create(t.Context(), teamRuntime, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	step("uninstall asks before the CRDs take a TrainingRuntime with them", func(t *testing.T) {
		run(t, "", false, append(kube, "install", "--uninstall", "-n", operatorNamespace)...).
			expect(t, 1, "error: refusing to delete the CRDs without confirmation: that deletes 1 TrainingRuntime, and standard input is not a terminal")
		run(t, "n\n", true, append(kube, "install", "--uninstall", "-n", operatorNamespace)...).
			expect(t, 1, "Deleting the CRDs deletes:\n  1 TrainingRuntime:\n    team-a/team-torch\nDelete the CRDs and all of the above? [y/N]: ", "error: nothing deleted")
		for _, u := range want {
			if !api.exists(t, u) {
				t.Errorf("%s was deleted though the answer was no", ref(u))
			}
		}
	})

	step("uninstall", func(t *testing.T) {
		run(t, "", false, append(kube, "install", "--uninstall", "-n", operatorNamespace, "--yes", "--timeout=2m")...).
			expect(t, 0, "validatingwebhookconfiguration.admissionregistration.k8s.io/validator.trainer.kubeflow.org deleted",
				"customresourcedefinition.apiextensions.k8s.io/trainjobs.trainer.kubeflow.org deleted", "The operator is uninstalled.")
		for _, u := range append(want, teamRuntime) {
			if api.exists(t, u) {
				t.Errorf("%s is still there", ref(u))
			}
		}
	})

	step("a namespace install found is kept", func(t *testing.T) {
		const ns = "team-ops"
		if _, err := api.clientset.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		run(t, "", false, append(kube, "install", "-n", ns, "--image", image, "--wait=false")...).
			expect(t, 0, "namespace/team-ops exists and install did not create it: using it as it is (--uninstall keeps it)")
		run(t, "", false, append(kube, "install", "--uninstall", "-n", ns, "--timeout=2m")...).
			expect(t, 0, "namespace/team-ops kept: install did not create it", "The operator is uninstalled.")
		got, err := api.clientset.CoreV1().Namespaces().Get(t.Context(), ns, metav1.GetOptions{})
		if err != nil || got.DeletionTimestamp != nil || got.Labels[install.ManagedLabel] != "" {
			t.Errorf("namespace %s: want it kept as it was, got %v (err %v)", ns, got, err)
		}
		for _, u := range expected(t, ns, image) {
			if u.GetKind() != "Namespace" && api.exists(t, u) {
				t.Errorf("%s is still there", ref(u))
			}
		}
	})
}

// expected is what install applies for namespace and image, read from the embedded manifests.
func expected(t *testing.T, namespace, image string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := install.Manifests()
	if err != nil {
		t.Fatal(err)
	}
	if err := install.SetNamespace(objs, install.DefaultNamespace, namespace); err != nil {
		t.Fatal(err)
	}
	if err := install.SetImage(objs, image); err != nil {
		t.Fatal(err)
	}
	return objs
}

// runtimeIn is the shipped torch-distributed runtime as a TrainingRuntime of namespace ns.
func runtimeIn(t *testing.T, objs []*unstructured.Unstructured, ns string) *unstructured.Unstructured {
	t.Helper()
	for _, u := range objs {
		if u.GetKind() == "ClusterTrainingRuntime" && u.GetName() == "torch-distributed" {
			r := u.DeepCopy()
			r.SetKind("TrainingRuntime")
			r.SetNamespace(ns)
			r.SetName("team-torch")
			return r
		}
	}
	t.Fatal("no ClusterTrainingRuntime torch-distributed in the manifests")
	return nil
}

func appliedBy(u *unstructured.Unstructured, manager string) bool {
	for _, mf := range u.GetManagedFields() {
		if mf.Manager == manager && mf.Operation == metav1.ManagedFieldsOperationApply {
			return true
		}
	}
	return false
}

func podSummary(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, fmt.Sprintf("%s %s %s", p.Name, p.Status.Phase, p.Spec.Containers[0].Image))
	}
	return out
}

func ref(u *unstructured.Unstructured) string {
	return strings.ToLower(u.GetKind()) + "/" + u.GetName()
}

// api reads the cluster as its administrator.
type api struct {
	dynamic   dynamic.Interface
	clientset kubernetes.Interface
	mapper    *restmapper.DeferredDiscoveryRESTMapper
}

func newAPI(t *testing.T, c *cluster.Cluster) *api {
	t.Helper()
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	return &api{dynamic: dyn, clientset: c.Clientset(), mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))}
}

// resource is the client of u's kind, or nil when the cluster does not serve the kind.
func (a *api) resource(t *testing.T, u *unstructured.Unstructured) dynamic.ResourceInterface {
	t.Helper()
	a.mapper.Reset() // kinds come and go with the CRDs
	gvk := u.GroupVersionKind()
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return a.dynamic.Resource(m.Resource).Namespace(u.GetNamespace())
	}
	return a.dynamic.Resource(m.Resource)
}

// get returns u as the cluster has it, or nil when it does not exist.
func (a *api) get(t *testing.T, u *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	res := a.resource(t, u)
	if res == nil {
		return nil
	}
	got, err := res.Get(t.Context(), u.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func (a *api) exists(t *testing.T, u *unstructured.Unstructured) bool { return a.get(t, u) != nil }

// result is one run of the command.
type result struct {
	stdout, stderr string
	code           int
}

// run runs `kubectl trainjob ARGS…` in-process with the install command, as the binary's main does;
// terminal says whether stdin counts as a terminal (the prompt of --uninstall).
func run(t *testing.T, stdin string, terminal bool, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	streams := cmdutil.Streams{In: strings.NewReader(stdin), Out: &out, ErrOut: &errOut}
	cmd := func(f cmdutil.Factory, s cmdutil.Streams) *cobra.Command {
		o := install.NewOptions(s)
		o.StdinIsTerminal = func() bool { return terminal }
		o.PollInterval = 200 * time.Millisecond
		return install.NewCmdInstallWithOptions(f, o)
	}
	root := plugin.NewRootCommand(cmdutil.NewFactory(), streams, cmd)
	root.SetArgs(args)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	begin := time.Now()
	code := cmdutil.CheckErr(&errOut, root.ExecuteContext(ctx))
	r := result{stdout: out.String(), stderr: errOut.String(), code: code}
	t.Logf("kubectl trainjob %s  (%v)\nexit code %d\n--- stdout\n%s--- stderr\n%s", strings.Join(args[2:], " "), time.Since(begin).Round(time.Millisecond), r.code, r.stdout, r.stderr)
	return r
}

// expect checks the exit code and that stdout+stderr hold each of the texts.
func (r result) expect(t *testing.T, code int, texts ...string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit code %d, want %d", r.code, code)
	}
	for _, s := range texts {
		if !strings.Contains(r.stdout+r.stderr, s) {
			t.Errorf("no %q in the output", s)
		}
	}
}
