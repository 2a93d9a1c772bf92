package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// The MultiKueue objects StartMultiKueue creates on the management cluster, as Kueue's "Setup a MultiKueue
// environment" names their kinds: the AdmissionCheck of MultiKueue's controller that the ClusterQueue
// KueueClusterQueue admits through, the MultiKueueConfig it names, and the one MultiKueueCluster of that
// config, whose kubeconfig is the Secret MultiKueueSecret in Kueue's namespace.
const (
	MultiKueueAdmissionCheck = "multikueue"
	MultiKueueConfigName     = "workers"
	MultiKueueWorker         = "worker-1"
	MultiKueueSecret         = MultiKueueWorker + "-kubeconfig"
	// MultiKueueNamespace is Kueue's namespace on both clusters, where the Secret is.
	MultiKueueNamespace = kueueNamespace
	// multiKueueController is the controllerName of MultiKueue's admission checks.
	multiKueueController = "kueue.x-k8s.io/multikueue"
	// multiKueueServiceAccount is the worker's ServiceAccount whose token the Secret's kubeconfig holds, as
	// Kueue's create-multikueue-kubeconfig.sh makes it.
	multiKueueServiceAccount = "multikueue-sa"
)

// multiKueueRules are what the worker's ServiceAccount may do: what MultiKueue needs to create, watch and
// delete the copies of TrainJobs and JobSets and their Workloads (Kueue's create-multikueue-kubeconfig.sh
// for those kinds, plus TrainJobs, which that script leaves out), and what kubectl-trainjob reads through the
// same Secret to follow a dispatched TrainJob: its Jobs, pods, their logs and the Events.
var multiKueueRules = []rbacv1.PolicyRule{
	{APIGroups: []string{"trainer.kubeflow.org"}, Resources: []string{"trainjobs"}, Verbs: []string{"create", "delete", "get", "list", "watch"}},
	{APIGroups: []string{"trainer.kubeflow.org"}, Resources: []string{"trainjobs/status"}, Verbs: []string{"get"}},
	{APIGroups: []string{"jobset.x-k8s.io"}, Resources: []string{"jobsets"}, Verbs: []string{"create", "delete", "get", "list", "watch"}},
	{APIGroups: []string{"jobset.x-k8s.io"}, Resources: []string{"jobsets/status"}, Verbs: []string{"get"}},
	{APIGroups: []string{"kueue.x-k8s.io"}, Resources: []string{"workloads"}, Verbs: []string{"create", "delete", "get", "list", "watch"}},
	{APIGroups: []string{"kueue.x-k8s.io"}, Resources: []string{"workloads/status"}, Verbs: []string{"get", "patch", "update"}},
	{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{""}, Resources: []string{"pods/log"}, Verbs: []string{"get"}},
	{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"list", "watch"}},
}

// MultiKueueOptions configure StartMultiKueue. Each cluster's Profile and Kueue are set by StartMultiKueue;
// the rest of each Options applies as to Start (LogDir, node counts, PodRunDuration, …).
type MultiKueueOptions struct {
	Manager Options
	Worker  Options
	// Started, when set, is called with each cluster as soon as it has started ("manager" or "worker"), before
	// the two are connected, for both at the same time: an end-to-end test installs the product on each
	// meanwhile. An error stops both.
	Started func(ctx context.Context, name string, c *Cluster) error
}

// MultiKueue is two local clusters side by side, from the same programs: a management cluster (the api
// profile with Kueue: TrainJobs and Workloads, nothing runs) whose ClusterQueue dispatches every Workload
// through MultiKueue to the worker (the full profile with Kueue: nodes, JobSet, pods), where the copies of
// its TrainJobs run. Both have the ClusterQueue KueueClusterQueue; CreateNamespace gives a namespace to both
// with the LocalQueue KueueLocalQueue in it, as MultiKueue needs.
type MultiKueue struct {
	Manager *Cluster
	Worker  *Cluster
}

