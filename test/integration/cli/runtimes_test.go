package cli

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/scheme"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/runtimes"
)

// TestRuntimes lists runtimes in every format, as an administrator and as a user who may read only the
// TrainingRuntimes of one namespace. The test's cluster is its own: what it lists is what it created.
func TestRuntimes(t *testing.T) {
	c := apiCluster(t)
	cl := adminClient(t, c)
	for _, ns := range []string{"team-a", "empty"} {
		if err := cl.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	kube := func(more ...string) []string { return withArgs([]string{"--kubeconfig", c.KubeconfigPath}, more...) }
	n := Normalizer{}

	t.Run("none", func(t *testing.T) {
		cmd := []plugin.CommandAdder{runtimesCmd(time.Now())}
		AssertGolden(t, "runtimes/none", n.Normalize(Run(t, "", cmd, kube("runtimes", "-n", "empty")...).String()))
	})

	files, err := filepath.Glob(filepath.Join("testdata", "runtimes", "manifests", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no runtime manifests in testdata/runtimes/manifests: %v", err)
	}
	newest := createFromFiles(t, cl, files...)
	grantNamespaceRead(t, cl, "alice", "team-a", "trainingruntimes")
	grantNamespaceUser(t, cl, "bob", "team-a")
	// An hour after the last runtime was made, every AGE reads 60m.
	cmd := []plugin.CommandAdder{runtimesCmd(newest.Add(time.Hour))}

	for _, tc := range []struct {
		name string
		args []string
	}{
		{"table", []string{"runtimes", "-n", "team-a"}},
		{"cluster-only", []string{"runtimes", "-n", "empty"}},
		{"all-namespaces", []string{"runtimes", "-A"}},
		{"no-headers", []string{"runtimes", "-n", "team-a", "--no-headers"}},
		{"name", []string{"runtimes", "-n", "team-a", "-o", "name"}},
		{"jsonpath", []string{"runtimes", "-n", "team-a", "-o", `jsonpath={range .items[*]}{.kind}/{.metadata.name} {.spec.mlPolicy.numNodes}{"\n"}{end}`}},
		{"yaml", []string{"runtimes", "-n", "team-a", "-o", "yaml"}},
		{"namespace-user", []string{"runtimes", "-n", "team-a", "--as", "alice"}},
		{"namespace-user-all-namespaces", []string{"runtimes", "-A", "--as", "alice"}},
		// bob has the typical rights of a team member (TrainJobs, JobSets, pods, logs, Events), no runtimes.
		{"trainjob-user", []string{"runtimes", "-n", "team-a", "--as", "bob"}},
		{"bad-output", []string{"runtimes", "-n", "team-a", "-o", "table"}},
		{"extra-argument", []string{"runtimes", "torch"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			AssertGolden(t, "runtimes/"+tc.name, n.Normalize(Run(t, "", cmd, kube(tc.args...)...).String()))
		})
	}
}

// runtimesCmd is `runtimes` with its clock pinned at now.
func runtimesCmd(now time.Time) plugin.CommandAdder {
	return func(f cmdutil.Factory, s cmdutil.Streams) *cobra.Command {
		o := runtimes.NewRuntimesOptions(s)
		o.Clock = clocktesting.NewFakePassiveClock(now)
		return runtimes.NewCmdRuntimesWithOptions(f, o)
	}
}

// createFromFiles creates every object of the YAML files (several documents each) and returns the newest
// creationTimestamp.
func createFromFiles(t *testing.T, cl client.Client, paths ...string) time.Time {
	t.Helper()
	decode := serializer.NewCodecFactory(scheme.New(), serializer.EnableStrict).UniversalDeserializer().Decode
	var newest time.Time
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		docs := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for {
			doc, err := docs.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			if len(bytes.TrimSpace(doc)) == 0 {
				continue
			}
			obj, _, err := decode(doc, nil, nil)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			o := obj.(client.Object)
			if err := cl.Create(t.Context(), o); err != nil {
				t.Fatalf("%s: create %s: %v", path, o.GetName(), err)
			}
			if ts := o.GetCreationTimestamp().Time; ts.After(newest) {
				newest = ts
			}
		}
	}
	return newest
}

// grantNamespaceRead lets user get, list and watch resources of the trainer API group in namespace, and
// nothing cluster-wide.
func grantNamespaceRead(t *testing.T, cl client.Client, user, namespace string, resources ...string) {
	t.Helper()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: user + "-read", Namespace: namespace},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{trainer.GroupVersion.Group}, Resources: resources, Verbs: []string{"get", "list", "watch"}}},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user + "-read", Namespace: namespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := cl.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
}
