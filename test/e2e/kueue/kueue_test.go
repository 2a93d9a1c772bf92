package kueue

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/stage"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/status"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/golden"
)

const (
	queueLabel         = "kueue.x-k8s.io/queue-name"
	priorityClassLabel = "kueue.x-k8s.io/priority-class"
	kueueManager       = "kueue.x-k8s.io/manager"
	// waitTimeout bounds every wait: generous, since the machine is shared.
	waitTimeout = 3 * time.Minute
)

// TestQueueing: two TrainJobs of 2 × 8 GPUs in a ClusterQueue of 16 GPUs. The first is admitted and runs, the
// second waits, suspended, with the reason in its Workload, and `list` and `status` show it Queued and why;
// deleting the first admits the second; a higher-priority TrainJob preempts it (suspended again, its pods
// gone, Kueue's patch cleared, and `status` shows the eviction), and once that one is gone the preempted
// TrainJob is admitted again and its JobSet rebuilt with Kueue's patch. `suspend` and `resume` then stop and
// requeue it through its Workload, and say so.
func TestQueueing(t *testing.T) {
	ns := queueNamespace(t)
	high := kueueObject("WorkloadPriorityClass", "", "e2e-high", nil)
	high.Object["value"] = int64(1000)
	if err := suite.client.Create(t.Context(), high); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}

	first := gpuTrainJob(ns, "first", "")
	second := gpuTrainJob(ns, "second", "")
	urgent := gpuTrainJob(ns, "urgent", high.GetName())

	t.Run("the first is admitted and runs", func(t *testing.T) {
		create(t, first)
		if !ptr.Deref(first.Spec.Suspend, false) || kueuePatch(first) == nil {
			t.Errorf("Kueue's webhook did not suspend the TrainJob and add its runtime patch: suspend %v, patches %+v",
				ptr.Deref(first.Spec.Suspend, false), first.Spec.RuntimePatches)
		}
		waitRunning(t, first)
	})

	t.Run("the second waits for GPUs, suspended, and its Workload says why", func(t *testing.T) {
		create(t, second)
		var msg string
		cluster.Eventually(t, "the second's Workload not admitted for lack of GPUs", waitTimeout, func(ctx context.Context) error {
			wl, err := workloadOf(ctx, second)
			if err != nil {
				return err
			}
			c := condition(wl, "QuotaReserved")
			msg, _ = c["message"].(string)
			if c["status"] != "False" || !strings.Contains(msg, string(cluster.GPUResource)) {
				return fmt.Errorf("QuotaReserved %v", c)
			}
			return nil
		})
		t.Logf("why the second waits: %s", msg)
		tj := get(t, second)
		if !ptr.Deref(tj.Spec.Suspend, false) {
			t.Errorf("the second TrainJob is not suspended")
		}
		cluster.Eventually(t, "the second's JobSet suspended and the TrainJob's Suspended condition", waitTimeout, func(ctx context.Context) error {
			tj := &trainer.TrainJob{}
			if err := suite.client.Get(ctx, client.ObjectKeyFromObject(second), tj); err != nil {
				return err
			}
			if c := findCondition(tj.Status.Conditions, trainer.TrainJobSuspended); c == nil || c.Status != metav1.ConditionTrue {
				return fmt.Errorf("Suspended condition %+v", c)
			}
			js := &jobsetv1alpha2.JobSet{}
			if err := suite.client.Get(ctx, client.ObjectKeyFromObject(second), js); err != nil {
				return err
			}
			if !ptr.Deref(js.Spec.Suspend, false) {
				return errors.New("the JobSet is not suspended")
			}
			return nil
		})
		if n := len(pods(t, second)); n != 0 {
			t.Errorf("the waiting TrainJob has %d pods", n)
		}

		waitStage(t, first, stage.Training)
		now := get(t, second).CreationTimestamp.Add(sinceCreation)
		assertGolden(t, "queued-list", normalize(ns, inProcess(t, ns, now, "list", "-o", "wide")))
		assertGolden(t, "queued-status", normalize(ns, golden.ScreenHead(inProcess(t, ns, now, "status", second.Name))))
		s := summary(t, ns, second.Name)
		q := s.Queue
		if s.Stage != stage.Queued || q == nil {
			t.Fatalf("status -o json: stage %s, queue %+v, want Queued with its Workload", s.Stage, q)
		}
		if q.LocalQueue != cluster.KueueLocalQueue || q.ClusterQueue != cluster.KueueClusterQueue || q.Workload == "" || q.Admitted ||
			q.Position != "0 ahead in ClusterQueue gpu-cq, 0 in LocalQueue gpu" || q.NotAdmitted != msg {
			t.Errorf("status -o json: queue %+v, want LocalQueue %s of ClusterQueue %s, not admitted because %q, next in both",
				q, cluster.KueueLocalQueue, cluster.KueueClusterQueue, msg)
		}
		if !hasTimeline(s, status.SourceWorkloadCondition, "Workload QuotaReserved=False", "Pending") {
			t.Errorf("status -o json: the timeline lacks the Workload's QuotaReserved=False: %+v", s.Timeline)
		}
	})

	t.Run("deleting the first admits the second", func(t *testing.T) {
		if err := suite.client.Delete(t.Context(), first, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
			t.Fatal(err)
		}
		waitRunning(t, second)
		s := summary(t, ns, second.Name)
		if q := s.Queue; s.Stage == stage.Queued || q == nil || !q.Admitted || q.AdmittedAt == nil || q.ClusterQueue != cluster.KueueClusterQueue ||
			q.NotAdmitted != "" || q.Position != "" {
			t.Errorf("status -o json: stage %s, queue %+v, want admitted in %s", s.Stage, q, cluster.KueueClusterQueue)
		}
		if !hasTimeline(s, status.SourceWorkloadCondition, "Workload Admitted=True", "Admitted") {
			t.Errorf("status -o json: the timeline lacks the Workload's admission: %+v", s.Timeline)
		}
	})

	t.Run("a higher-priority TrainJob preempts the second", func(t *testing.T) {
		create(t, urgent)
		cluster.Eventually(t, "the second preempted: suspended, no pods, Kueue's patch cleared", waitTimeout, func(ctx context.Context) error {
			wl, err := workloadOf(ctx, second)
			if err != nil {
				return err
			}
			if c := condition(wl, "Evicted"); c["status"] != "True" || c["reason"] != "Preempted" {
				return fmt.Errorf("Evicted condition %v", c)
			}
			tj := &trainer.TrainJob{}
			if err := suite.client.Get(ctx, client.ObjectKeyFromObject(second), tj); err != nil {
				return err
			}
			if !ptr.Deref(tj.Spec.Suspend, false) {
				return errors.New("not suspended")
			}
			if p := kueuePatch(tj); p == nil || p.TrainingRuntimeSpec == nil || p.TrainingRuntimeSpec.Template == nil ||
				p.TrainingRuntimeSpec.Template.Spec == nil || len(p.TrainingRuntimeSpec.Template.Spec.ReplicatedJobs) != 0 {
				return fmt.Errorf("Kueue's runtime patch not cleared: %+v", p)
			}
			var list corev1.PodList
			if err := suite.client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: second.Name}); err != nil {
				return err
			}
			if len(list.Items) != 0 {
				return fmt.Errorf("%d pods left", len(list.Items))
			}
			return nil
		})
		waitRunning(t, urgent)

		// Kueue looks for quota for the preempted Workload again, and says why there is none.
		cluster.Eventually(t, "the preempted Workload not admitted for lack of GPUs", waitTimeout, func(ctx context.Context) error {
			wl, err := workloadOf(ctx, second)
			if err != nil {
				return err
			}
			if c := condition(wl, "QuotaReserved"); c["status"] != "False" || !strings.Contains(fmt.Sprint(c["message"]), string(cluster.GPUResource)) {
				return fmt.Errorf("QuotaReserved %v", c)
			}
			return nil
		})
		waitStage(t, urgent, stage.Training)
		now := get(t, urgent).CreationTimestamp.Add(sinceCreation)
		assertGolden(t, "preempted-list", normalize(ns, inProcess(t, ns, now, "list", "-o", "wide")))
		screen := inProcess(t, ns, now, "status", second.Name)
		t.Logf("kubectl trainjob status %s:\n%s", second.Name, screen)
		assertGolden(t, "preempted-status", normalize(ns, golden.ScreenHead(screen)))
		s := summary(t, ns, second.Name)
		if s.Stage != stage.Queued || s.Queue == nil || len(s.Queue.Evictions) != 1 || s.Queue.Evictions[0].Reason != "Preempted" ||
			s.Queue.Evictions[0].By != "TrainJob/"+urgent.Name {
			t.Errorf("status -o json: stage %s, queue %+v, want Queued after one eviction, Preempted by TrainJob/%s", s.Stage, s.Queue, urgent.Name)
		}
		if !hasTimeline(s, status.SourceWorkloadCondition, "Workload Evicted=True", "Preempted") &&
			!hasTimeline(s, status.SourceWorkloadEvent, "Workload Event Normal", "EvictedDueToPreempted") {
			t.Errorf("status -o json: the timeline lacks the preemption: %+v", s.Timeline)
		}
	})

	t.Run("the preempted TrainJob runs again once the urgent one is gone", func(t *testing.T) {
		if err := suite.client.Delete(t.Context(), urgent, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
			t.Fatal(err)
		}
		waitRunning(t, second)
	})

	t.Run("kubectl trainjob suspend and resume act on the Workload", func(t *testing.T) {
		assertGolden(t, "suspend", normalize(ns, cli(t, "suspend", second.Name, "-n", ns)))
		cluster.Eventually(t, "the Workload inactive, the TrainJob suspended by Kueue and its pods gone", waitTimeout, func(ctx context.Context) error {
			wl, err := workloadOf(ctx, second)
			if err != nil {
				return err
			}
			if active, _, _ := unstructured.NestedBool(wl.Object, "spec", "active"); active {
				return errors.New("Workload spec.active is true")
			}
			tj := &trainer.TrainJob{}
			if err := suite.client.Get(ctx, client.ObjectKeyFromObject(second), tj); err != nil {
				return err
			}
			if !ptr.Deref(tj.Spec.Suspend, false) {
				return errors.New("not suspended")
			}
			var list corev1.PodList
			if err := suite.client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: second.Name}); err != nil {
				return err
			}
			if len(list.Items) != 0 {
				return fmt.Errorf("%d pods left", len(list.Items))
			}
			return nil
		})
		// Stopped, not Queued: Kueue will not admit it until it is resumed.
		cluster.Eventually(t, "the TrainJob's Suspended condition", waitTimeout, func(ctx context.Context) error {
			tj := &trainer.TrainJob{}
			if err := suite.client.Get(ctx, client.ObjectKeyFromObject(second), tj); err != nil {
				return err
			}
			if c := findCondition(tj.Status.Conditions, trainer.TrainJobSuspended); c == nil || c.Status != metav1.ConditionTrue {
				return fmt.Errorf("Suspended condition %+v", c)
			}
			return nil
		})
		now := get(t, second).CreationTimestamp.Add(sinceCreation)
		assertGolden(t, "stopped-status", normalize(ns, golden.ScreenHead(inProcess(t, ns, now, "status", second.Name))))
		if s := summary(t, ns, second.Name); s.Stage != stage.Suspended || s.Queue == nil || s.Queue.Active {
			t.Errorf("status -o json: stage %s, queue %+v, want Suspended with an inactive Workload", s.Stage, s.Queue)
		}
		assertGolden(t, "resume", normalize(ns, cli(t, "resume", second.Name, "-n", ns)))
		waitRunning(t, second)
	})
}

