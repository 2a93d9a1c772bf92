package cli

import (
	"testing"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	schedulerpluginsv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/kueue"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/lifecycle"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/wait"
)

// deleteCmd is `delete` whose standard input is (or is not) a terminal.
func deleteCmd(terminal bool) plugin.CommandAdder {
	return func(f cmdutil.Factory, s cmdutil.Streams) *cobra.Command {
		o := lifecycle.NewDeleteOptions(s)
		o.StdinIsTerminal = func() bool { return terminal }
		return lifecycle.NewCmdDeleteWithOptions(f, o)
	}
}

// ownedObjects adds what upstream's controller makes for a TrainJob besides the JobSet: the runtime
// snapshot ConfigMap, an MPI Secret and a PodGroup, all controlled by it.
func ownedObjects(f *fixture, tj *trainer.TrainJob) {
	f.t.Helper()
	ref := []metav1.OwnerReference{owner(tj)}
	f.create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: tj.Name + "-runtime-snapshot", OwnerReferences: ref}, Data: map[string]string{"runtime": "{}"}})
	f.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: tj.Name + "-mpi-ssh-auth", OwnerReferences: ref}, Type: corev1.SecretTypeSSHAuth,
		Data: map[string][]byte{corev1.SSHAuthPrivateKey: []byte("not a key")}})
	f.create(&schedulerpluginsv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: tj.Name, OwnerReferences: ref},
		Spec: schedulerpluginsv1alpha1.PodGroupSpec{MinMember: 4}})
	// Not the TrainJob's: never listed.
	f.create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: tj.Name + "-notes"}})
}

func (f *fixture) exists(name string) bool {
	f.t.Helper()
	err := f.c.Get(f.t.Context(), clientKey(f.ns, name), &trainer.TrainJob{})
	if err != nil && !apierrors.IsNotFound(err) {
		f.t.Fatal(err)
	}
	return err == nil
}

// get is TrainJob name of the fixture's namespace.
func (f *fixture) get(name string) *trainer.TrainJob {
	f.t.Helper()
	tj := &trainer.TrainJob{}
	if err := f.c.Get(f.t.Context(), clientKey(f.ns, name), tj); err != nil {
		f.t.Fatal(err)
	}
	return tj
}

func (f *fixture) suspended(name string) bool {
	f.t.Helper()
	return ptr.Deref(f.get(name).Spec.Suspend, false)
}

