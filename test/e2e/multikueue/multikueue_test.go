package multikueue

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/stage"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/status"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
)

const (
	// running is a 2 × 8-GPU TrainJob whose pods run until the clusters stop; finishing is a one-node CPU
	// TrainJob whose pod runs finishSeconds.
	running       = "llama-mk"
	finishing     = "bert-mk"
	finishSeconds = 10
	// alice may read the namespace's TrainJobs, pods and logs, Kueue's Workloads and MultiKueueClusters on the
	// management cluster, but not the Secrets of Kueue's namespace.
	alice = "alice"
	// originLabel is on the copies MultiKueue creates on a worker.
	originLabel = "kueue.x-k8s.io/multikueue-origin"
	// waitTimeout bounds every wait: generous, since the machine is shared.
	waitTimeout = 3 * time.Minute
)

// TestDispatch: TrainJobs created on the management cluster with the real binary are dispatched to the worker,
// where their copies run (the management cluster builds nothing for them), and their status comes back.
// `status` and `logs` through the management cluster's kubeconfig alone show the worker's pods and their logs,
// read through MultiKueue's kubeconfig Secret; a user who may not read that Secret is told where the TrainJob
// runs and how to reach it; once a TrainJob has finished and MultiKueue has deleted its copy, they say so.
func TestDispatch(t *testing.T) {
	ns := sharedNamespace(t)
	mustCLI(t, "create", running, "-n", ns, "--runtime", "torch-distributed", "--nodes", "2", "--gpus-per-node", "8", "--queue",
		cluster.KueueLocalQueue, "--env", "SIM_RUN_SECONDS=3600", "--", "torchrun", "train.py")
	mustCLI(t, "create", finishing, "-n", ns, "--runtime", "torch-distributed", "--nodes", "1", "--queue", cluster.KueueLocalQueue,
		"--env", fmt.Sprintf("SIM_RUN_SECONDS=%d", finishSeconds))
	// Followed from its creation: logs -f waits for MultiKueue to dispatch it, then follows the worker's pod.
	followCtx, stopFollow := context.WithTimeout(t.Context(), cliTimeout)
	defer stopFollow()
	follow, followOut, followErr := command(followCtx, "logs", finishing, "-f", "-n", ns)
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	followed := make(chan error, 1)
	go func() { followed <- follow.Wait() }()

	t.Run("dispatched to the worker, where their copies run", func(t *testing.T) {
		for _, name := range []string{running, finishing} {
			tj := get(t, suite.manager, ns, name)
			if got := ptr.Deref(tj.Spec.ManagedBy, ""); got != trainer.MultiKueueController {
				t.Errorf("%s: spec.managedBy = %q, want Kueue's default on a management cluster, %q", name, got, trainer.MultiKueueController)
			}
		}
		cluster.Eventually(t, running+"'s Workload dispatched to "+cluster.MultiKueueWorker, waitTimeout, func(ctx context.Context) error {
			wl, err := workloadOf(ctx, ns, running)
			if err != nil {
				return err
			}
			if got, _, _ := unstructured.NestedString(wl.Object, "status", "clusterName"); got != cluster.MultiKueueWorker {
				return fmt.Errorf("status.clusterName %q", got)
			}
			return nil
		})
		cluster.Eventually(t, running+"'s copy Training on the worker, its two pods Running on GPU nodes, its status back on the manager", waitTimeout, func(ctx context.Context) error {
			remote := &trainer.TrainJob{}
			if err := suite.worker.Get(ctx, client.ObjectKey{Namespace: ns, Name: running}, remote); err != nil {
				return err
			}
			// A copy for the worker's Trainer controller: MultiKueue clears managedBy, the CRD defaults it.
			if remote.Labels[originLabel] == "" || ptr.Deref(remote.Spec.ManagedBy, "") == trainer.MultiKueueController {
				return fmt.Errorf("the worker's TrainJob is not MultiKueue's copy: labels %v, managedBy %v", remote.Labels, ptr.Deref(remote.Spec.ManagedBy, ""))
			}
			if n := runningPods(ctx, ns, running); n != 2 {
				return fmt.Errorf("%d of 2 pods Running on GPU nodes", n)
			}
			return managerStage(ctx, ns, running, stage.Training)
		})
		// The operator of the management cluster left them alone: no JobSet there.
		for _, name := range []string{running, finishing} {
			err := suite.manager.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, &jobsetv1alpha2.JobSet{})
			if !apierrors.IsNotFound(err) {
				t.Errorf("JobSet %s on the management cluster: %v, want NotFound", name, err)
			}
		}
		for _, p := range pods(t, suite.worker, ns, running) {
			rank := cmp.Or(p.Labels[batchv1.JobCompletionIndexAnnotation], p.Annotations[batchv1.JobCompletionIndexAnnotation])
			lines := []string{"[rank " + rank + "] epoch 1/3  loss 2.31", "[rank " + rank + "] epoch 2/3  loss 1.87"}
			if err := suite.clusters.Worker.WritePodLog(t.Context(), ns, p.Name, trainer.Node, lines...); err != nil {
				t.Fatal(err)
			}
		}
	})

	t.Run("status and logs read the worker through the management cluster", func(t *testing.T) {
		now := get(t, suite.manager, ns, running).CreationTimestamp.Add(sinceCreation)
		assertGolden(t, "status", normalize(ns, screen(statusAt(t, ns, now, running))))
		assertGolden(t, "logs", normalize(ns, cli(t, "logs", running, "--rank", "all", "-n", ns)))
		s := summary(t, ns, running)
		if w := s.Worker; w == nil || *w != (status.Worker{Cluster: cluster.MultiKueueWorker, Secret: cluster.MultiKueueNamespace + "/" + cluster.MultiKueueSecret, Read: true}) {
			t.Errorf("status -o json: worker %+v, want %s read through its Secret", w, cluster.MultiKueueWorker)
		}
		if len(s.Pods) != 2 || s.Stage != stage.Training {
			t.Errorf("status -o json: stage %s, %d pods, want Training with the worker's 2 pods", s.Stage, len(s.Pods))
		}
		// Ten requests to the management cluster (docs/commands.md): the five of any TrainJob (its JobSet read at
		// once with the rest, before status knows MultiKueue placed it elsewhere), Kueue's three of a running
		// one, the MultiKueueCluster and its Secret. The worker's go through the Secret's kubeconfig.
		children := "labelSelector=" + url.QueryEscape(jobsetv1alpha2.JobSetNameKey+"="+running)
		kueueAPI := "/apis/" + cluster.KueueGroupVersion.String()
		want := []string{
			"GET /api/v1/namespaces/" + ns + "/events",
			"GET /api/v1/namespaces/" + ns + "/pods?" + children,
			"GET /api/v1/namespaces/" + cluster.MultiKueueNamespace + "/secrets/" + cluster.MultiKueueSecret,
			"GET /apis/batch/v1/namespaces/" + ns + "/jobs?" + children,
			"GET /apis/jobset.x-k8s.io/v1alpha2/namespaces/" + ns + "/jobsets/" + running,
			"GET /apis/" + cluster.KueueGroupVersion.Group,
			"GET " + kueueAPI + "/multikueueclusters/" + cluster.MultiKueueWorker,
			"GET " + kueueAPI + "/namespaces/" + ns + "/localqueues/" + cluster.KueueLocalQueue,
			"GET " + kueueAPI + "/namespaces/" + ns + "/workloads",
			"GET /apis/trainer.kubeflow.org/v1alpha1/namespaces/" + ns + "/trainjobs/" + running,
		}
		slices.Sort(want)
		if diff := gocmp.Diff(want, requestsOf(t, ns, running)); diff != "" {
			t.Errorf("status's requests to the management cluster (-want +got):\n%s", diff)
		}
	})

	t.Run("a user who may not read MultiKueue's Secret is told where the TrainJob runs", func(t *testing.T) {
		grantAlice(t, ns)
		now := get(t, suite.manager, ns, running).CreationTimestamp.Add(sinceCreation)
		assertGolden(t, "status-no-secret", normalize(ns, screen(statusAt(t, ns, now, running, "--as", alice))))
		assertGolden(t, "logs-no-secret", normalize(ns, cli(t, "logs", running, "-n", ns, "--as", alice)))
	})

	t.Run("a container that fails on the worker: status shows its first failure with the end of its log", func(t *testing.T) {
		var rank0 *corev1.Pod
		for _, p := range pods(t, suite.worker, ns, running) {
			if cmp.Or(p.Labels[batchv1.JobCompletionIndexAnnotation], p.Annotations[batchv1.JobCompletionIndexAnnotation]) == "0" {
				rank0 = &p
			}
		}
		if rank0 == nil {
			t.Fatalf("no pod of rank 0 of %s on the worker", running)
		}
		last := "[rank 0] CUDA error: an illegal memory access was encountered"
		if err := suite.clusters.Worker.WritePodLog(t.Context(), ns, rank0.Name, trainer.Node, last); err != nil {
			t.Fatal(err)
		}
		if err := suite.clusters.Worker.RestartContainer(t.Context(), ns, rank0.Name, trainer.Node, 137); err != nil {
			t.Fatal(err)
		}
		cluster.Eventually(t, "status -o json shows the restart of "+rank0.Name+" as the first failure", waitTimeout, func(context.Context) error {
			f := summary(t, ns, running).FirstFailure
			if f == nil || f.Pod != rank0.Name || !f.Previous {
				return fmt.Errorf("first failure %+v", f)
			}
			// The log is the worker's, read through MultiKueue's kubeconfig: its previous instance's last line.
			if f.LogUnavailable != "" || len(f.Log) == 0 || f.Log[len(f.Log)-1] != last {
				return fmt.Errorf("first failure's log %q (unavailable: %q), want it to end with %q", f.Log, f.LogUnavailable, last)
			}
			return nil
		})
	})

	t.Run("the other completes on the worker, and its status comes back", func(t *testing.T) {
		cluster.Eventually(t, finishing+" Complete on the management cluster and its copy deleted from the worker", waitTimeout, func(ctx context.Context) error {
			if err := managerStage(ctx, ns, finishing, stage.Complete); err != nil {
				return err
			}
			err := suite.worker.Get(ctx, client.ObjectKey{Namespace: ns, Name: finishing}, &trainer.TrainJob{})
			if !apierrors.IsNotFound(err) {
				return fmt.Errorf("the worker's copy: %v", err)
			}
			return nil
		})
		select {
		case err := <-followed:
			assertGolden(t, "logs-follow", normalize(ns, ran(t, follow, err, followOut, followErr)))
		case <-followCtx.Done():
			t.Fatalf("logs %s -f did not end within %v of the start:\n%s%s", finishing, cliTimeout, followOut, followErr)
		}
		now := get(t, suite.manager, ns, finishing).CreationTimestamp.Add(sinceCreation)
		assertGolden(t, "status-finished", normalize(ns, screen(statusAt(t, ns, now, finishing))))
		assertGolden(t, "logs-finished", normalize(ns, cli(t, "logs", finishing, "-n", ns)))
	})
}

