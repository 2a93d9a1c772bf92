package cli

import (
	"context"
	"path/filepath"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/scheme"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/create"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/fit"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
)

// fitRuntime is the ClusterTrainingRuntime of the fit tests: torch, one trainer node, no toleration of its
// own (the GPU pods get theirs from the API server's ExtendedResourceToleration).
const fitRuntime = "fit-torch"

// TestFit asks `fit` and `create` whether TrainJobs fit the full local cluster — gpu-node-0 and gpu-node-1
// (H100) and gpu-node-2 and gpu-node-3 (A100) of 8 GPUs, tainted nvidia.com/gpu, and two CPU nodes — first
// empty, then with all the GPUs of gpu-node-0 and gpu-node-2 taken by running pods of another team.
func TestFit(t *testing.T) {
	c := cluster.StartForTest(t, cluster.Options{Profile: cluster.ProfileFull})
	cl := adminClient(t, c)
	const ns = "team-a"
	f := &fixture{t: t, c: cl, ns: ns}
	for _, name := range []string{ns, "team-b"} {
		if err := cl.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	ensureClusterRuntime(t, cl, fitRuntime)
	kube := kubeArgs(c, ns)
	cmd := []plugin.CommandAdder{fit.NewCmd(nil), create.NewCmdCreate}
	file := func(name string) string { return filepath.Join("testdata", "fit", name+".yaml") }
	run := func(t *testing.T, golden string, args ...string) {
		t.Helper()
		AssertGolden(t, "fit/"+golden, Run(t, "", cmd, withArgs(kube, args...)...).String())
	}

	// The cluster is empty.
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"fits", []string{"fit", "-f", file("two-nodes")}},
		{"too-big", []string{"fit", "-f", file("too-big")}},
		{"create-gpu-type-dry-run-server", []string{"create", "a100", "--runtime", fitRuntime, "--nodes", "2", "--gpus-per-node", "8",
			"--gpu-type", cluster.GPUProductA100, "--dry-run=server"}},
		{"create-gpu-type-four-nodes", []string{"create", "a100-x4", "--runtime", fitRuntime, "--nodes", "4", "--gpus-per-node", "8",
			"--gpu-type", cluster.GPUProductA100, "--dry-run=server", "-o", "name"}},
		{"create-warns", []string{"create", "too-big", "--runtime", fitRuntime, "--nodes", "2", "--gpus-per-node", "16"}},
		{"create-warns-no-gpus-on-gpu-nodes", []string{"create", "cpu-on-h100", "--runtime", fitRuntime, "--resources-per-node", "cpu=8",
			"--gpu-type", cluster.GPUProductH100}},
		{"create-wait-warns", []string{"create", "too-big-wait", "--runtime", fitRuntime, "--nodes", "2", "--gpus-per-node", "16",
			"--wait", "--timeout", "2s"}},
		{"complete-gpu-type", []string{"__complete", "create", "x", "--gpu-type", ""}},
		{"no-trainjob", []string{"fit"}},
		{"name-and-file", []string{"fit", "llama", "-f", file("two-nodes")}},
		{"not-found", []string{"fit", "gpt"}},
		{"bad-output", []string{"fit", "-f", file("two-nodes"), "-o", "wide"}},
		{"bad-gpu-type", []string{"create", "bad", "--runtime", fitRuntime, "--gpu-type", "NVIDIA A100"}},
	} {
		t.Run(tc.name, func(t *testing.T) { run(t, tc.name, tc.args...) })
	}
	// A TrainJob that fits nowhere is created all the same: the cluster may grow.
	for _, name := range []string{"too-big", "cpu-on-h100", "too-big-wait"} {
		if err := cl.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, &trainer.TrainJob{}); err != nil {
			t.Errorf("TrainJob %s was not created: %v", name, err)
		}
	}
	for _, name := range []string{"a100", "a100-x4", "bad"} {
		assertNoTrainJob(t, cl, ns, name)
	}

	// Another team's pods take every GPU of gpu-node-0 (H100) and gpu-node-2 (A100).
	teamB := &fixture{t: t, c: cl, ns: "team-b"}
	for _, node := range []string{cluster.GPUNodeName(0), cluster.GPUNodeName(2)} {
		teamB.create(busyPod("busy-on-"+node, node, nil))
	}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"two-of-four-now", []string{"fit", "-f", file("four-nodes")}},
		{"two-of-four-now-json", []string{"fit", "-f", file("four-nodes"), "-o", "json"}},
		{"create-dry-run-server", []string{"create", "llama", "--runtime", fitRuntime, "--nodes", "4", "--gpus-per-node", "8", "--dry-run=server"}},
		{"create", []string{"create", "llama", "--runtime", fitRuntime, "--nodes", "4", "--gpus-per-node", "8"}},
	} {
		t.Run(tc.name, func(t *testing.T) { run(t, tc.name, tc.args...) })
	}

	// llama exists now, and one of its pods runs on gpu-node-1: fit leaves it out of what the node uses, and
	// says whether llama would fit if it started now. A pod on gpu-node-3 with llama's label that nothing owns
	// is not llama's: it counts as any other (TestStatus/ForeignPods). The JobSet and Job are managed by
	// another controller (managedBy), so that the cluster's JobSet and Job controllers leave them as they are.
	llama := &trainer.TrainJob{}
	if err := cl.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "llama"}, llama); err != nil {
		t.Fatal(err)
	}
	elsewhere := ptr.To("example.com/elsewhere")
	f.create(&jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "llama", OwnerReferences: []metav1.OwnerReference{owner(llama)}},
		Spec: jobsetv1alpha2.JobSetSpec{ManagedBy: elsewhere, ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{Name: trainer.Node, Replicas: 1,
			Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: podTemplate(trainer.Node)}}}}}})
	f.create(&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "llama-node-0", Labels: map[string]string{jobsetv1alpha2.JobSetNameKey: "llama"},
		OwnerReferences: f.controller(&jobsetv1alpha2.JobSet{}, "llama")}, Spec: batchv1.JobSpec{ManagedBy: elsewhere, Template: podTemplate(trainer.Node)}})
	ownPod := busyPod("llama-node-0-0-x01", cluster.GPUNodeName(1), map[string]string{jobsetv1alpha2.JobSetNameKey: "llama"})
	ownPod.OwnerReferences = f.controller(&batchv1.Job{}, "llama-node-0")
	f.create(ownPod)
	f.create(busyPod("llama-node-0-1-stray", cluster.GPUNodeName(3), map[string]string{jobsetv1alpha2.JobSetNameKey: "llama"}))
	t.Run("live", func(t *testing.T) { run(t, "live", "fit", "llama") })
	t.Run("live-yaml", func(t *testing.T) { run(t, "live-yaml", "fit", "llama", "-o", "yaml") })
	t.Run("dashboard-browser", func(t *testing.T) { testDashboardGPUsInBrowser(t, c, ns) })

	// A team member who may read the namespace's TrainJobs and pods and the cluster's runtimes, but not the
	// nodes: fit cannot tell. Once they may list nodes but not every namespace's pods, the nodes count as
	// empty, and fit says so.
	grantNamespaceUser(t, cl, "alice", ns)
	alice := asUser(t, c, "alice")
	grantClusterRead(t, cl, "alice", "fit-runtimes", rbacv1.PolicyRule{APIGroups: []string{trainer.GroupVersion.Group}, Resources: []string{"clustertrainingruntimes"}, Verbs: []string{"get"}})
	cluster.Eventually(t, "alice may read the runtime", waitTimeout, cluster.Holds(allowed(func(ctx context.Context) error {
		return alice.Get(ctx, client.ObjectKey{Name: fitRuntime}, &trainer.ClusterTrainingRuntime{})
	})))
	t.Run("namespace-user-no-nodes", func(t *testing.T) { run(t, "namespace-user-no-nodes", "fit", "llama", "--as", "alice") })
	grantClusterRead(t, cl, "alice", "fit-nodes", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"list"}})
	cluster.Eventually(t, "alice may list the nodes", waitTimeout, cluster.Holds(allowed(func(ctx context.Context) error { return alice.List(ctx, &corev1.NodeList{}) })))
	t.Run("namespace-user-no-pods", func(t *testing.T) { run(t, "namespace-user-no-pods", "fit", "llama", "--as", "alice") })

	// A TrainJob claiming its GPUs through DRA, asked by alice once she may list every pod: fit says that she may
	// not list the ResourceSlices (no node's DRA devices counted), then, once she may, that she may not list the
	// ResourceClaims (every device counted free), rather than showing either as none.
	if err := cl.Create(t.Context(), cluster.NewGPUClaimTemplate(ns, "trainer-gpus", 8)); err != nil {
		t.Fatal(err)
	}
	grantClusterRead(t, cl, "alice", "fit-claim-templates", rbacv1.PolicyRule{APIGroups: []string{resourcev1.GroupName}, Resources: []string{"resourceclaimtemplates"}, Verbs: []string{"get"}})
	grantClusterRead(t, cl, "alice", "fit-pods", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}})
	grantClusterRead(t, cl, "alice", "fit-device-classes", rbacv1.PolicyRule{APIGroups: []string{resourcev1.GroupName}, Resources: []string{"deviceclasses"}, Verbs: []string{"get"}})
	cluster.Eventually(t, "alice may list every pod", waitTimeout, cluster.Holds(allowed(func(ctx context.Context) error { return alice.List(ctx, &corev1.PodList{}) })))
	t.Run("namespace-user-dra-no-slices", func(t *testing.T) {
		run(t, "namespace-user-dra-no-slices", "fit", "-f", file("dra-two-nodes"), "--as", "alice")
	})
	grantClusterRead(t, cl, "alice", "fit-slices", rbacv1.PolicyRule{APIGroups: []string{resourcev1.GroupName}, Resources: []string{"resourceslices"}, Verbs: []string{"list"}})
	cluster.Eventually(t, "alice may list ResourceSlices", waitTimeout, cluster.Holds(allowed(func(ctx context.Context) error { return alice.List(ctx, &resourcev1.ResourceSliceList{}) })))
	t.Run("namespace-user-dra-no-claims", func(t *testing.T) {
		run(t, "namespace-user-dra-no-claims", "fit", "-f", file("dra-two-nodes"), "--as", "alice")
	})
}

