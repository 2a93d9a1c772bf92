package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// The queueing objects of a cluster started with Options.Kueue: one ResourceFlavor for the GPU nodes and one
// ClusterQueue over it; CreateLocalQueue adds the LocalQueue KueueLocalQueue to a namespace. Beside them, for
// topology-aware scheduling (TAS): the Topology KueueTopology of the GPU nodes' block, rack and host labels, a
// ResourceFlavor that uses it and a ClusterQueue over it with every GPU of the cluster, fed by the LocalQueue
// KueueTASLocalQueue. The two ClusterQueues share the GPU nodes; TAS counts the other's pods as usage it does
// not manage.
const (
	KueueResourceFlavor = "gpu-node"
	KueueClusterQueue   = "gpu-cq"
	KueueLocalQueue     = "gpu"

	KueueTopology          = "gpu-topology"
	KueueTASResourceFlavor = "gpu-node-tas"
	KueueTASClusterQueue   = "gpu-tas-cq"
	KueueTASLocalQueue     = "gpu-tas"
	// KueueGPUQuota is the ClusterQueue's nominal quota of nvidia.com/gpu.
	KueueGPUQuota = 16
	// kueueNamespace is where Kueue keeps its own objects (MultiKueue's kubeconfig Secrets, for one).
	kueueNamespace = "kueue-system"
)

// KueueGroupVersion is the Kueue API the cluster's objects are written in.
var KueueGroupVersion = schema.GroupVersion{Group: "kueue.x-k8s.io", Version: "v1beta2"}

// kueueManifests is the folder of Kueue's CRDs (crd/) and webhook configurations (webhooks.yaml), which
// `make tools` copies from Kueue's module next to its binary.
func kueueManifests(toolsDir string) string { return filepath.Join(toolsDir, "kueue-manifests") }

// kueueWebhookGroups are the API groups whose Kueue webhooks the cluster installs: Kueue's own objects and
// the two integrations it enables. The others (pods, Deployments, batch Jobs, …) would intercept objects of
// frameworks that are off here.
var kueueWebhookGroups = []string{"kueue.x-k8s.io", "trainer.kubeflow.org", "jobset.x-k8s.io"}

