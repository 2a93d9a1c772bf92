package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// The real node's network. The node (containerd, the kubelet, kube-proxy, the pods' bridge) lives in a network
// namespace the cluster creates, joined to this machine's namespace by one veth pair and nothing else: it has
// no default route, so pods reach only each other, their Services, the API server and the resolver — never
// the machine's real interfaces — and forwarding is turned on inside it only. Each cluster takes the first free
// index n, which names the namespace and its addresses:
//
//	10.251.n.1/30  this machine's end of the pair: the API server (through a forwarder) and the resolver
//	10.251.n.2/30  the node's end: the node's InternalIP, where the API server reaches the kubelet
//	10.250.n.0/24  the pods (bridge cni0, gateway 10.250.n.1); this machine routes it to the node
const maxRealNodes = 64

// nodeNetwork is one real node's namespace and addresses.
type nodeNetwork struct {
	index   int
	netns   string // name, under /run/netns
	hostEnd string // the veth in this machine's namespace
	hostIP  net.IP
	nodeIP  net.IP
	podCIDR string
	podGW   net.IP

	listeners []io.Closer // the forwarder and the resolver on hostIP
	wg        sync.WaitGroup
}

func (n *nodeNetwork) netnsPath() string { return filepath.Join("/run/netns", n.netns) }

// netName is the name of the pods' CNI network; libcni keeps its cache in /var/lib/cni/results/<netName>-*.
func (n *nodeNetwork) netName() string { return n.netns }

func nodeNetworkAt(index int) *nodeNetwork {
	return &nodeNetwork{
		index:   index,
		netns:   "trainjob-node-" + strconv.Itoa(index),
		hostEnd: "tjnode" + strconv.Itoa(index),
		hostIP:  net.IPv4(10, 251, byte(index), 1).To4(),
		nodeIP:  net.IPv4(10, 251, byte(index), 2).To4(),
		podCIDR: fmt.Sprintf("10.250.%d.0/24", index),
		podGW:   net.IPv4(10, 250, byte(index), 1).To4(),
	}
}

// createNodeNetwork claims the first free index (`ip netns add` fails when the name exists, so two clusters
// never share one) and wires the namespace up.
func createNodeNetwork(ctx context.Context) (*nodeNetwork, error) {
	for i := range maxRealNodes {
		n := nodeNetworkAt(i)
		if err := ipCmd(ctx, "netns", "add", n.netns); err != nil {
			if strings.Contains(err.Error(), "File exists") {
				continue
			}
			return nil, err
		}
		if err := n.wire(ctx); err != nil {
			return nil, errors.Join(err, n.remove())
		}
		return n, nil
	}
	return nil, fmt.Errorf("no free real-node network: %d namespaces trainjob-node-* exist (`ip netns list`)", maxRealNodes)
}

func (n *nodeNetwork) wire(ctx context.Context) error {
	nodeEnd := "eth0"
	steps := [][]string{
		{"link", "add", n.hostEnd, "type", "veth", "peer", "name", nodeEnd, "netns", n.netns},
		{"addr", "add", n.hostIP.String() + "/30", "dev", n.hostEnd},
		{"link", "set", n.hostEnd, "up"},
		{"-n", n.netns, "link", "set", "lo", "up"},
		{"-n", n.netns, "addr", "add", n.nodeIP.String() + "/30", "dev", nodeEnd},
		{"-n", n.netns, "link", "set", nodeEnd, "up"},
		{"route", "add", n.podCIDR, "via", n.nodeIP.String(), "dev", n.hostEnd},
	}
	for _, args := range steps {
		if err := ipCmd(ctx, args...); err != nil {
			return err
		}
	}
	// Forwarding between the pods' bridge and the veth, inside the namespace only.
	return runIn(ctx, n.netnsPath(), "sysctl", "-q", "-w", "net.ipv4.ip_forward=1")
}

// remove closes the listeners and deletes the veth pair (and with it the route) and the namespace; what the
// namespace held (the bridge, the pods' veths, kube-proxy's rules) goes with it once no process is left in it.
func (n *nodeNetwork) remove() error {
	for _, l := range n.listeners {
		_ = l.Close()
	}
	n.wg.Wait()
	ctx := context.Background()
	var errs []error
	if err := ipCmd(ctx, "link", "delete", n.hostEnd); err != nil && !strings.Contains(err.Error(), "Cannot find device") {
		errs = append(errs, err)
	}
	if err := ipCmd(ctx, "netns", "delete", n.netns); err != nil && !strings.Contains(err.Error(), "No such file") {
		errs = append(errs, err)
	}
	results, _ := filepath.Glob(filepath.Join("/var/lib/cni/results", n.netName()+"-*"))
	for _, r := range results {
		errs = append(errs, os.Remove(r))
	}
	if err := os.Remove(filepath.Join(ownersDir, strconv.Itoa(n.index))); err != nil && !os.IsNotExist(err) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// forwardAPIServer accepts connections on the node's side of this machine (hostIP, at the API server's port)
// and passes them to the API server on loopback: the kubelet, kube-proxy and, through the `kubernetes`
// Service, the pods reach it there, while it keeps listening on loopback only.
func (n *nodeNetwork) forwardAPIServer(port string) error {
	l, err := net.Listen("tcp", net.JoinHostPort(n.hostIP.String(), port))
	if err != nil {
		return fmt.Errorf("API server forwarder: %w", err)
	}
	n.listeners = append(n.listeners, l)
	target := net.JoinHostPort("127.0.0.1", port)
	n.wg.Go(func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			// A connection ends when either side closes it: the API server's side closes when it stops.
			go func() {
				defer in.Close()
				out, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer out.Close()
				done := make(chan struct{}, 2)
				go func() { _, _ = io.Copy(out, in); done <- struct{}{} }()
				go func() { _, _ = io.Copy(in, out); done <- struct{}{} }()
				<-done
			}()
		}
	})
	return nil
}

func ipCmd(ctx context.Context, args ...string) error {
	return runIn(ctx, "", "ip", args...)
}

// runIn runs a short command in the network namespace netns (this process's when empty).
func runIn(ctx context.Context, netns, name string, args ...string) error {
	binary, argv := inNetns(netns, name, args...)
	cmd := exec.CommandContext(ctx, binary, argv...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out.Bytes()))
	}
	return nil
}
