package kueue

import (
	"context"
	"fmt"
	"net"
	"path"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
)

// MultiKueue dispatches a TrainJob from a management cluster to one of its worker clusters: Kueue's webhook
// sets the TrainJob's spec.managedBy to kueue.x-k8s.io/multikueue (so that no Trainer controller of the
// management cluster runs it), Kueue creates a copy on the worker it picks, names that worker in the
// Workload's status.clusterName, copies the copy's status back, and deletes the copy, and with it its pods
// and their logs, once it has finished (Kueue v0.17's pkg/controller/jobs/trainjob/trainjob_multikueue_adapter.go
// and pkg/controller/admissionchecks/multikueue/workload.go).
//
// The commands follow such a TrainJob to its worker the way MultiKueue itself reaches it: the
// MultiKueueCluster of that name, then the kubeconfig Secret it names in Kueue's namespace.
const (
	// Namespace is Kueue's namespace, where MultiKueue reads its kubeconfig Secrets: the namespace Kueue's
	// manifests install it into (its Configuration's namespace may name another; the commands assume this one).
	Namespace = "kueue-system"
	// multiKueueSecretKey is the key of a MultiKueue kubeconfig Secret that holds the kubeconfig.
	multiKueueSecretKey = "kubeconfig"
	// locationSecret is the locationType of a kubeconfig in a Secret (the default); the other, Path, is a file
	// on Kueue's own disk.
	locationSecret = "Secret"
)

// Dispatched tells whether tj belongs to MultiKueue: it runs as a copy on a worker cluster, not here.
func Dispatched(tj *trainer.TrainJob) bool {
	return ptr.Deref(tj.Spec.ManagedBy, "") == trainer.MultiKueueController
}

// WorkerCluster is the worker cluster MultiKueue dispatched the Workload to (the name of a MultiKueueCluster),
// "" while it has not chosen one.
func (wl *Workload) WorkerCluster() string { return ptr.Deref(wl.Status.ClusterName, "") }

// MultiKueueCluster is the part of a Kueue MultiKueueCluster the commands read: where its kubeconfig is.
type MultiKueueCluster struct {
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		// ClusterSource is v1beta2's; v1beta1 has KubeConfig directly in the spec. Without a kubeconfig, the
		// cluster is reached through a ClusterProfile.
		ClusterSource struct {
			KubeConfig *KubeConfig `json:"kubeConfig,omitempty"`
		} `json:"clusterSource"`
		KubeConfig *KubeConfig `json:"kubeConfig,omitempty"`
	} `json:"spec"`
}

// KubeConfig says where a MultiKueueCluster's kubeconfig is: the name of a Secret in Kueue's namespace, or a
// path on Kueue's disk.
type KubeConfig struct {
	Location     string `json:"location"`
	LocationType string `json:"locationType,omitempty"`
}

// kubeConfig is where the cluster's kubeconfig is, nil when it is reached otherwise (a ClusterProfile).
func (c *MultiKueueCluster) kubeConfig() *KubeConfig {
	if k := c.Spec.ClusterSource.KubeConfig; k != nil {
		return k
	}
	return c.Spec.KubeConfig
}

// Worker is a worker cluster of MultiKueue as the commands reach it.
type Worker struct {
	// Cluster is the MultiKueueCluster's name.
	Cluster string
	// Secret is namespace/name of the Secret that holds the worker's kubeconfig, when the MultiKueueCluster
	// names one.
	Secret string
	// Config is a client configuration of the worker from that kubeconfig: its credentials are MultiKueue's.
	// Nil when the worker cannot be reached from here; Unreachable then says why, as a clause ("you may not
	// read its kubeconfig Secret kueue-system/worker-1-kubeconfig").
	Config      *rest.Config
	Unreachable string
}

// Reach says how to see the worker's copy of TrainJob namespace/name without MultiKueue's Secret: the same
// command, with the user's own credentials of that cluster.
func (w *Worker) Reach(command, namespace, name string) string {
	return fmt.Sprintf("run `kubectl trainjob %s %s -n %s` with --kubeconfig or --context of cluster %s", command, name, namespace, w.Cluster)
}