// startKueue installs Kueue's webhook configurations, pointing at a local port with a fresh CA, and starts Kueue
// with the TrainJob and JobSet integrations. It returns the process and the webhook server's address.
func (c *Cluster) startKueue(ctx context.Context, configDir string) (*process, string, error) {
	if _, err := c.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kueueNamespace}},
		metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, "", err
	}
	mutating, validating, err := readWebhooks(filepath.Join(kueueManifests(c.opts.ToolsDir), "webhooks.yaml"), "Kueue")
	if err != nil {
		return nil, "", err
	}
	// The port from FreePort, as the JobSet controller's (startJobSet says why).
	port, err := FreePort()
	if err != nil {
		return nil, "", err
	}
	c.kueueWebhooks = &envtest.WebhookInstallOptions{LocalServingHost: "127.0.0.1", LocalServingPort: port}
	for _, wc := range mutating {
		wc.Name = "kueue-" + wc.Name
		wc.Webhooks = slices.DeleteFunc(wc.Webhooks, func(w admissionv1.MutatingWebhook) bool { return !inGroups(w.Rules, kueueWebhookGroups) })
		c.kueueWebhooks.MutatingWebhooks = append(c.kueueWebhooks.MutatingWebhooks, wc)
	}
	for _, wc := range validating {
		wc.Name = "kueue-" + wc.Name
		wc.Webhooks = slices.DeleteFunc(wc.Webhooks, func(w admissionv1.ValidatingWebhook) bool { return !inGroups(w.Rules, kueueWebhookGroups) })
		c.kueueWebhooks.ValidatingWebhooks = append(c.kueueWebhooks.ValidatingWebhooks, wc)
	}
	if err := c.kueueWebhooks.PrepWithoutInstalling(); err != nil {
		return nil, "", fmt.Errorf("Kueue webhooks: %w", err)
	}
	if err := c.kueueWebhooks.Install(c.Config); err != nil {
		return nil, "", fmt.Errorf("install Kueue webhooks: %w", err)
	}
	healthPort, err := FreePort()
	if err != nil {
		return nil, "", err
	}
	c.kueueHealthPort = healthPort
	visibility, err := c.newKueueVisibility(ctx, filepath.Join(configDir, "kueue-visibility"))
	if err != nil {
		return nil, "", fmt.Errorf("Kueue's visibility API: %w", err)
	}

	configPath := filepath.Join(configDir, "kueue.yaml")
	// The visibility API is on (kueueVisibility says how the API server reaches it). MultiKueue is on, as by
	// default since Kueue v0.9; only a management cluster's ClusterQueue (StartMultiKueue) has its admission
	// check, so only there does it dispatch.
	// TASReplaceNodeOnNodeTaints is off: in v0.17.0 it judges a node's taints by the Workload's pod templates alone,
	// not the ResourceFlavor's tolerations (kubernetes-sigs/kueue#11152), so between a TAS admission and the bind
	// it takes every GPU node (tainted nvidia.com/gpu, tolerated through the flavor) for failed, fails the pods
	// pinned to it and evicts the Workload: "no replacement for unhealthy node(s)". Kueue's own fix is later than
	// the one version served here.
	config := fmt.Appendf(nil, `apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: %s
leaderElection: {leaderElect: false}
internalCertManagement: {enable: false}
webhook: {host: 127.0.0.1, port: %d, certDir: %q}
metrics: {bindAddress: "0"}
health: {healthProbeBindAddress: "127.0.0.1:%d"}
clientConnection: {qps: 200, burst: 400}
visibilityServer: {bindAddress: %q, bindPort: %d}
featureGates: {VisibilityOnDemand: true, MultiKueue: true, TASReplaceNodeOnNodeTaints: false}
integrations:
  frameworks: ["trainer.kubeflow.org/trainjob", "jobset.x-k8s.io/jobset"]
`, kueueNamespace, c.kueueWebhooks.LocalServingPort, c.kueueWebhooks.LocalServingCertDir, healthPort, visibility.ip, visibility.port)
	if err := os.WriteFile(configPath, config, 0o644); err != nil {
		return nil, "", err
	}
	root := filepath.Join(configDir, "kueue-root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, "", err
	}
	// --kubeconfig, not $KUBECONFIG alone: the visibility server reads the flag to delegate authentication and
	// authorization to the API server.
	binary, args, err := kueueCommand(filepath.Join(c.opts.ToolsDir, "kueue"), root, c.kueueWebhooks.LocalServingCertDir, visibility.certDir,
		"--config="+configPath, "--kubeconfig="+c.KubeconfigPath, "--zap-log-level=2")
	if err != nil {
		return nil, "", err
	}
	p, err := c.startProcess("kueue", binary, args, []string{"KUBECONFIG=" + c.KubeconfigPath})
	if err != nil {
		return nil, "", err
	}
	return p, net.JoinHostPort("127.0.0.1", strconv.Itoa(c.kueueWebhooks.LocalServingPort)), nil
}

// kueueReady are the checks of a started Kueue: it is ready, serves its webhooks, its ResourceFlavor and
// ClusterQueue are created through them (which proves they answer), the API server reaches its visibility API,
// and the ClusterQueue is Active. On a
// MultiKueue management cluster the ClusterQueue waits for its admission check, which waits for the worker:
// StartMultiKueue checks it once the two are connected.
func (c *Cluster) kueueReady(addr string) []check {
	checks := []check{
		{"Kueue /readyz", func(ctx context.Context) (bool, error) {
			return httpOK(ctx, fmt.Sprintf("http://127.0.0.1:%d/readyz", c.kueueHealthPort))
		}},
		{"Kueue webhook server at " + addr, func(ctx context.Context) (bool, error) { return tlsServing(ctx, addr) }},
		{"Kueue ResourceFlavor and ClusterQueue created", func(ctx context.Context) (bool, error) {
			err := c.createKueueQueues(ctx)
			return err == nil, err
		}},
		{"Kueue's visibility API available", c.kueueVisibilityAvailable},
	}
	if !c.opts.multiKueueManager {
		checks = append(checks, check{"ClusterQueue " + KueueClusterQueue + " Active", c.kueueQueueActive},
			check{"ClusterQueue " + KueueTASClusterQueue + " Active", c.kueueActive("clusterqueues", KueueTASClusterQueue)})
	}
	return checks
}