// TestLifecycle suspends, resumes and deletes TrainJobs, and serves the dashboard (testDashboard), also to a real browser (testDashboardInBrowser).
func TestLifecycle(t *testing.T) {
	c := sharedCluster(t)
	cmds := []plugin.CommandAdder{lifecycle.NewCmdSuspend, lifecycle.NewCmdResume, deleteCmd(false)}

	t.Run("dashboard", func(t *testing.T) { testDashboard(t, c) })
	t.Run("dashboard-browser", func(t *testing.T) { testDashboardInBrowser(t, c) })

	t.Run("suspend-resume", func(t *testing.T) {
		f := fixtureOn(t, c)
		tj := runningTrainJob(f, "llama")
		completeTrainJob(f, "done")
		queued := f.trainJob("queued", 1, false, func(tj *trainer.TrainJob) {
			tj.Spec.Suspend = ptr.To(true)
			tj.Labels[kueue.QueueLabel] = "gpu-queue"
		})
		n, kube := f.normalizer(tj), kubeArgs(c, f.ns)
		steps := []struct {
			name      string
			args      []string
			suspended bool
		}{
			{"suspend", withArgs(kube, "suspend", "llama"), true},
			{"suspend-again", withArgs(kube, "suspend", "llama"), true},
			{"resume", withArgs(kube, "resume", "llama"), false},
			{"resume-queued", withArgs(kube, "resume", "queued"), false},
			{"suspend-finished", withArgs(kube, "suspend", "done"), false},
			{"suspend-missing", withArgs(kube, "suspend", "llama", "nope"), true},
			{"error-no-name", withArgs(kube, "resume"), true},
		}
		for _, s := range steps {
			AssertGolden(t, "lifecycle/"+s.name, n.Normalize(Run(t, "", cmds, s.args...).String()))
			if got := f.suspended("llama"); s.name != "resume-queued" && s.name != "suspend-finished" && got != s.suspended {
				t.Errorf("after %s: llama spec.suspend = %v, want %v", s.name, got, s.suspended)
			}
		}
		if f.suspended(queued.Name) || f.suspended("done") {
			t.Error("resume-queued did not resume queued, or suspend-finished suspended done")
		}
	})

	t.Run("delete", func(t *testing.T) {
		f := fixtureOn(t, c)
		tj := trainingTrainJob(f, "llama")
		ownedObjects(f, tj)
		completeTrainJob(f, "done")
		n, kube := f.normalizer(tj), kubeArgs(c, f.ns)
		prompt := []plugin.CommandAdder{deleteCmd(true)}

		AssertGolden(t, "lifecycle/delete-no-terminal", n.Normalize(Run(t, "", cmds, withArgs(kube, "delete", "llama")...).String()))
		AssertGolden(t, "lifecycle/delete-answer-no", n.Normalize(Run(t, "n\n", prompt, withArgs(kube, "delete", "llama", "done")...).String()))
		if !f.exists("llama") || !f.exists("done") {
			t.Fatal("a TrainJob was deleted without a yes")
		}
		AssertGolden(t, "lifecycle/delete-answer-yes", n.Normalize(Run(t, "y\n", prompt, withArgs(kube, "delete", "llama")...).String()))
		if f.exists("llama") {
			t.Error("llama still exists after yes")
		}
		AssertGolden(t, "lifecycle/delete-missing", n.Normalize(Run(t, "", cmds, withArgs(kube, "delete", "llama", "-y")...).String()))
		AssertGolden(t, "lifecycle/delete-ignore-not-found", n.Normalize(Run(t, "", cmds, withArgs(kube, "delete", "llama", "-y", "--ignore-not-found")...).String()))
		AssertGolden(t, "lifecycle/delete-yes-foreground", n.Normalize(Run(t, "", cmds, withArgs(kube, "delete", "done", "-y", "--cascade=foreground", "--wait=false")...).String()))
		// No garbage collector runs in the api profile, so the API server's foregroundDeletion finalizer stays and
		// keeps done: gone, it was deleted some other way.
		done := &trainer.TrainJob{}
		if err := f.c.Get(t.Context(), clientKey(f.ns, "done"), done); err != nil {
			t.Fatalf("done after delete --cascade=foreground: %v; want it kept by the %s finalizer", err, metav1.FinalizerDeleteDependents)
		}
		if done.DeletionTimestamp == nil || !contains(done.Finalizers, metav1.FinalizerDeleteDependents) {
			t.Errorf("done was not deleted in the foreground: deletionTimestamp %v, finalizers %v", done.DeletionTimestamp, done.Finalizers)
		}
	})

	t.Run("delete-selected", func(t *testing.T) {
		f := fixtureOn(t, c)
		tj := runningTrainJob(f, "a")
		f.trainJob("b", 1, false, func(tj *trainer.TrainJob) { tj.Labels["team"] = "vision" })
		f.trainJob("c", 1, false, func(tj *trainer.TrainJob) { tj.Labels["team"] = "vision" })
		n, kube := f.normalizer(tj), kubeArgs(c, f.ns)
		AssertGolden(t, "lifecycle/delete-selector", n.Normalize(Run(t, "", cmds, withArgs(kube, "delete", "-l", "team=vision", "-y")...).String()))
		if f.exists("b") || f.exists("c") || !f.exists("a") {
			t.Error("-l team=vision did not delete exactly b and c")
		}
		AssertGolden(t, "lifecycle/delete-all", n.Normalize(Run(t, "", cmds, withArgs(kube, "delete", "--all", "-y")...).String()))
		if f.exists("a") {
			t.Error("--all left a")
		}
		AssertGolden(t, "lifecycle/delete-all-none-left", n.Normalize(Run(t, "", cmds, withArgs(kube, "delete", "--all", "-y")...).String()))
		for _, tc := range []struct {
			name string
			args []string
		}{
			{"nothing", withArgs(kube, "delete")},
			{"two-ways", withArgs(kube, "delete", "a", "--all")},
			{"bad-cascade", withArgs(kube, "delete", "a", "--cascade=later")},
			{"unknown-flag", withArgs(kube, "delete", "a", "--force")},
		} {
			AssertGolden(t, "lifecycle/delete-error-"+tc.name, n.Normalize(Run(t, "", cmds, tc.args...).String()))
		}
	})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// grantNamespaceUser gives user what a team member typically has in one namespace: read and create rights
// on TrainJobs (and update/patch/delete to suspend, resume and delete them), read rights on JobSets, pods,
// pod logs and Events. Nothing cluster-wide: not the runtimes, not Jobs, ConfigMaps or Secrets.
func grantNamespaceUser(t *testing.T, cl client.Client, user, namespace string) {
	t.Helper()
	read := []string{"get", "list", "watch"}
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: user, Namespace: namespace},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{trainer.GroupVersion.Group}, Resources: []string{"trainjobs"}, Verbs: append(read, "create", "update", "patch", "delete")},
			{APIGroups: []string{"jobset.x-k8s.io"}, Resources: []string{"jobsets"}, Verbs: read},
			{APIGroups: []string{""}, Resources: []string{"pods", "pods/log", "events"}, Verbs: read},
		},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user, Namespace: namespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := cl.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
}