// mustCLI runs `kubectl trainjob ARGS…` from the real binary and fails the test unless it succeeds.
func mustCLI(t *testing.T, args ...string) {
	t.Helper()
	if out := cli(t, args...); !strings.HasPrefix(out, "exit code: 0\n") {
		t.Fatalf("kubectl trainjob %s:\n%s", strings.Join(args, " "), out)
	}
}

// summary is `status NAME -o json` of a TrainJob of ns.
func summary(t *testing.T, ns, name string) *status.Summary {
	t.Helper()
	out := statusAt(t, ns, time.Now(), name, "-o", "json")
	_, stdout, _ := strings.Cut(out, "--- stdout\n")
	stdout, _, _ = strings.Cut(stdout, "--- stderr\n")
	s := &status.Summary{}
	if err := json.Unmarshal([]byte(stdout), s); err != nil {
		t.Fatalf("status %s -o json: %v\n%s", name, err, out)
	}
	return s
}

// sharedNamespace creates a namespace of the same name on both clusters, with the LocalQueue in each.
func sharedNamespace(t *testing.T) string {
	t.Helper()
	ns := "multikueue-" + rand.String(5)
	if err := suite.clusters.CreateNamespace(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			diagnose(t, ns)
		}
	})
	return ns
}

// grantAlice lets alice read on the management cluster what status and logs read there — the namespace's
// TrainJobs, Jobs, pods, logs and Events, Kueue's Workloads and LocalQueues, and the MultiKueueClusters — but
// no Secret.
func grantAlice(t *testing.T, ns string) {
	t.Helper()
	read := []string{"get", "list", "watch"}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "trainjob-reader"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{trainer.GroupVersion.Group}, Resources: []string{"trainjobs"}, Verbs: read},
		{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: read},
		{APIGroups: []string{jobsetv1alpha2.GroupVersion.Group}, Resources: []string{"jobsets"}, Verbs: read},
		{APIGroups: []string{""}, Resources: []string{"pods", "events"}, Verbs: read},
		{APIGroups: []string{""}, Resources: []string{"pods/log"}, Verbs: []string{"get"}},
		{APIGroups: []string{cluster.KueueGroupVersion.Group}, Resources: []string{"workloads", "localqueues"}, Verbs: read},
	}}
	clusterRole := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "multikueuecluster-reader-" + ns}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{cluster.KueueGroupVersion.Group}, Resources: []string{"multikueueclusters"}, Verbs: read},
	}}
	subjects := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: alice}}
	for _, obj := range []client.Object{
		role,
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "trainjob-reader"}, Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name}},
		clusterRole,
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: clusterRole.Name}, Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole.Name}},
	} {
		if err := suite.manager.Create(t.Context(), obj); err != nil {
			t.Fatal(err)
		}
	}
}