// StartMultiKueue starts the management and the worker cluster at the same time, then connects them as
// Kueue's MultiKueue setup guide does: on the worker a ServiceAccount with a ClusterRole (multiKueueRules)
// whose token goes into a kubeconfig; on the manager that kubeconfig as Secret MultiKueueSecret, the
// MultiKueueCluster MultiKueueWorker, the MultiKueueConfig and the AdmissionCheck. It returns once Kueue on the
// manager says the worker is connected and its ClusterQueue is Active. On error both are stopped.
func StartMultiKueue(ctx context.Context, opts MultiKueueOptions) (*MultiKueue, error) {
	manager, worker := opts.Manager, opts.Worker
	manager.Profile, manager.Kueue, manager.multiKueueManager = ProfileAPI, true, true
	worker.Profile, worker.Kueue = ProfileFull, true
	m := &MultiKueue{}
	var managerErr, workerErr error
	var wg sync.WaitGroup
	wg.Go(func() { m.Manager, managerErr = startAndCall(ctx, "manager", manager, opts.Started) })
	wg.Go(func() { m.Worker, workerErr = startAndCall(ctx, "worker", worker, opts.Started) })
	wg.Wait()
	if err := errors.Join(managerErr, workerErr); err != nil {
		return nil, errors.Join(err, m.Stop())
	}
	if err := m.connect(ctx); err != nil {
		var tails strings.Builder
		m.DumpLogs(&tails, 30)
		return nil, errors.Join(fmt.Errorf("connect the MultiKueue clusters: %w\n%s", err, tails.String()), m.Stop())
	}
	return m, nil
}

// startAndCall starts a cluster and calls started with it, if set; on started's error the cluster is
// returned with it, to be stopped.
func startAndCall(ctx context.Context, name string, opts Options, started func(context.Context, string, *Cluster) error) (*Cluster, error) {
	c, err := Start(ctx, opts)
	if err != nil || started == nil {
		return c, err
	}
	if err := started(ctx, name, c); err != nil {
		return c, fmt.Errorf("%s cluster: %w", name, err)
	}
	return c, nil
}

// connect gives the manager the worker's kubeconfig and the MultiKueue objects, and waits until they are Active.
func (m *MultiKueue) connect(ctx context.Context) error {
	kubeconfig, err := m.Worker.multiKueueKubeconfig(ctx)
	if err != nil {
		return err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: kueueNamespace, Name: MultiKueueSecret},
		Data:       map[string][]byte{"kubeconfig": kubeconfig},
	}
	if _, err := m.Manager.client.CoreV1().Secrets(kueueNamespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create Secret %s/%s: %w", kueueNamespace, MultiKueueSecret, err)
	}
	client, err := dynamic.NewForConfig(m.Manager.Config)
	if err != nil {
		return err
	}
	objs := []struct {
		resource string
		obj      *unstructured.Unstructured
	}{
		{"multikueueclusters", kueueObject("MultiKueueCluster", "", MultiKueueWorker, map[string]any{
			"clusterSource": map[string]any{"kubeConfig": map[string]any{"locationType": "Secret", "location": MultiKueueSecret}},
		})},
		{"multikueueconfigs", kueueObject("MultiKueueConfig", "", MultiKueueConfigName, map[string]any{"clusters": []any{MultiKueueWorker}})},
		{"admissionchecks", kueueObject("AdmissionCheck", "", MultiKueueAdmissionCheck, map[string]any{
			"controllerName": multiKueueController,
			"parameters":     map[string]any{"apiGroup": KueueGroupVersion.Group, "kind": "MultiKueueConfig", "name": MultiKueueConfigName},
		})},
	}
	for _, o := range objs {
		if _, err := client.Resource(KueueGroupVersion.WithResource(o.resource)).Create(ctx, o.obj, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create %s %s: %w", o.obj.GetKind(), o.obj.GetName(), err)
		}
	}
	procs := append(append([]*process(nil), m.Manager.procs...), m.Worker.procs...)
	return waitAll(ctx, procs, []check{
		{"MultiKueueCluster " + MultiKueueWorker + " Active (Kueue on the manager connected to the worker)",
			m.Manager.kueueActive("multikueueclusters", MultiKueueWorker)},
		{"AdmissionCheck " + MultiKueueAdmissionCheck + " Active", m.Manager.kueueActive("admissionchecks", MultiKueueAdmissionCheck)},
		{"the manager's ClusterQueue " + KueueClusterQueue + " Active", m.Manager.kueueQueueActive},
	})
}

