package cluster

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"
)

// extendedResourceToleration is the admission plugin that GPU clusters run (GKE and AKS enable it; NVIDIA's GPU
// operator relies on it): a pod that requests an extended resource, such as nvidia.com/gpu, gets a toleration of
// the taint of the same key, so GPU pods land on the tainted GPU nodes without a toleration of their own, and
// other pods still do not.
const extendedResourceToleration = "ExtendedResourceToleration"

// startAPIServer starts etcd and kube-apiserver through envtest, installs the CRDs and waits until they are
// established, and writes the administrator's kubeconfig.
func (c *Cluster) startAPIServer(ctx context.Context) error {
	etcd, err := c.withDeathSignal(filepath.Join(c.opts.ToolsDir, "etcd"))
	if err != nil {
		return err
	}
	apiserver, err := c.withDeathSignal(filepath.Join(c.opts.ToolsDir, "kube-apiserver"))
	if err != nil {
		return err
	}
	etcdLog, err := c.openLog("etcd")
	if err != nil {
		return err
	}
	defer etcdLog.Close()
	apiLog, err := c.openLog("kube-apiserver")
	if err != nil {
		return err
	}
	defer apiLog.Close()

	certDir, dataDir := filepath.Join(c.Dir, "apiserver"), filepath.Join(c.Dir, "etcd")
	for _, d := range []string{certDir, dataDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	// The API server's and etcd's client ports from FreePort rather than envtest's picks from the ephemeral
	// range, which an outgoing connection of any process could take before the program binds it (the API
	// server takes seconds to).
	ports, err := FreePorts(2)
	if err != nil {
		return err
	}
	apiPort, etcdPort := ports[0], ports[1]
	// StartTimeout: envtest gives the API server 20 s to answer; under load 25-30 on 2 cores it took longer five
	// times in a row, and every test of test/integration/cli that started then failed.
	api := &envtest.APIServer{Path: apiserver, CertDir: certDir, Out: apiLog, Err: apiLog, StartTimeout: 2 * time.Minute}
	api.SecureServing.Address, api.SecureServing.Port = "127.0.0.1", strconv.Itoa(apiPort)
	// KWOK's nodes carry their name as Hostname address too, which does not resolve: reach them by IP.
	api.Configure().Set("kubelet-preferred-address-types", "InternalIP")
	if c.opts.RealNode {
		if err := c.prepareRealNode(ctx, api, certDir); err != nil {
			return err
		}
	}
	if c.opts.Kueue {
		if err := prepareAggregation(api, certDir); err != nil {
			return err
		}
	}
	admission := []string{extendedResourceToleration}
	for name, value := range c.opts.APIServerFlags {
		if name == "enable-admission-plugins" {
			admission = append(admission, value)
			continue
		}
		api.Configure().Set(name, value)
	}
	api.Configure().Set("enable-admission-plugins", strings.Join(admission, ","))

	var crds []*apiextensionsv1.CustomResourceDefinition
	if c.Profile == ProfileFull {
		crd, err := kwokLogsCRD()
		if err != nil {
			return err
		}
		crds = append(crds, crd)
	}
	c.env = &envtest.Environment{
		ControlPlane: envtest.ControlPlane{
			APIServer: api,
			Etcd: &envtest.Etcd{Path: etcd, DataDir: dataDir, Out: etcdLog, Err: etcdLog,
				URL: &url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(etcdPort))}},
		},
		CRDDirectoryPaths:     c.opts.CRDDirs,
		CRDs:                  crds,
		ErrorIfCRDPathMissing: true,
		// envtest waits 10 s for the CRDs to be served; on a loaded 2-core machine the API server took 20 s to
		// serve the trainer group, and the cluster failed to start.
		CRDInstallOptions:     envtest.CRDInstallOptions{MaxTime: 2 * time.Minute},
		BinaryAssetsDirectory: c.opts.ToolsDir,
	}
	cfg, err := c.env.Start()
	if err != nil {
		return fmt.Errorf("envtest: %w", err)
	}
	c.Config = cfg
	c.kubeconfig = c.env.KubeConfig
	c.KubeconfigPath = filepath.Join(c.Dir, "kubeconfig")
	if err := c.WriteKubeconfig(c.KubeconfigPath); err != nil {
		return err
	}
	if c.client, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	return c.warmUpCRDs(ctx)
}

// warmUpCRDs lists every installed custom resource once, all at the same time. The API server answers the
// first request for each custom resource about a second late; paid here in parallel, no test pays it again.
func (c *Cluster) warmUpCRDs(ctx context.Context) error {
	client, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	var g errgroup.Group
	for _, crd := range c.env.CRDs {
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			gvr := schema.GroupVersionResource{Group: crd.Spec.Group, Version: v.Name, Resource: crd.Spec.Names.Plural}
			g.Go(func() error {
				if _, err := client.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
					return fmt.Errorf("list %s: %w", gvr, err)
				}
				return nil
			})
		}
	}
	return g.Wait()
}

// kwokLogsCRD is KWOK's Logs CRD: a Logs object tells KWOK which files hold a pod's container logs.
func kwokLogsCRD() (*apiextensionsv1.CustomResourceDefinition, error) {
	data, err := manifests.ReadFile("manifests/kwok.x-k8s.io_logs.yaml")
	if err != nil {
		return nil, err
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		return nil, fmt.Errorf("kwok Logs CRD: %w", err)
	}
	return crd, nil
}

// RestartAPIServer stops kube-apiserver (SIGTERM: it drains and exits, as in an upgrade), keeps it down for
// down, and starts it again with the same flags, certificates, port and etcd; it returns once it is healthy.
// Clients keep working afterwards: the serving and client CAs are kept.
func (c *Cluster) RestartAPIServer(ctx context.Context, down time.Duration) error {
	api := c.env.ControlPlane.APIServer
	return c.restart(ctx, "kube-apiserver", down, api.Stop, func(log io.Writer) error {
		api.Out, api.Err = log, log
		return api.Start()
	})
}

// RestartEtcd stops etcd, keeps it down for down while kube-apiserver runs on without its storage, and starts
// it again on the same data and address; it returns once etcd is healthy (the API server reconnects by itself).
func (c *Cluster) RestartEtcd(ctx context.Context, down time.Duration) error {
	etcd := c.env.ControlPlane.Etcd
	return c.restart(ctx, "etcd", down, etcd.Stop, func(log io.Writer) error {
		etcd.Out, etcd.Err = log, log
		return etcd.Start()
	})
}

// restart stops a component, waits out the outage and starts it again, its output appended to its log.
func (c *Cluster) restart(ctx context.Context, name string, down time.Duration, stop func() error, start func(io.Writer) error) error {
	// A component that does not finish its shutdown in time is killed by envtest, which then reports it: it
	// is down either way, as the fault asks.
	stopErr := stop()
	outage := time.NewTimer(down)
	defer outage.Stop()
	select {
	case <-ctx.Done():
	case <-outage.C:
	}
	// Started again even when ctx ended, so that the cluster can still be stopped cleanly.
	log, err := os.OpenFile(filepath.Join(c.LogDir, name+".log"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	defer log.Close() // the process has its own copy
	if err := start(log); err != nil {
		return fmt.Errorf("start %s again: %w (its stop: %v)", name, err, stopErr)
	}
	return ctx.Err()
}
