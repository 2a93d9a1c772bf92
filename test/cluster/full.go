package cluster

import (
	"context"
	"embed"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

//go:embed manifests
var manifests embed.FS

// componentStartTimeout bounds how long each component of the full profile may take to become ready.
const componentStartTimeout = 60 * time.Second

// kcmControllers are the kube-controller-manager controllers the simulation needs: Jobs create pods, pods and
// Jobs are garbage-collected with their owners, namespaces can be deleted, each namespace gets its default
// ServiceAccount, Services get endpoints, node-lifecycle lifts the not-ready taint that the API server puts
// on every new node (without it no pod is ever scheduled), Deployments (the operator's) get their pods, and
// pods get the ResourceClaims of their claim templates.
var kcmControllers = []string{
	"job-controller",
	"deployment-controller",
	"replicaset-controller",
	"garbage-collector-controller",
	"node-lifecycle-controller",
	"namespace-controller",
	"serviceaccount-controller",
	"endpoints-controller",
	"endpointslice-controller",
	// DRA: a pod's claims from ResourceClaimTemplates are created, and freed when it ends.
	"resourceclaim-controller",
}

// startFull starts the controllers, scheduler and KWOK, creates the fake nodes and waits until all are ready.
func (c *Cluster) startFull(ctx context.Context) error {
	ports, err := FreePorts(3)
	if err != nil {
		return err
	}
	kcmPort, schedulerPort, kwokPort := ports[0], ports[1], ports[2]
	configDir := filepath.Join(c.Dir, "config")
	if err := os.MkdirAll(configDir, 0o755); err != nil {
		return err
	}
	kubeconfig := "--kubeconfig=" + c.KubeconfigPath
	authn := []string{kubeconfig, "--authentication-kubeconfig=" + c.KubeconfigPath, "--authorization-kubeconfig=" + c.KubeconfigPath}
	tool := func(name string) string { return filepath.Join(c.opts.ToolsDir, name) }

	controllers, kcmExtra := kcmControllers, []string(nil)
	if c.node != nil {
		// Pods of the real node verify the API server with the CA in each namespace's kube-root-ca.crt.
		controllers = append(slices.Clip(controllers), "root-ca-certificate-publisher-controller")
		kcmExtra = []string{"--root-ca-file=" + c.node.caFile}
	}
	kcm, err := c.startProcess("kube-controller-manager", tool("kube-controller-manager"), slices.Concat(authn, kcmExtra, []string{
		"--controllers=" + strings.Join(controllers, ","),
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(kcmPort),
		"--cert-dir=" + filepath.Join(c.Dir, "kube-controller-manager"),
		"--kube-api-qps=200",
		"--kube-api-burst=400",
	}), nil)
	if err != nil {
		return err
	}

	schedulerConfig := filepath.Join(configDir, "kube-scheduler.yaml")
	if err := os.WriteFile(schedulerConfig, fmt.Appendf(nil, `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection: {kubeconfig: %q, qps: 200, burst: 400}
leaderElection: {leaderElect: false}
`, c.KubeconfigPath), 0o644); err != nil {
		return err
	}
	// The scheduler's client settings (the kubeconfig too) are in its configuration file.
	scheduler, err := c.startProcess("kube-scheduler", tool("kube-scheduler"), slices.Concat(authn[1:], []string{
		"--config=" + schedulerConfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(schedulerPort),
		"--cert-dir=" + filepath.Join(c.Dir, "kube-scheduler"),
	}), nil)
	if err != nil {
		return err
	}

	kwokConfigPath := filepath.Join(configDir, "kwok.yaml")
	kwokConfig, err := c.kwokConfig()
	if err != nil {
		return err
	}
	if err := os.WriteFile(kwokConfigPath, kwokConfig, 0o644); err != nil {
		return err
	}
	kwokAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(kwokPort))
	kwok, err := c.startProcess("kwok", tool("kwok"), []string{
		kubeconfig,
		"--config=" + kwokConfigPath,
		"--manage-nodes-with-annotation-selector=" + kwokNodeAnnotation + "=fake",
		"--server-address=" + kwokAddr,
		// The port every node reports as its kubelet's: the API server proxies `kubectl logs` there.
		"--node-port=" + strconv.Itoa(kwokPort),
		"--node-ip=127.0.0.1",
		"--cidr=10.244.0.0/16",
		"--enable-crds=Logs",
	}, nil)
	if err != nil {
		return err
	}

	jobset, webhookAddr, err := c.startJobSet(configDir)
	if err != nil {
		return err
	}

	var kueue *process
	var kueueAddr string
	if c.opts.Kueue {
		if kueue, kueueAddr, err = c.startKueue(ctx, configDir); err != nil {
			return err
		}
	}

	// The nodes go in while the components start; KWOK and node-lifecycle pick them up once ready.
	if err := c.createNodes(ctx); err != nil {
		return err
	}
	if err := c.createDRA(ctx); err != nil {
		return err
	}

	all := []*process{kcm, scheduler, kwok, jobset}
	checks := []check{
		{"kube-controller-manager /healthz", healthz("https", kcmPort)},
		{"kube-scheduler /healthz", healthz("https", schedulerPort)},
		{"kwok /healthz", healthz("http", kwokPort)},
		{"JobSet webhook server at " + webhookAddr, func(ctx context.Context) (bool, error) { return tlsServing(ctx, webhookAddr) }},
		{"JobSet webhooks to admit a JobSet", c.jobSetAdmitted},
		{"nodes Ready and schedulable", c.nodesReady},
	}
	if kueue != nil {
		all = append(all, kueue)
		checks = append(checks, c.kueueReady(kueueAddr)...)
	}
	if err := waitAll(ctx, all, checks); err != nil {
		return err
	}
	if c.node != nil {
		return c.startRealNode(ctx)
	}
	return nil
}

// check is a condition a component must reach before Start returns.
type check struct {
	what string
	cond func(context.Context) (bool, error)
}

// waitAll waits for each check in turn, each within componentStartTimeout, failing at once if one of procs exits.
func waitAll(ctx context.Context, procs []*process, checks []check) error {
	for _, check := range checks {
		if err := waitUntil(ctx, componentStartTimeout, check.what, procs, check.cond); err != nil {
			return err
		}
	}
	return nil
}

func healthz(scheme string, port int) func(context.Context) (bool, error) {
	url := fmt.Sprintf("%s://127.0.0.1:%d/healthz", scheme, port)
	return func(ctx context.Context) (bool, error) { return httpOK(ctx, url) }
}

// createNodes creates the fake nodes, status included: KWOK keeps the capacity a node is created with.
func (c *Cluster) createNodes(ctx context.Context) error {
	for _, node := range fakeNodes(c.opts) {
		if _, err := c.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create node %s: %w", node.Name, err)
		}
	}
	return nil
}

// nodesReady reports whether every fake node is Ready and free of the not-ready taint.
func (c *Cluster) nodesReady(ctx context.Context) (bool, error) {
	want := fakeNodes(c.opts)
	nodes, err := c.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	ready := map[string]bool{}
	for _, n := range nodes.Items {
		ready[n.Name] = nodeReady(&n)
	}
	for _, n := range want {
		if !ready[n.Name] {
			return false, fmt.Errorf("node %s is not Ready and schedulable yet", n.Name)
		}
	}
	return true, nil
}

func nodeReady(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable {
			return false
		}
	}
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}