// Worker resolves worker cluster name as MultiKueue reaches it: a GET of the MultiKueueCluster, then, for a
// kubeconfig in a Secret (the usual way), a GET of that Secret. What the user may not read, what is missing,
// and a worker reached otherwise (a kubeconfig file on Kueue's disk, a ClusterProfile) are no error:
// Worker.Unreachable says so. The answer is kept: a Client asks once per cluster (status -w summarizes again
// and again). Call it once Served said yes.
func (c *Client) Worker(ctx context.Context, name string) (*Worker, error) {
	c.workersMu.Lock()
	defer c.workersMu.Unlock()
	if w, ok := c.workers[name]; ok {
		return w, nil
	}
	w, err := c.worker(ctx, name)
	if err != nil {
		return nil, err
	}
	if c.workers == nil {
		c.workers = map[string]*Worker{}
	}
	c.workers[name] = w
	return w, nil
}

func (c *Client) worker(ctx context.Context, name string) (*Worker, error) {
	w := &Worker{Cluster: name}
	mc := &MultiKueueCluster{}
	if err := c.get(ctx, c.kueuePath("", "multikueueclusters", name), mc); err != nil {
		if w.Unreachable = unreadable(err, "MultiKueueCluster "+name); w.Unreachable != "" {
			return w, nil
		}
		return nil, fmt.Errorf("read MultiKueueCluster %s: %w", name, err)
	}
	kc := mc.kubeConfig()
	switch {
	case kc == nil:
		w.Unreachable = "MultiKueueCluster " + name + " reaches it through a ClusterProfile, with Kueue's own credentials"
		return w, nil
	case kc.LocationType != "" && kc.LocationType != locationSecret:
		w.Unreachable = fmt.Sprintf("MultiKueueCluster %s reads its kubeconfig from %s on Kueue's own disk", name, kc.Location)
		return w, nil
	}
	w.Secret = Namespace + "/" + kc.Location
	secret := &corev1.Secret{}
	if err := c.get(ctx, path.Join("/api/v1/namespaces", Namespace, "secrets", kc.Location), secret); err != nil {
		if w.Unreachable = unreadable(err, "its kubeconfig Secret "+w.Secret); w.Unreachable != "" {
			return w, nil
		}
		return nil, fmt.Errorf("read Secret %s: %w", w.Secret, err)
	}
	data, ok := secret.Data[multiKueueSecretKey]
	if !ok {
		w.Unreachable = fmt.Sprintf("its kubeconfig Secret %s has no key %q", w.Secret, multiKueueSecretKey)
		return w, nil
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(data)
	if err != nil {
		w.Unreachable = fmt.Sprintf("the kubeconfig in Secret %s: %v", w.Secret, err)
		return w, nil
	}
	// A worker's kubeconfig names its API server as Kueue on the management cluster reaches it, which may be
	// an address this machine does not: give up on connecting soon, not after the system's TCP timeout.
	// Requests are not bounded otherwise, since logs -f and watches stream.
	cfg.Dial = (&net.Dialer{Timeout: workerDialTimeout, KeepAlive: 30 * time.Second}).DialContext
	cfg.QPS, cfg.Burst = 50, 100 // the factory's, for the same commands
	w.Config = cfg
	return w, nil
}

// workerDialTimeout bounds connecting to a worker's API server.
const workerDialTimeout = 5 * time.Second

// unreadable says why what could not be read, when the reason is the user's rights or a missing object, as a
// clause; "" for any other error.
func unreadable(err error, what string) string {
	switch {
	case apierrors.IsForbidden(err):
		return "you may not read " + what
	case apierrors.IsNotFound(err):
		return what + " is not there"
	case apierrors.IsUnauthorized(err):
		return "cannot read " + what + ": " + cmdutil.APIMessage(err)
	}
	return ""
}

// WorkerOf returns the worker cluster a Dispatched TrainJob runs on, and its Workload: a discovery request the
// first time, one LIST of the namespace's Workloads, and Worker's requests once the Workload names a worker.
// The Worker is nil while the TrainJob is not dispatched yet (Kueue's API not served, no Workload, or no
// worker chosen).
func (c *Client) WorkerOf(ctx context.Context, tj *trainer.TrainJob) (*Worker, *Workload, error) {
	wl, err := c.WorkloadOf(ctx, tj)
	if err != nil || wl == nil || wl.WorkerCluster() == "" {
		return nil, wl, err
	}
	w, err := c.Worker(ctx, wl.WorkerCluster())
	return w, wl, err
}

// workerCache holds what Worker found, per cluster name.
type workerCache struct {
	workersMu sync.Mutex
	workers   map[string]*Worker
}