// cli runs `kubectl trainjob args...` as the cluster's administrator and returns its standard output.
func cli(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), suite.binary, append(args, "--kubeconfig", suite.cluster.KubeconfigPath)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl trainjob %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

// gpuTrainJob is a TrainJob of 2 nodes × 8 GPUs on the shipped torch-distributed runtime in the namespace's
// LocalQueue, whose pods run until they are deleted. Neither node selector nor toleration: Kueue's admission
// brings the ResourceFlavor's.
func gpuTrainJob(ns, name, priorityClass string) *trainer.TrainJob {
	gpus := corev1.ResourceList{cluster.GPUResource: resource.MustParse("8")}
	tj := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{queueLabel: cluster.KueueLocalQueue}},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{Name: "torch-distributed"},
			Trainer: &trainer.Trainer{
				NumNodes:         ptr.To[int32](2),
				Command:          []string{"torchrun", "/workspace/train.py"},
				ResourcesPerNode: &corev1.ResourceRequirements{Limits: gpus},
				Env:              []corev1.EnvVar{{Name: "SIM_RUN_SECONDS", Value: "3600"}},
			},
		},
	}
	if priorityClass != "" {
		tj.Labels[priorityClassLabel] = priorityClass
	}
	return tj
}

// waitStage waits until tj is in stage st, as the TrainJob alone says (pkg/stage).
func waitStage(t *testing.T, tj *trainer.TrainJob, st stage.Stage) {
	t.Helper()
	cluster.Eventually(t, tj.Name+" "+string(st), waitTimeout, func(ctx context.Context) error {
		got := &trainer.TrainJob{}
		if err := suite.client.Get(ctx, client.ObjectKeyFromObject(tj), got); err != nil {
			return err
		}
		if now := stage.Of(got); now != st {
			return fmt.Errorf("stage %s", now)
		}
		return nil
	})
}

