package cluster

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/kubectl-trainjob/kubectl-trainjob/test/images"
)

const (
	// RealNodeName is the name of the real node.
	RealNodeName = "system-node-0"
	// RealNodeLabel is set to "true" on the real node: a pod that must run for real selects it.
	RealNodeLabel = "trainjob.dev/real-node"
	// RealNodeTaintKey taints the real node (value "true", effect NoSchedule), as a cluster taints the nodes it
	// dedicates to some pods: only a pod that tolerates it (and selects RealNodeLabel) lands there, and every
	// other pod stays on the simulated nodes, where no image needs pulling.
	RealNodeTaintKey = RealNodeLabel
	// PauseImage is the pause image of the real node's pod sandboxes, built from test/images/pause.
	PauseImage = "trainjob.local/pause:1"
	// serviceIP is the `kubernetes` Service's ClusterIP: the first address of envtest's 10.0.0.0/24.
	serviceIP = "10.0.0.1"
	// realNodeStartTimeout bounds how long the real node may take to register and become Ready.
	realNodeStartTimeout = 2 * time.Minute
)

// realNode is the kubelet node of a cluster: containerd, the kubelet and kube-proxy in a network namespace
// of their own (nodenet.go), with a resolver and a way to the API server on this machine's end of it.
type realNode struct {
	dir        string
	net        *nodeNetwork
	ca         *certificateAuthority
	caFile     string
	containerd *Containerd
	procs      []*process // kubelet, kube-proxy
}