// TestNamespaceUser runs list, status, wait, suspend, resume and delete as a user (impersonated with --as,
// which sets rest.Config.Impersonate) who has only namespace-scoped rights: everything works, and what the
// user may not read (runtimes, Jobs, ConfigMaps, Secrets, PodGroups) is left out rather than failing.
func TestNamespaceUser(t *testing.T) {
	c := sharedCluster(t)
	f := fixtureOn(t, c)
	smallRuntime(f)
	tj := trainingTrainJob(f, "llama")
	ownedObjects(f, tj)
	f.trainJob("fresh", 0, false, func(tj *trainer.TrainJob) { tj.Spec.Trainer = nil; tj.Spec.RuntimeRef.Name = "torch-small" })
	grantNamespaceUser(t, f.c, "alice", f.ns)
	now := tj.CreationTimestamp.Add(10*time.Minute + 30*time.Second)
	cmds := []plugin.CommandAdder{listCmd(now), statusCmd(now, false), wait.NewCmdWait, lifecycle.NewCmdSuspend, lifecycle.NewCmdResume, deleteCmd(true)}
	alice := withArgs(kubeArgs(c, f.ns), "--as", "alice")
	n := f.normalizer(tj)
	for _, tc := range []struct {
		name, stdin string
		args        []string
	}{
		{"list", "", withArgs(alice, "list")},
		{"list-all-namespaces", "", withArgs(alice, "list", "-A")},
		{"status", "", withArgs(alice, "status", "llama")},
		{"wait", "", withArgs(alice, "wait", "llama", "--for=Training")},
		{"suspend", "", withArgs(alice, "suspend", "llama")},
		{"resume", "", withArgs(alice, "resume", "llama")},
		{"delete", "y\n", withArgs(alice, "delete", "llama")},
		{"other-namespace", "", withArgs(alice, "list", "-n", "default")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			AssertGolden(t, "namespace-user/"+tc.name, n.Normalize(Run(t, tc.stdin, cmds, tc.args...).String()))
		})
	}
	if f.exists("llama") {
		t.Error("alice could not delete llama")
	}
}