// waitRunning waits until tj's Workload is admitted, tj is resumed, and its pods (one a node of
// spec.trainer.numNodes) run on GPU nodes with the node selector of Kueue's patch.
func waitRunning(t *testing.T, tj *trainer.TrainJob) {
	t.Helper()
	want := int(ptr.Deref(tj.Spec.Trainer.NumNodes, 1))
	cluster.Eventually(t, tj.Name+" admitted and its pods Running on GPU nodes", waitTimeout, func(ctx context.Context) error {
		wl, err := workloadOf(ctx, tj)
		if err != nil {
			return err
		}
		if c := condition(wl, "Admitted"); c["status"] != "True" {
			return fmt.Errorf("Workload Admitted %v", c)
		}
		got := &trainer.TrainJob{}
		if err := suite.client.Get(ctx, client.ObjectKeyFromObject(tj), got); err != nil {
			return err
		}
		if ptr.Deref(got.Spec.Suspend, false) {
			return errors.New("the TrainJob is still suspended")
		}
		var list corev1.PodList
		if err := suite.client.List(ctx, &list, client.InNamespace(tj.Namespace), client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: tj.Name}); err != nil {
			return err
		}
		running := 0
		for _, p := range list.Items {
			if p.DeletionTimestamp != nil {
				continue
			}
			if p.Spec.NodeSelector[cluster.GPUPresentLabel] != "true" {
				return fmt.Errorf("pod %s has nodeSelector %v, without the flavor's %s", p.Name, p.Spec.NodeSelector, cluster.GPUPresentLabel)
			}
			if p.Status.Phase == corev1.PodRunning && strings.HasPrefix(p.Spec.NodeName, "gpu-node-") {
				running++
			}
		}
		if running != want {
			return fmt.Errorf("%d of %d pods Running on GPU nodes, want %d", running, len(list.Items), want)
		}
		return nil
	})
}