// RealNodeSupported returns nil when this machine can run the real node, and otherwise one line saying why not.
func RealNodeSupported() error {
	if err := RealContainersSupported(); err != nil {
		return err
	}
	var missing []string
	for _, p := range []string{"ip", "iptables", "iptables-restore", "sysctl"} {
		if _, err := exec.LookPath(p); err != nil {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the real node needs %s on the PATH: run `make tools` (it installs Debian's iproute2, iptables and procps when run as root)", strings.Join(missing, ", "))
	}
	return nil
}

// prepareRealNode creates the node's network and the certificates the API server needs for it, and sets the
// API server's flags: before the API server starts, since it advertises the node-facing address.
func (c *Cluster) prepareRealNode(ctx context.Context, api *envtest.APIServer, certDir string) error {
	if err := RealNodeSupported(); err != nil {
		return err
	}
	dir := filepath.Join(c.Dir, "node")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	nn, err := createNodeNetwork(ctx)
	if err != nil {
		return err
	}
	node := &realNode{dir: dir, net: nn}
	c.node = node
	// Written first, so that a cluster whose process dies is cleaned up by the next Start.
	if err := writeOwner(nn.index, c.Dir); err != nil {
		return err
	}
	if node.ca, err = newCertificateAuthority("trainjob-local-cluster"); err != nil {
		return err
	}
	node.caFile = filepath.Join(certDir, "cluster-ca.crt")
	if err := os.WriteFile(node.caFile, node.ca.certPEM, 0o644); err != nil {
		return err
	}
	// The serving certificate names every address clients use: loopback (tests), the node-facing address
	// (kubelet, kube-proxy) and the `kubernetes` Service (pods). envtest keeps a certificate it finds.
	if err := node.ca.issue(filepath.Join(certDir, "apiserver.crt"), filepath.Join(certDir, "apiserver.key"),
		pkix.Name{CommonName: "kube-apiserver"}, x509.ExtKeyUsageServerAuth,
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc." + ClusterDomain},
		[]net.IP{net.IPv4(127, 0, 0, 1), nn.hostIP, net.ParseIP(serviceIP)}); err != nil {
		return err
	}
	// envtest writes the service account keys only with a certificate of its own.
	if err := writeSigningKey(filepath.Join(certDir, "sa-signer.crt"), filepath.Join(certDir, "sa-signer.key")); err != nil {
		return err
	}
	kubeletClientCert, kubeletClientKey := filepath.Join(certDir, "kubelet-client.crt"), filepath.Join(certDir, "kubelet-client.key")
	if err := node.ca.issue(kubeletClientCert, kubeletClientKey, pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
		x509.ExtKeyUsageClientAuth, nil, nil); err != nil {
		return err
	}
	api.SecureServing.CA = node.ca.certPEM
	flags := api.Configure()
	flags.Set("advertise-address", nn.hostIP.String())
	// Webhook Services (the operator's) are called at their endpoints' pod addresses, which this machine
	// routes to the node: no kube-proxy is needed on this side.
	flags.Set("enable-aggregator-routing", "true")
	flags.Set("kubelet-client-certificate", kubeletClientCert)
	flags.Set("kubelet-client-key", kubeletClientKey)
	// Real pods need their service account token mounted, which envtest's API server does not do.
	flags.Disable("disable-admission-plugins")
	return nil
}

// startRealNode starts the node's side once the control plane runs: the forwarder and the resolver on this
// machine's end, then containerd with the pause image and Options.RealNodeImages, kube-proxy and the kubelet.
func (c *Cluster) startRealNode(ctx context.Context) error {
	node := c.node
	nn := node.net
	if err := nn.forwardAPIServer(c.env.ControlPlane.APIServer.SecureServing.Port); err != nil {
		return err
	}
	if err := nn.serveDNS(c.client); err != nil {
		return err
	}
	kubeconfig, err := c.nodeKubeconfig()
	if err != nil {
		return err
	}

	cniBin := filepath.Join(c.opts.ToolsDir, "cni")
	cniConf := filepath.Join(node.dir, "cni")
	if err := writeCNIConfig(cniConf, nn, filepath.Join(node.dir, "ipam")); err != nil {
		return err
	}
	log, err := c.openLog("containerd")
	if err != nil {
		return err
	}
	node.containerd, err = startContainerd(ctx, filepath.Join(node.dir, "containerd"), log, containerdConfig{
		cri: true, sandboxImage: PauseImage, cniBinDir: cniBin, cniConfDir: cniConf, netns: nn.netnsPath(),
	})
	if err != nil {
		return err
	}
	pause := filepath.Join(node.dir, "pause.tar")
	if err := images.WriteArchive(images.Spec{Ref: PauseImage, Binary: filepath.Join(c.opts.ToolsDir, "pause")}, pause); err != nil {
		return err
	}
	for _, archive := range append([]string{pause}, c.opts.RealNodeImages...) {
		if err := node.containerd.Import(ctx, archive); err != nil {
			return err
		}
	}

	proxyConfig := filepath.Join(node.dir, "kube-proxy.yaml")
	if err := os.WriteFile(proxyConfig, kubeProxyConfig(kubeconfig, nn), 0o644); err != nil {
		return err
	}
	proxy, err := c.startNodeProcess("kube-proxy", "--config="+proxyConfig, "--v=2")
	if err != nil {
		return err
	}
	kubeletConfig := filepath.Join(node.dir, "kubelet.yaml")
	resolvConf := filepath.Join(node.dir, "resolv.conf")
	// The pods' resolv.conf gets the cluster's resolver and search path only, none of this machine's.
	if err := os.WriteFile(resolvConf, nil, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(kubeletConfig, kubeletConfigYAML(node, resolvConf), 0o644); err != nil {
		return err
	}
	kubelet, err := c.startNodeProcess("kubelet",
		"--config="+kubeletConfig,
		"--kubeconfig="+kubeconfig,
		"--root-dir="+filepath.Join(node.dir, "kubelet"),
		"--cert-dir="+filepath.Join(node.dir, "kubelet", "pki"),
		"--hostname-override="+RealNodeName,
		"--node-ip="+nn.nodeIP.String(),
		"--node-labels="+RealNodeLabel+"=true",
		"--register-with-taints="+RealNodeTaintKey+"=true:NoSchedule",
		"--volume-plugin-dir="+filepath.Join(node.dir, "kubelet", "volume-plugins"),
		"--v=2",
	)
	if err != nil {
		return err
	}
	return waitUntil(ctx, realNodeStartTimeout, "real node "+RealNodeName+" Ready", []*process{node.containerd.proc, proxy, kubelet}, c.realNodeReady)
}

// RealNodeToleration tolerates the taint of the real node.
func RealNodeToleration() corev1.Toleration {
	return corev1.Toleration{Key: RealNodeTaintKey, Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule}
}

// startNodeProcess starts a component of the real node inside its network namespace.
func (c *Cluster) startNodeProcess(name string, args ...string) (*process, error) {
	out, err := c.openLog(name)
	if err != nil {
		return nil, err
	}
	binary, argv := inNetns(c.node.net.netnsPath(), filepath.Join(c.opts.ToolsDir, name), args...)
	p, err := startLogged(out, name, binary, argv, nil)
	if err != nil {
		return nil, err
	}
	c.node.procs = append(c.node.procs, p)
	return p, nil
}

// nodeKubeconfig writes the administrator's kubeconfig with the API server at its node-facing address.
func (c *Cluster) nodeKubeconfig() (string, error) {
	cfg, err := clientcmd.Load(c.kubeconfig)
	if err != nil {
		return "", err
	}
	server := "https://" + net.JoinHostPort(c.node.net.hostIP.String(), c.env.ControlPlane.APIServer.SecureServing.Port)
	for _, cluster := range cfg.Clusters {
		cluster.Server = server
	}
	path := filepath.Join(c.node.dir, "kubeconfig")
	return path, clientcmd.WriteToFile(*cfg, path)
}

// writeCNIConfig writes the pods' network: a bridge in the node's namespace with addresses from the node's
// pod range (kept in ipamDir, inside the cluster's folder), and the pods' loopback.
func writeCNIConfig(dir string, nn *nodeNetwork, ipamDir string) error {
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       nn.netName(),
		"plugins": []any{map[string]any{
			"type":        "bridge",
			"bridge":      "cni0",
			"isGateway":   true,
			"ipMasq":      false,
			"hairpinMode": true,
			"ipam": map[string]any{
				"type":    "host-local",
				"dataDir": ipamDir,
				"ranges":  [][]map[string]string{{{"subnet": nn.podCIDR, "gateway": nn.podGW.String()}}},
				"routes":  []map[string]string{{"dst": "0.0.0.0/0"}},
			},
		}},
	}
	data, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "10-trainjob.conflist"), data, 0o644)
}

