package realnode_test

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/config"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/stack"
)

// operatorLabels select the operator's pods.
var operatorLabels = client.MatchingLabels{"app.kubernetes.io/name": "kubectl-trainjob", "app.kubernetes.io/component": "operator"}

// operatorPodList is the operator's pods that are not being deleted.
func (r *realNodeSuite) operatorPodList(ctx context.Context) ([]corev1.Pod, error) {
	var pods corev1.PodList
	if err := r.cl.List(ctx, &pods, client.InNamespace(operatorNamespace), operatorLabels); err != nil {
		return nil, err
	}
	var live []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	return live, nil
}

// restrictedNamespace: config/default's namespace enforces the restricted Pod Security Standard, the
// operator's real pods run in it, and a pod that is not hardened is refused there.
func (r *realNodeSuite) restrictedNamespace(t *testing.T) {
	var ns corev1.Namespace
	if err := r.cl.Get(t.Context(), client.ObjectKey{Name: operatorNamespace}, &ns); err != nil {
		t.Fatal(err)
	}
	if got := ns.Labels["pod-security.kubernetes.io/enforce"]; got != "restricted" {
		t.Errorf("namespace %s enforces %q, want restricted", operatorNamespace, got)
	}
	pods, err := r.operatorPodList(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 2 {
		t.Errorf("%d operator pods run in the restricted namespace, want the Deployment's 2", len(pods))
	}
	plain := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: "not-hardened"},
		Spec: corev1.PodSpec{
			NodeName:   cluster.RealNodeName,
			Containers: []corev1.Container{{Name: "c", Image: trainerImage}},
		},
	}
	err = r.cl.Create(t.Context(), plain)
	if err == nil {
		_ = r.cl.Delete(t.Context(), plain)
	}
	if err == nil || !strings.Contains(err.Error(), `violates PodSecurity "restricted:latest"`) {
		t.Errorf("a pod without a securityContext in %s: %v, want it refused by PodSecurity", operatorNamespace, err)
	}
}

// failoverDeadline is how soon a TrainJob created right after the leader's pod is deleted must be built: the
// kubelet stops the pod's container (its grace period), the other pod takes the Lease (a lease duration at
// most, if the leader could not release it, and a retry period) and then has a minute to build, on a machine
// of 2 cores busy with other tests.
const failoverDeadline = config.DefaultLeaseDuration + config.DefaultRetryPeriod + time.Minute