func create(t *testing.T, tj *trainer.TrainJob) {
	t.Helper()
	if err := suite.client.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, tj *trainer.TrainJob) *trainer.TrainJob {
	t.Helper()
	got := &trainer.TrainJob{}
	if err := suite.client.Get(t.Context(), client.ObjectKeyFromObject(tj), got); err != nil {
		t.Fatal(err)
	}
	return got
}

func pods(t *testing.T, tj *trainer.TrainJob) []corev1.Pod {
	t.Helper()
	var list corev1.PodList
	if err := suite.client.List(t.Context(), &list, client.InNamespace(tj.Namespace), client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: tj.Name}); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// kueuePatch returns the runtime patch of Kueue's manager, or nil.
func kueuePatch(tj *trainer.TrainJob) *trainer.RuntimePatch {
	for i := range tj.Spec.RuntimePatches {
		if tj.Spec.RuntimePatches[i].Manager == kueueManager {
			return &tj.Spec.RuntimePatches[i]
		}
	}
	return nil
}

func findCondition(conds []metav1.Condition, typ string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}

// workloadOf returns the Workload Kueue made for tj (the one it controls), or an error while there is none.
func workloadOf(ctx context.Context, tj *trainer.TrainJob) (*unstructured.Unstructured, error) {
	var list unstructured.UnstructuredList
	list.SetGroupVersionKind(cluster.KueueGroupVersion.WithKind("WorkloadList"))
	if err := suite.client.List(ctx, &list, client.InNamespace(tj.Namespace)); err != nil {
		return nil, err
	}
	got := &trainer.TrainJob{}
	if err := suite.client.Get(ctx, client.ObjectKeyFromObject(tj), got); err != nil {
		return nil, err
	}
	for i := range list.Items {
		for _, ref := range list.Items[i].GetOwnerReferences() {
			if ref.Kind == "TrainJob" && ref.UID == got.UID && ptr.Deref(ref.Controller, false) {
				return &list.Items[i], nil
			}
		}
	}
	return nil, fmt.Errorf("no Workload for TrainJob %s/%s yet", tj.Namespace, tj.Name)
}