// kubeProxyConfig runs kube-proxy's iptables mode in the node's namespace, leaving alone the settings that
// are not per namespace (conntrack table size and timeouts).
func kubeProxyConfig(kubeconfig string, nn *nodeNetwork) []byte {
	return fmt.Appendf(nil, `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: %q}
hostnameOverride: %s
mode: iptables
clusterCIDR: %s
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
iptables: {localhostNodePorts: false}
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, kubeconfig, RealNodeName, nn.podCIDR)
}

// kubeletConfigYAML is the kubelet's configuration for this kind of machine: cgroup v1 controllers with the
// cgroupfs driver and no QoS cgroups, swap allowed, its API authenticated by the cluster's CA, no image
// garbage collection (the images were imported, they cannot be pulled again) and the cluster's resolver.
func kubeletConfigYAML(node *realNode, resolvConf string) []byte {
	return fmt.Appendf(nil, `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: unix://%s
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
cgroupsPerQOS: false
enforceNodeAllocatable: []
address: %s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: %q}
authorization: {mode: AlwaysAllow}
clusterDNS: [%s]
clusterDomain: %s
resolvConf: %q
podLogsDir: %q
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%%", imagefs.available: "1%%"}
serializeImagePulls: false
registerNode: true
`, node.containerd.Socket, node.net.nodeIP, node.caFile, node.net.hostIP, ClusterDomain, resolvConf, filepath.Join(node.dir, "pod-logs"))
}

// realNodeReady reports whether the real node is registered, Ready and free of the not-ready taint.
func (c *Cluster) realNodeReady(ctx context.Context) (bool, error) {
	node, err := c.client.CoreV1().Nodes().Get(ctx, RealNodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, fmt.Errorf("node %s is not registered yet", RealNodeName)
	}
	if err != nil {
		return false, err
	}
	if !nodeReady(node) {
		return false, fmt.Errorf("node %s is not Ready and schedulable yet: %v", RealNodeName, conditionMessages(node))
	}
	return true, nil
}

func conditionMessages(n *corev1.Node) []string {
	var out []string
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			out = append(out, fmt.Sprintf("%s=%s %s", c.Type, c.Status, c.Message))
		}
	}
	return out
}

// stop stops the kubelet and kube-proxy, kills every container, stops containerd, unmounts what the kubelet
// mounted, and removes the network namespace with everything in it.
func (node *realNode) stop() error {
	var errs []error
	for _, p := range slices.Backward(node.procs) {
		errs = append(errs, p.stop())
	}
	if node.containerd != nil {
		errs = append(errs, node.containerd.Stop())
	}
	errs = append(errs, unmountUnder(node.dir), node.net.remove())
	return errors.Join(errs...)
}

// ownersDir holds, for each real-node network n, a file n with "<pid> <cluster folder>" of the cluster that
// made it. It is outside the clusters' folders, which any process using this package removes once their
// owner died (older copies of it know nothing of real nodes).
const ownersDir = "/run/trainjob-nodes"

// writeOwner records that this process's cluster in dir owns network index.
func writeOwner(index int, dir string) error {
	if err := os.MkdirAll(ownersDir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(ownersDir, strconv.Itoa(index)), fmt.Appendf(nil, "%d %s", os.Getpid(), dir), 0o644)
}

// removeAbandonedNodes removes what the real node of every cluster whose process died left behind: its
// containerd's shims and containers, its mounts, its network namespace, its folder.
func removeAbandonedNodes() {
	owners, _ := filepath.Glob(filepath.Join(ownersDir, "*"))
	for _, owner := range owners {
		index, err := strconv.Atoi(filepath.Base(owner))
		if err != nil || index < 0 || index >= maxRealNodes {
			continue
		}
		data, err := os.ReadFile(owner)
		if err != nil {
			continue
		}
		pidText, dir, ok := strings.Cut(string(data), " ")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || alive(pid) || !strings.HasPrefix(filepath.Base(dir), workDirPrefix) {
			continue
		}
		nodeDir := filepath.Join(dir, "node")
		// The containers' processes name nothing of the folder: they are known by their containers' cgroups.
		tasks, _ := filepath.Glob(filepath.Join(nodeDir, "containerd", "state", "io.containerd.runtime.v2.task", "*", "*"))
		killProcessesUsing(nodeDir, tasks)
		_ = unmountUnder(nodeDir)
		_ = nodeNetworkAt(index).remove()
		_ = os.RemoveAll(dir)
	}
}

// killProcessesUsing kills every process whose command line names a path in dir (the shims of a containerd
// whose socket is there; they outlive containerd) or whose cgroup is that of one of the containers (the base
// names of tasks).
func killProcessesUsing(dir string, tasks []string) {
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		pid, err := strconv.Atoi(filepath.Base(p))
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join(p, "cmdline"))
		cgroup, _ := os.ReadFile(filepath.Join(p, "cgroup"))
		kill := strings.Contains(string(cmdline), dir)
		for _, task := range tasks {
			kill = kill || strings.Contains(string(cgroup), "/"+filepath.Base(task)+"\n")
		}
		if kill {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// RealNodeNetwork names the real node's network namespace and this machine's end of its veth pair; both are
// empty without a real node.
func (c *Cluster) RealNodeNetwork() (netns, link string) {
	if c.node == nil {
		return "", ""
	}
	return c.node.net.netns, c.node.net.hostEnd
}