// startKueueAlone starts Kueue next to the api profile's API server (a MultiKueue management cluster, whose
// TrainJobs run elsewhere) and waits until it is ready.
func (c *Cluster) startKueueAlone(ctx context.Context) error {
	configDir := filepath.Join(c.Dir, "config")
	if err := os.MkdirAll(configDir, 0o755); err != nil {
		return err
	}
	p, addr, err := c.startKueue(ctx, configDir)
	if err != nil {
		return err
	}
	return waitAll(ctx, []*process{p}, c.kueueReady(addr))
}

// kueueCommand returns how to run Kueue. Without its internal certificate management Kueue reads two serving
// certificates from fixed folders and exits when one is missing: its metrics certificate (even with metrics off)
// from /etc/kueue/metrics/certs, and its visibility server's from /visibility. So it runs in a mount namespace
// of its own, changed into root (an empty folder, where a tmpfs goes) that holds every top-level folder of the
// machine but /etc, bound; an /etc with just the metrics folder, linked to certDir; and /visibility, linked to
// visibilityDir. The machine's folders are left alone.
func kueueCommand(kueue, root, certDir, visibilityDir string, args ...string) (string, []string, error) {
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		return "", nil, fmt.Errorf("unshare (util-linux) is needed to give Kueue its metrics certificate folder: %w", err)
	}
	ns := []string{"--mount", "--propagation=private"}
	if os.Geteuid() != 0 {
		ns = append([]string{"--user", "--map-root-user"}, ns...)
	}
	script := `root=$1 metrics=$2 visibility=$3 && shift 3 && mount -t tmpfs kueue-root "$root" || exit
for e in /*; do
	if [ "$e" = /etc ]; then continue; fi
	if [ -L "$e" ]; then ln -s "$(readlink "$e")" "$root$e" || exit
	elif [ -d "$e" ]; then mkdir "$root$e" && mount --rbind "$e" "$root$e" || exit
	fi
done
mkdir -p "$root/etc/kueue/metrics" && ln -s "$metrics" "$root/etc/kueue/metrics/certs" && ln -s "$visibility" "$root/visibility" &&
	exec chroot "$root" "$@"`
	return unshare, slices.Concat(ns, []string{"--", "sh", "-c", script, "kueue", root, certDir, visibilityDir, kueue}, args), nil
}

// inGroups reports whether every rule of a webhook is about one of groups.
func inGroups(rules []admissionv1.RuleWithOperations, groups []string) bool {
	for _, r := range rules {
		for _, g := range r.APIGroups {
			if !slices.Contains(groups, g) {
				return false
			}
		}
	}
	return len(rules) > 0
}

func (c *Cluster) kueueGVR(resource string) schema.GroupVersionResource {
	return KueueGroupVersion.WithResource(resource)
}