// managerStage tells whether the management cluster's TrainJob name is in stage want (its status is its copy's).
func managerStage(ctx context.Context, ns, name string, want stage.Stage) error {
	tj := &trainer.TrainJob{}
	if err := suite.manager.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, tj); err != nil {
		return err
	}
	if st := stage.Of(tj); st != want {
		return fmt.Errorf("the manager's TrainJob %s is %s", name, st)
	}
	return nil
}

func get(t *testing.T, c client.Client, ns, name string) *trainer.TrainJob {
	t.Helper()
	tj := &trainer.TrainJob{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, tj); err != nil {
		t.Fatal(err)
	}
	return tj
}

func pods(t *testing.T, c client.Client, ns, name string) []corev1.Pod {
	t.Helper()
	var list corev1.PodList
	if err := c.List(t.Context(), &list, client.InNamespace(ns), client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: name}); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// runningPods counts the pods of TrainJob name on the worker that run on GPU nodes.
func runningPods(ctx context.Context, ns, name string) int {
	var list corev1.PodList
	if err := suite.worker.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: name}); err != nil {
		return 0
	}
	n := 0
	for _, p := range list.Items {
		if p.Status.Phase == corev1.PodRunning && strings.HasPrefix(p.Spec.NodeName, "gpu-node-") {
			n++
		}
	}
	return n
}