// multiKueueKubeconfig makes the worker's ServiceAccount for MultiKueue and returns a kubeconfig of its token,
// which passes Kueue's checks of a MultiKueue kubeconfig: the CA inline, no token file, no exec plugin.
func (c *Cluster) multiKueueKubeconfig(ctx context.Context) ([]byte, error) {
	cs := c.client
	role := multiKueueServiceAccount + "-role"
	creates := []func() error{
		func() error {
			_, err := cs.CoreV1().ServiceAccounts(kueueNamespace).Create(ctx,
				&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: multiKueueServiceAccount}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: role}, Rules: multiKueueRules},
				metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: multiKueueServiceAccount + "-crb"},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: kueueNamespace, Name: multiKueueServiceAccount}},
			}, metav1.CreateOptions{})
			return err
		},
	}
	for _, create := range creates {
		if err := create(); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("MultiKueue's ServiceAccount on the worker: %w", err)
		}
	}
	token, err := ServiceAccountToken(ctx, cs, kueueNamespace, multiKueueServiceAccount)
	if err != nil {
		return nil, err
	}
	// The administrator's kubeconfig names the API server and its CA; only the user changes.
	admin, err := clientcmd.Load(c.kubeconfig)
	if err != nil {
		return nil, err
	}
	kc := clientcmdapi.NewConfig()
	for name, cl := range admin.Clusters {
		kc.Clusters[name] = &clientcmdapi.Cluster{Server: cl.Server, CertificateAuthorityData: cl.CertificateAuthorityData}
		kc.Contexts[MultiKueueWorker] = &clientcmdapi.Context{Cluster: name, AuthInfo: multiKueueServiceAccount}
	}
	if len(kc.Clusters) != 1 {
		return nil, fmt.Errorf("the worker's kubeconfig names %d clusters, want 1", len(kc.Clusters))
	}
	kc.AuthInfos[multiKueueServiceAccount] = &clientcmdapi.AuthInfo{Token: token}
	kc.CurrentContext = MultiKueueWorker
	return clientcmd.Write(*kc)
}

// CreateNamespace creates namespace ns on both clusters with the LocalQueue KueueLocalQueue in each (MultiKueue
// creates a TrainJob's copy in the namespace of the same name, in the LocalQueue of the same name), and waits
// until the manager's LocalQueue is Active: only then does Kueue's webhook know that its ClusterQueue
// dispatches, and default spec.managedBy of a TrainJob created in it to MultiKueue.
func (m *MultiKueue) CreateNamespace(ctx context.Context, ns string) error {
	for _, c := range []*Cluster{m.Manager, m.Worker} {
		if _, err := c.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
			metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		if err := c.CreateLocalQueue(ctx, ns); err != nil {
			return err
		}
	}
	client, err := dynamic.NewForConfig(m.Manager.Config)
	if err != nil {
		return err
	}
	return waitAll(ctx, m.Manager.procs, []check{{"LocalQueue " + ns + "/" + KueueLocalQueue + " Active", func(ctx context.Context) (bool, error) {
		u, err := client.Resource(m.Manager.kueueGVR("localqueues")).Namespace(ns).Get(ctx, KueueLocalQueue, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return activeCondition(u)
	}}})
}

// Stop stops both clusters at the same time. It is safe to call more than once, and on a MultiKueue whose
// clusters did not all start.
func (m *MultiKueue) Stop() error {
	var errs [2]error
	var wg sync.WaitGroup
	for i, c := range []*Cluster{m.Manager, m.Worker} {
		if c != nil {
			wg.Go(func() { errs[i] = c.Stop() })
		}
	}
	wg.Wait()
	return errors.Join(errs[:]...)
}

// DumpLogs writes the last n lines of every component's log of both clusters to w.
func (m *MultiKueue) DumpLogs(w io.Writer, n int) {
	for _, c := range []struct {
		name string
		c    *Cluster
	}{{"management cluster", m.Manager}, {"worker cluster " + MultiKueueWorker, m.Worker}} {
		if c.c != nil {
			fmt.Fprintf(w, "=== %s ===\n", c.name)
			c.c.DumpLogs(w, n)
		}
	}
}