// leaderFailover deletes the pod that holds the leader Lease; a TrainJob created right after it has let go of
// the Lease is built by the other pod, which then holds the Lease, within failoverDeadline of the deletion. The
// Deployment then rolls back to two pods.
func (r *realNodeSuite) leaderFailover(t *testing.T) {
	ns := r.namespace(t)
	pods, err := r.operatorPodList(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var lease coordinationv1.Lease
	if err := r.cl.Get(t.Context(), client.ObjectKey{Namespace: operatorNamespace, Name: "trainer.kubeflow.org"}, &lease); err != nil {
		t.Fatal(err)
	}
	// controller-runtime's identity is the hostname (the pod's name), "_", a UUID.
	leader, _, _ := strings.Cut(ptr.Deref(lease.Spec.HolderIdentity, ""), "_")
	var survivor string
	found := false
	for _, p := range pods {
		if p.Name == leader {
			found = true
		} else {
			survivor = p.Name
		}
	}
	if !found || survivor == "" || len(pods) != 2 {
		t.Fatalf("Lease held by %q; operator pods %v: want it held by one of two", ptr.Deref(lease.Spec.HolderIdentity, ""), podNames(pods))
	}
	if err := r.cl.Delete(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: leader}}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	t.Logf("deleted the leader's pod %s; %s stays", leader, survivor)
	// The deleted pod leads until its manager has stopped, which then releases the Lease: a TrainJob created
	// before that could be built by it.
	ctx, cancel := context.WithDeadline(t.Context(), deleted.Add(failoverDeadline))
	defer cancel()
	var holder string
	if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := r.cl.Get(ctx, client.ObjectKeyFromObject(&lease), &lease); err != nil {
			return false, nil
		}
		holder, _, _ = strings.Cut(ptr.Deref(lease.Spec.HolderIdentity, ""), "_")
		return holder != leader, nil
	}); err != nil {
		t.Fatalf("the deleted pod %s still held the Lease %v after its deletion: %v", leader, failoverDeadline, err)
	}
	t.Logf("the deleted pod let go of the Lease %v after its deletion (holder now %q)", time.Since(deleted).Round(100*time.Millisecond), holder)

	// Suspended: the JobSet is built (suspended too) and nothing runs.
	tj := torchTrainJob(ns, "after-failover", 1)
	tj.Spec.Suspend = ptr.To(true)
	var last error
	// The webhook may still be called at the deleted pod's address until its endpoint is gone.
	if err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		last = r.cl.Create(ctx, tj.DeepCopy())
		return last == nil, nil
	}); err != nil {
		t.Fatalf("creating a TrainJob after the leader's pod was deleted: %v (last: %v)", err, last)
	}
	var js jobsetv1alpha2.JobSet
	if err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		last = r.cl.Get(ctx, client.ObjectKeyFromObject(tj), &js)
		return last == nil, nil
	}); err != nil {
		t.Fatalf("no JobSet %s/%s within %v of the leader pod's deletion: %v (last: %v)", ns, tj.Name, failoverDeadline, err, last)
	}
	t.Logf("JobSet built %v after the leader's pod was deleted", time.Since(deleted).Round(100*time.Millisecond))
	if err := r.cl.Get(t.Context(), client.ObjectKeyFromObject(&lease), &lease); err != nil {
		t.Fatal(err)
	}
	// The surviving pod, or the Deployment's replacement for the deleted one, which may take the Lease first.
	holder, _, _ = strings.Cut(ptr.Deref(lease.Spec.HolderIdentity, ""), "_")
	var holderPod corev1.Pod
	err = r.cl.Get(t.Context(), client.ObjectKey{Namespace: operatorNamespace, Name: holder}, &holderPod)
	if holder == leader || err != nil || !holderPod.DeletionTimestamp.IsZero() {
		t.Errorf("Lease held by %q after the failover (%v), want a running operator pod other than the deleted %s (%s stays)", holder, err, leader, survivor)
	}
	// The Deployment replaces the pod; the next test wants two again.
	if err := stack.WaitRollout(t.Context(), r.cl); err != nil {
		t.Fatal(err)
	}
}

func podNames(pods []corev1.Pod) []string {
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
	}
	return names
}

// install runs `kubectl trainjob install --image` against the real node with another tag of the operator's
// image: when it returns, the real rollout is over — the Deployment's pods run the new image and are Ready.
func (r *realNodeSuite) install(t *testing.T) {
	old, err := r.operatorPodList(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	out := r.cli(t, "install", "--image", upgradeImage)
	t.Logf("install --image %s returned after %v:\n%s", upgradeImage, time.Since(begin).Round(100*time.Millisecond), out)
	var d appsv1.Deployment
	if err := r.cl.Get(t.Context(), client.ObjectKey{Namespace: operatorNamespace, Name: "kubectl-trainjob-operator"}, &d); err != nil {
		t.Fatal(err)
	}
	if got := d.Spec.Template.Spec.Containers[0].Image; got != upgradeImage {
		t.Fatalf("the Deployment's image is %s after install, want %s", got, upgradeImage)
	}
	want := ptr.Deref(d.Spec.Replicas, 1)
	if st := d.Status; st.ObservedGeneration < d.Generation || st.UpdatedReplicas != want || st.AvailableReplicas != want {
		t.Errorf("install returned before the rollout: %+v, want %d replicas updated and available", st, want)
	}
	pods, err := r.operatorPodList(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ready := 0
	for _, p := range pods {
		for _, o := range old {
			if o.UID == p.UID {
				t.Errorf("pod %s of the old image is still up", p.Name)
			}
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Ready && cs.State.Running != nil && p.Spec.Containers[0].Image == upgradeImage {
				ready++
			}
		}
	}
	if ready != int(want) {
		t.Errorf("%d Ready pods of %s when install returned, want %d: %v", ready, upgradeImage, want, podNames(pods))
	}
	// The new pods admit through the webhook Service.
	tj := torchTrainJob(r.namespace(t), "after-install", 1)
	tj.Spec.Suspend = ptr.To(true)
	if err := r.cl.Create(t.Context(), tj); err != nil {
		t.Errorf("a TrainJob after install: %v", err)
	}
}