// kueueObject returns a Kueue object of kind with name, namespace and spec.
func kueueObject(kind, namespace, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetAPIVersion(KueueGroupVersion.String())
	u.SetKind(kind)
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

// createKueueQueues creates the ResourceFlavor of the GPU nodes and the ClusterQueue over it, and where the
// cluster has nodes the Topology, the TAS ResourceFlavor and its ClusterQueue. The flavors' node labels and
// toleration are the GPU nodes', so Kueue's admission writes them into each TrainJob's runtime patch.
// Higher-priority workloads preempt lower-priority ones within a ClusterQueue.
func (c *Cluster) createKueueQueues(ctx context.Context) error {
	client, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	flavorSpec := func(topology string) map[string]any {
		spec := map[string]any{
			"nodeLabels": map[string]any{GPUPresentLabel: "true"},
			"tolerations": []any{map[string]any{
				"key": GPUTaintKey, "operator": "Equal", "value": "present", "effect": "NoSchedule",
			}},
		}
		if topology != "" {
			spec["topologyName"] = topology
		}
		return spec
	}
	// Every resource a pod of a shipped runtime may request is covered; GPUs are what the quota is about.
	queueSpec := func(flavor string, gpus int) map[string]any {
		return map[string]any{
			"namespaceSelector": map[string]any{},
			"preemption":        map[string]any{"withinClusterQueue": "LowerPriority"},
			"resourceGroups": []any{map[string]any{
				"coveredResources": []any{"cpu", "memory", string(GPUResource)},
				"flavors": []any{map[string]any{
					"name": flavor,
					"resources": []any{
						map[string]any{"name": "cpu", "nominalQuota": strconv.Itoa(max(c.opts.GPUNodes, 0) * 96)},
						map[string]any{"name": "memory", "nominalQuota": strconv.Itoa(max(c.opts.GPUNodes, 0)) + "Ti"},
						map[string]any{"name": string(GPUResource), "nominalQuota": strconv.Itoa(gpus)},
					},
				}},
			}},
		}
	}
	queue := queueSpec(KueueResourceFlavor, KueueGPUQuota)
	if c.opts.multiKueueManager {
		// Every Workload the queue admits goes through MultiKueue's check, which dispatches it to the worker.
		queue["admissionChecksStrategy"] = map[string]any{"admissionChecks": []any{map[string]any{"name": MultiKueueAdmissionCheck}}}
	}
	type object struct {
		resource string
		obj      *unstructured.Unstructured
	}
	objects := []object{
		{"resourceflavors", kueueObject("ResourceFlavor", "", KueueResourceFlavor, flavorSpec(""))},
		{"clusterqueues", kueueObject("ClusterQueue", "", KueueClusterQueue, queue)},
	}
	if !c.opts.multiKueueManager {
		// The host level is the lowest, as Kueue asks for node taints to be respected.
		levels := []any{}
		for _, l := range TopologyLevels() {
			levels = append(levels, map[string]any{"nodeLabel": l})
		}
		objects = append(objects,
			object{"topologies", kueueObject("Topology", "", KueueTopology, map[string]any{"levels": levels})},
			object{"resourceflavors", kueueObject("ResourceFlavor", "", KueueTASResourceFlavor, flavorSpec(KueueTopology))},
			object{"clusterqueues", kueueObject("ClusterQueue", "", KueueTASClusterQueue,
				queueSpec(KueueTASResourceFlavor, max(c.opts.GPUNodes, 0)*c.opts.GPUsPerNode))})
	}
	for _, o := range objects {
		if _, err := client.Resource(c.kueueGVR(o.resource)).Create(ctx, o.obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create %s %s: %w", o.obj.GetKind(), o.obj.GetName(), err)
		}
	}
	return nil
}

// kueueQueueActive reports whether the ClusterQueue is Active: Kueue has seen it and its flavor (and on a
// MultiKueue management cluster its admission check).
func (c *Cluster) kueueQueueActive(ctx context.Context) (bool, error) {
	return c.kueueActive("clusterqueues", KueueClusterQueue)(ctx)
}

// kueueActive reports whether Kueue's cluster-scoped object resource/name has its Active condition True.
func (c *Cluster) kueueActive(resource, name string) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		client, err := dynamic.NewForConfig(c.Config)
		if err != nil {
			return false, err
		}
		u, err := client.Resource(c.kueueGVR(resource)).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return activeCondition(u)
	}
}

// activeCondition reports whether a Kueue object's Active condition is True, and what it says otherwise.
func activeCondition(u *unstructured.Unstructured) (bool, error) { return conditionTrue(u, "Active") }

// conditionTrue reports whether an object's condition of type typ is True, and what it says otherwise.
func conditionTrue(u *unstructured.Unstructured, typ string) (bool, error) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, cond := range conds {
		m, _ := cond.(map[string]any)
		if m["type"] == typ {
			if m["status"] == "True" {
				return true, nil
			}
			return false, fmt.Errorf("%s %s is not %s: %v: %v", u.GetKind(), u.GetName(), typ, m["reason"], m["message"])
		}
	}
	return false, fmt.Errorf("%s %s has no %s condition yet", u.GetKind(), u.GetName(), typ)
}

// CreateLocalQueue creates the LocalQueue KueueLocalQueue in namespace, feeding the cluster's ClusterQueue, and
// beside it KueueTASLocalQueue feeding the TAS ClusterQueue (not on a MultiKueue management cluster).
// It needs a cluster started with Options.Kueue.
func (c *Cluster) CreateLocalQueue(ctx context.Context, namespace string) error {
	if !c.opts.Kueue {
		return errors.New("the cluster runs no Kueue (Options.Kueue)")
	}
	client, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	queues := map[string]string{KueueLocalQueue: KueueClusterQueue}
	if !c.opts.multiKueueManager {
		queues[KueueTASLocalQueue] = KueueTASClusterQueue
	}
	for name, cq := range queues {
		lq := kueueObject("LocalQueue", namespace, name, map[string]any{"clusterQueue": cq})
		if _, err := client.Resource(c.kueueGVR("localqueues")).Namespace(namespace).Create(ctx, lq, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create LocalQueue %s/%s: %w", namespace, name, err)
		}
	}
	return nil
}