// condition returns the status condition of type typ of a Kueue object, or nil.
func condition(u *unstructured.Unstructured, typ string) map[string]any {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			return m
		}
	}
	return nil
}

func kueueObject(kind, ns, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	if spec != nil {
		u.Object["spec"] = spec
	}
	u.SetAPIVersion(cluster.KueueGroupVersion.String())
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// queueNamespace creates a namespace for one test (cluster.NewNamespace) with the cluster's LocalQueue in it.
// It first waits for the ClusterQueue to be idle (queueIdle).
func queueNamespace(t *testing.T) string {
	t.Helper()
	queueIdle(t)
	ns := cluster.NewNamespace(t, suite.client, "kueue-", diagnose)
	if err := suite.cluster.CreateLocalQueue(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	return ns
}

// queueIdle waits until the ClusterQueues reserve quota for no Workload and hold none pending. Every test
// shares their GPUs, and an earlier test's namespace goes in the background (its TrainJobs, then their
// Workloads): until they are gone, their reservations would keep this test's TrainJobs from being admitted,
// and their pending Workloads would count in the positions of this test's.
func queueIdle(t *testing.T) {
	t.Helper()
	for _, name := range []string{cluster.KueueClusterQueue, cluster.KueueTASClusterQueue} {
		cluster.Eventually(t, "the ClusterQueue "+name+" reserving nothing, nothing pending (earlier tests' TrainJobs gone)", waitTimeout, func(ctx context.Context) error {
			cq := kueueObject("ClusterQueue", "", name, nil)
			if err := suite.client.Get(ctx, client.ObjectKeyFromObject(cq), cq); err != nil {
				return err
			}
			if n, _, _ := unstructured.NestedInt64(cq.Object, "status", "reservingWorkloads"); n != 0 {
				return fmt.Errorf("%d Workloads reserve quota", n)
			}
			// Kueue's visibility API, not the ClusterQueue's status.pendingWorkloads: the status is written later,
			// and the API is what the positions come from.
			var pending struct{ Items []json.RawMessage }
			raw, err := suite.cluster.Clientset().CoreV1().RESTClient().Get().
				AbsPath("/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues", name, "pendingworkloads").DoRaw(ctx)
			if err != nil {
				return err
			}
			if err := json.Unmarshal(raw, &pending); err != nil {
				return err
			}
			if len(pending.Items) != 0 {
				return fmt.Errorf("%d Workloads pending", len(pending.Items))
			}
			return nil
		})
	}
}

// diagnose logs the TrainJobs and Workloads of ns, for a failed test.
func diagnose(t testing.TB, ns string) {
	ctx := context.Background()
	var tjs trainer.TrainJobList
	if err := suite.client.List(ctx, &tjs, client.InNamespace(ns)); err == nil {
		for _, tj := range tjs.Items {
			t.Logf("TrainJob %s: suspend %v, patches %+v, conditions %+v", tj.Name, ptr.Deref(tj.Spec.Suspend, false), tj.Spec.RuntimePatches, tj.Status.Conditions)
		}
	}
	var wls unstructured.UnstructuredList
	wls.SetGroupVersionKind(cluster.KueueGroupVersion.WithKind("WorkloadList"))
	if err := suite.client.List(ctx, &wls, client.InNamespace(ns)); err == nil {
		for _, wl := range wls.Items {
			conds, _, _ := unstructured.NestedSlice(wl.Object, "status", "conditions")
			t.Logf("Workload %s: conditions %v", wl.GetName(), conds)
		}
	}
}