// busyPod is a running pod bound to node that takes its 8 GPUs for an hour.
func busyPod(name, node string, labels map[string]string) *corev1.Pod {
	gpus := corev1.ResourceList{cluster.GPUResource: resource.MustParse("8"), corev1.ResourceCPU: resource.MustParse("8")}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: corev1.PodSpec{
			NodeName:      node,
			RestartPolicy: corev1.RestartPolicyNever,
			Tolerations:   []corev1.Toleration{cluster.GPUToleration()},
			Containers: []corev1.Container{{Name: "train", Image: "busybox", Env: []corev1.EnvVar{{Name: cluster.EnvRunSeconds, Value: "1h"}},
				Resources: corev1.ResourceRequirements{Requests: gpus, Limits: gpus}}},
		},
	}
}

// grantClusterRead gives user the cluster-wide rule through a ClusterRole and its binding, both named name.
func grantClusterRead(t *testing.T, cl client.Client, user, name string, rule rbacv1.PolicyRule) {
	t.Helper()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{rule}}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := cl.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
}

// asUser is a client of the cluster that acts as user (impersonated, as --as does).
func asUser(t *testing.T, c *cluster.Cluster, user string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(c.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	cl, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// allowed is a condition of eventually: the request do makes is no longer forbidden (RBAC's authorizer sees a
// new binding a moment after it is created).
func allowed(do func(ctx context.Context) error) func(ctx context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		err := do(ctx)
		if apierrors.IsForbidden(err) {
			return false, nil
		}
		return err == nil, err
	}
}
