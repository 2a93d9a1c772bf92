package cluster_test

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
)

// waitTimeout bounds every wait of these tests; the simulated pods run for about a second.
const waitTimeout = 60 * time.Second

func newClient(t *testing.T, c *cluster.Cluster) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, jobsetv1alpha2.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	cl, err := client.New(c.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

func TestAPIProfile(t *testing.T) {
	opts := cluster.Options{Profile: cluster.ProfileAPI, CRDDirs: testCRDDirs(t)}
	c := cluster.StartForTest(t, opts)
	cl := newClient(t, c)

	// The API server's port is FreePort's: below the ephemeral range, which an outgoing connection of any
	// process could take before the API server binds it.
	u, err := url.Parse(c.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	first, err := cluster.EphemeralPortsFirst()
	if err != nil {
		t.Fatal(err)
	}
	if port, err := strconv.Atoi(u.Port()); err != nil || port >= first {
		t.Errorf("the API server serves on %s: want a port below the ephemeral range, which starts at %d", c.Config.Host, first)
	}

	want := crdNames(t, opts.CRDDirs)
	var crds apiextensionsv1.CustomResourceDefinitionList
	if err := cl.List(t.Context(), &crds); err != nil {
		t.Fatal(err)
	}
	var established []string
	for _, crd := range crds.Items {
		for _, cond := range crd.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				established = append(established, crd.Name)
			}
		}
	}
	slices.Sort(established)
	if diff := cmp.Diff(want, established); diff != "" {
		t.Errorf("established CRDs (-want +got):\n%s", diff)
	}

	// Every kind is served: a list of each answers.
	for _, crd := range crds.Items {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(schema.GroupVersionKind{Group: crd.Spec.Group, Version: crd.Spec.Versions[0].Name, Kind: crd.Spec.Names.ListKind})
		if err := cl.List(t.Context(), list); err != nil {
			t.Errorf("list %s: %v", crd.Name, err)
		}
	}

	// Last, on the same cluster rather than one of its own (a start costs 10-30 s of make test's time).
	t.Run("restarts", func(t *testing.T) { testRestarts(t, c, cl) })
}

// crdNames are the names of the CRDs in dirs (default: the package's defaults), sorted.
func crdNames(t *testing.T, dirs []string) []string {
	t.Helper()
	if dirs == nil {
		root, err := cluster.RepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		dirs = []string{filepath.Join(root, "test", "crds"), filepath.Join(root, "config", "crd", "bases")}
	}
	var names []string
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var crd apiextensionsv1.CustomResourceDefinition
			if err := yaml.Unmarshal(data, &crd); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			names = append(names, crd.Name)
		}
	}
	slices.Sort(names)
	return names
}

// testRestarts: kube-apiserver and etcd stop and start again; what was stored is still there, and the
// administrator's client works on without a new kubeconfig.
func testRestarts(t *testing.T, c *cluster.Cluster, cl client.Client) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "restarts-"}}
	if err := cl.Create(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	for name, restart := range map[string]func(context.Context, time.Duration) error{
		"kube-apiserver": c.RestartAPIServer,
		"etcd":           c.RestartEtcd,
	} {
		if err := restart(t.Context(), time.Second); err != nil {
			t.Fatalf("restart %s: %v", name, err)
		}
		cluster.Eventually(t, "the namespace after a restart of "+name, waitTimeout, cluster.Holds(func(ctx context.Context) (bool, error) {
			return cl.Get(ctx, client.ObjectKeyFromObject(ns), &corev1.Namespace{}) == nil, nil
		}))
	}
}