// workloadOf returns the management cluster's Workload of TrainJob name (the one it controls).
func workloadOf(ctx context.Context, ns, name string) (*unstructured.Unstructured, error) {
	tj := &trainer.TrainJob{}
	if err := suite.manager.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, tj); err != nil {
		return nil, err
	}
	var list unstructured.UnstructuredList
	list.SetGroupVersionKind(cluster.KueueGroupVersion.WithKind("WorkloadList"))
	if err := suite.manager.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	for i := range list.Items {
		if ref := metav1.GetControllerOf(&list.Items[i]); ref != nil && ref.UID == tj.UID {
			return &list.Items[i], nil
		}
	}
	return nil, errors.New("no Workload yet")
}

// diagnose logs the TrainJobs and Workloads of ns on both clusters, for a failed test.
func diagnose(t *testing.T, ns string) {
	ctx := context.Background()
	for _, c := range []struct {
		name string
		c    client.Client
	}{{"manager", suite.manager}, {"worker", suite.worker}} {
		var tjs trainer.TrainJobList
		if err := c.c.List(ctx, &tjs, client.InNamespace(ns)); err == nil {
			for _, tj := range tjs.Items {
				t.Logf("%s: TrainJob %s: suspend %v, managedBy %v, labels %v, conditions %+v", c.name, tj.Name,
					ptr.Deref(tj.Spec.Suspend, false), ptr.Deref(tj.Spec.ManagedBy, ""), tj.Labels, tj.Status.Conditions)
			}
		}
		var wls unstructured.UnstructuredList
		wls.SetGroupVersionKind(cluster.KueueGroupVersion.WithKind("WorkloadList"))
		if err := c.c.List(ctx, &wls, client.InNamespace(ns)); err == nil {
			for _, wl := range wls.Items {
				st, _, _ := unstructured.NestedMap(wl.Object, "status")
				t.Logf("%s: Workload %s: status %v", c.name, wl.GetName(), st)
			}
		}
	}
}
