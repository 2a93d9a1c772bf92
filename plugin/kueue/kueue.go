// Package kueue is the commands' view of Kueue (kueue.x-k8s.io), which queues TrainJobs natively: the Workload
// it keeps for each TrainJob of a LocalQueue (admission, why it is not admitted, evictions), the LocalQueue,
// the position in the queue where Kueue's visibility API is served, and the Workload's spec.active that
// suspend and resume set.
//
// Kueue's objects are read as JSON into the small local types below, through a REST client at the API
// server's root, rather than through Kueue's Go types: those live in Kueue's own module (sigs.k8s.io/kueue),
// whose requirements (Kueue's controllers and their dependencies) would join the plugin's module graph and
// build for the dozen fields read here, which v1beta1 and v1beta2 spell alike. Which version to read comes
// from one discovery request for the kueue.x-k8s.io group, made once per Client; when the group is not served
// (Kueue is not installed), the commands show no Kueue details and no error.
//
// For a TrainJob that MultiKueue dispatched to a worker cluster it finds the worker as MultiKueue reaches it
// (multikueue.go): its MultiKueueCluster and kubeconfig Secret.
//
// It must not write anything but a Workload's spec.active, and reads nothing a command did not ask for.
package kueue

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/stage"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
)

const (
	// Group is Kueue's API group.
	Group = "kueue.x-k8s.io"
	// visibilityGroup is Kueue's aggregated API that tells the positions of pending Workloads.
	visibilityGroup = "visibility.kueue.x-k8s.io"
	// QueueLabel names the LocalQueue of a TrainJob: Kueue queues, suspends and resumes those that carry it.
	QueueLabel = "kueue.x-k8s.io/queue-name"
	// WorkloadResource is how kubectl names Workloads in messages.
	WorkloadResource = "workload.kueue.x-k8s.io"
)

// versions are the versions of Kueue's API read here, newest first: Kueue v0.15 and later serve v1beta2, older
// ones only v1beta1; the fields read here are the same in both.
var versions = []string{"v1beta2", "v1beta1"}

// Condition types and reasons of a Workload, as Kueue's apis/kueue/v1beta2/workload_types.go names them.
const (
	ConditionQuotaReserved = "QuotaReserved"
	ConditionAdmitted      = "Admitted"
	ConditionEvicted       = "Evicted"
	ConditionPreempted     = "Preempted"
	ConditionRequeued      = "Requeued"
	ConditionFinished      = "Finished"
	// EvictedEventPrefix starts the reason of the Event Kueue records on a Workload it evicts
	// ("EvictedDueToPreempted", "EvictedDueToDeactivated", ...).
	EvictedEventPrefix = "EvictedDueTo"
)

// Workload is the part of a Kueue Workload the commands read.
type Workload struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              WorkloadSpec   `json:"spec"`
	Status            WorkloadStatus `json:"status"`
}

// WorkloadSpec is the part of a Workload's spec the commands read.
type WorkloadSpec struct {
	QueueName string `json:"queueName,omitempty"`
	Priority  *int32 `json:"priority,omitempty"`
	// PriorityClassRef is v1beta2's reference to the priority class, PriorityClassName v1beta1's.
	PriorityClassRef  *PriorityClassRef `json:"priorityClassRef,omitempty"`
	PriorityClassName string            `json:"priorityClassName,omitempty"`
	// Active is false when the Workload was stopped; unset means true.
	Active  *bool    `json:"active,omitempty"`
	PodSets []PodSet `json:"podSets,omitempty"`
}

// PriorityClassRef names a Workload's priority class (v1beta2).
type PriorityClassRef struct {
	Name string `json:"name"`
}

// WorkloadStatus is the part of a Workload's status the commands read.
type WorkloadStatus struct {
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	Admission  *Admission         `json:"admission,omitempty"`
	// ClusterName is the worker cluster MultiKueue dispatched the Workload to (Kueue v0.9 and later).
	ClusterName *string `json:"clusterName,omitempty"`
}

// Admission is where Kueue admitted a Workload.
type Admission struct {
	ClusterQueue      string             `json:"clusterQueue"`
	PodSetAssignments []PodSetAssignment `json:"podSetAssignments,omitempty"`
}

// WorkloadList is a list of Workloads.
type WorkloadList struct {
	Items []Workload `json:"items"`
}

// Active tells whether the Workload may be admitted: spec.active is not false.
func (wl *Workload) Active() bool { return ptr.Deref(wl.Spec.Active, true) }

// PriorityClass is the name of the Workload's priority class, if any.
func (wl *Workload) PriorityClass() string {
	if r := wl.Spec.PriorityClassRef; r != nil {
		return r.Name
	}
	return wl.Spec.PriorityClassName
}

// Admitted tells whether Kueue admitted the Workload and is not evicting it.
func (wl *Workload) Admitted() bool {
	return meta.IsStatusConditionTrue(wl.Status.Conditions, ConditionAdmitted) &&
		!meta.IsStatusConditionTrue(wl.Status.Conditions, ConditionEvicted)
}

// AdmittedAt is when Kueue last admitted the Workload, while it is admitted.
func (wl *Workload) AdmittedAt() *metav1.Time {
	if !wl.Admitted() {
		return nil
	}
	return &meta.FindStatusCondition(wl.Status.Conditions, ConditionAdmitted).LastTransitionTime
}

// ClusterQueue is the ClusterQueue that admitted the Workload (or reserves quota for it), "" when none does.
func (wl *Workload) ClusterQueue() string {
	if a := wl.Status.Admission; a != nil {
		return a.ClusterQueue
	}
	return ""
}

// NotAdmitted says why the Workload is not admitted, as Kueue writes it: the message of its QuotaReserved
// condition when that is False (no quota: "couldn't assign flavors to pod set node: insufficient unused quota
// for nvidia.com/gpu in flavor gpu-node, 16 more needed"), else of its Admitted condition when False
// (admission checks). "" when admitted, or when Kueue has not said yet.
func (wl *Workload) NotAdmitted() string {
	if wl.Admitted() {
		return ""
	}
	for _, typ := range []string{ConditionQuotaReserved, ConditionAdmitted} {
		if c := meta.FindStatusCondition(wl.Status.Conditions, typ); c != nil && c.Status == metav1.ConditionFalse && c.Message != "" {
			return c.Message
		}
	}
	return ""
}

// Stage is what pkg/stage needs of the Workload.
func (wl *Workload) Stage() *stage.Workload {
	if wl == nil {
		return nil
	}
	return &stage.Workload{Admitted: wl.Admitted(), Inactive: !wl.Active()}
}

// Of returns the Workload Kueue keeps for tj among wls: the one tj controls (ownership, not a name match),
// or nil.
func Of(tj *trainer.TrainJob, wls []Workload) *Workload {
	for i := range wls {
		if ref := metav1.GetControllerOfNoCopy(&wls[i]); ref != nil && ref.UID == tj.UID && ref.Kind == trainer.TrainJobKind {
			return &wls[i]
		}
	}
	return nil
}

// preemptorUID finds the preempting Workload's UID in the message Kueue's preemption writes ("Preempted to
// accommodate a workload (UID: …, JobUID: …) due to …").
var preemptorUID = regexp.MustCompile(`\(UID: ([^,)\s]+)`)

// Preemptor names what preempted a Workload, from the message of its eviction: the owner (Kind/name) of the
// preempting Workload among wls, "" when the message names none of them (another namespace's, or gone).
func Preemptor(message string, wls []Workload) string {
	m := preemptorUID.FindStringSubmatch(message)
	if m == nil {
		return ""
	}
	for i := range wls {
		if string(wls[i].UID) != m[1] {
			continue
		}
		if ref := metav1.GetControllerOfNoCopy(&wls[i]); ref != nil {
			return ref.Kind + "/" + ref.Name
		}
		return "Workload/" + wls[i].Name
	}
	return ""
}

// Queued tells whether tj is in a Kueue LocalQueue: it carries the queue label.
func Queued(tj *trainer.TrainJob) bool {
	_, ok := tj.Labels[QueueLabel]
	return ok
}

// LocalQueue is the part of a Kueue LocalQueue the commands read.
type LocalQueue struct {
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		ClusterQueue string `json:"clusterQueue"`
	} `json:"spec"`
	Status struct {
		PendingWorkloads  int32 `json:"pendingWorkloads"`
		AdmittedWorkloads int32 `json:"admittedWorkloads"`
	} `json:"status"`
}

// PendingWorkload is a pending Workload as Kueue's visibility API shows it: its positions count from 0, the
// next to be admitted.
type PendingWorkload struct {
	metav1.ObjectMeta      `json:"metadata"`
	Priority               int32  `json:"priority"`
	LocalQueueName         string `json:"localQueueName"`
	PositionInClusterQueue int32  `json:"positionInClusterQueue"`
	PositionInLocalQueue   int32  `json:"positionInLocalQueue"`
}

// FindPending is the Workload namespace/name among pending, a LocalQueue's pending Workloads as PendingWorkloads
// reads them, or nil. Kueue (v0.17.0's pending_workloads_lq.go) lists under a LocalQueue the pending Workloads of
// every namespace's LocalQueue of that name that feeds the same ClusterQueue, in the ClusterQueue's order, and
// counts their positions in the LocalQueue together: FindPending counts the position in the LocalQueue again,
// among the Workloads of namespace ahead of it. The position in the ClusterQueue is Kueue's.
func FindPending(pending []PendingWorkload, namespace, name string) *PendingWorkload {
	var ahead int32
	for i := range pending {
		p := pending[i]
		if p.Namespace != "" && p.Namespace != namespace {
			continue
		}
		if p.Name == name {
			p.PositionInLocalQueue = ahead
			return &p
		}
		ahead++
	}
	return nil
}

// PositionPending is where a pending Workload is when Kueue's visibility API does not tell.
const PositionPending = "pending"

// Position says where p is in its queues: ClusterQueue clusterQueue and LocalQueue localQueue.
func (p *PendingWorkload) Position(clusterQueue, localQueue string) string {
	return fmt.Sprintf("%d ahead in ClusterQueue %s, %d in LocalQueue %s", p.PositionInClusterQueue, clusterQueue,
		p.PositionInLocalQueue, localQueue)
}

type pendingWorkloadsSummary struct {
	Items []PendingWorkload `json:"items"`
}

// Client reads Kueue's objects. It asks which version of Kueue's API is served once, on first use.
type Client struct {
	rest rest.Interface

	once    sync.Once
	version string // "" when Kueue's API is not served
	err     error

	workerCache
}

// NewClient is a Client of the factory's API server. It sends no request.
func NewClient(f cmdutil.Factory) (*Client, error) {
	cfg, err := f.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.NegotiatedSerializer = clientgoscheme.Codecs.WithoutConversion()
	rc, err := rest.UnversionedRESTClientFor(cfg)
	if err != nil {
		return nil, err
	}
	return NewClientFor(rc), nil
}

// NewClientFor is a Client that sends its requests through rc, a REST client at the API server's root.
func NewClientFor(rc rest.Interface) *Client { return &Client{rest: rc} }

// Served tells whether the API server serves Kueue's API in a version read here: one discovery request for
// the group, the first time. A group that is not there (Kueue not installed) is not an error.
func (c *Client) Served(ctx context.Context) (bool, error) {
	c.once.Do(func() {
		var group metav1.APIGroup
		err := c.get(ctx, "/apis/"+Group, &group)
		if apierrors.IsNotFound(err) {
			return
		}
		if err != nil {
			c.err = fmt.Errorf("discover Kueue's API (%s): %w", Group, err)
			return
		}
		served := func(v string) bool {
			return slices.ContainsFunc(group.Versions, func(gv metav1.GroupVersionForDiscovery) bool { return gv.Version == v })
		}
		if served(group.PreferredVersion.Version) && slices.Contains(versions, group.PreferredVersion.Version) {
			c.version = group.PreferredVersion.Version
			return
		}
		for _, v := range versions {
			if served(v) {
				c.version = v
				return
			}
		}
	})
	return c.version != "", c.err
}

// Workloads lists the Workloads of namespace ("": of every namespace), in one request. Call it once Served
// said yes.
func (c *Client) Workloads(ctx context.Context, namespace string) ([]Workload, error) {
	var list WorkloadList
	if err := c.get(ctx, c.kueuePath(namespace, "workloads"), &list); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// WorkloadOf returns the Workload of tj, or nil when Kueue's API is not served or Kueue has not made it yet:
// a discovery request the first time, then one LIST of the namespace's Workloads.
func (c *Client) WorkloadOf(ctx context.Context, tj *trainer.TrainJob) (*Workload, error) {
	if ok, err := c.Served(ctx); !ok || err != nil {
		return nil, err
	}
	wls, err := c.Workloads(ctx, tj.Namespace)
	if err != nil {
		return nil, err
	}
	return Of(tj, wls), nil
}

// Watches are how a command follows the Workloads of namespace ("": of every namespace) with the CLI's one
// watcher (cmdutil.Changes): as metadata, which changes with every change of a Workload (its admission, its
// conditions); none when Kueue's API is not served or cannot be discovered. A user who may not list
// Workloads is not watched: cmdutil's watcher stops at Forbidden, after one signal.
func (c *Client) Watches(ctx context.Context, namespace string) []cmdutil.Watch {
	if ok, err := c.Served(ctx); !ok || err != nil {
		return nil
	}
	wl := &metav1.PartialObjectMetadata{}
	wl.SetGroupVersionKind(schema.GroupVersionKind{Group: Group, Version: c.version, Kind: "Workload"})
	return []cmdutil.Watch{{Object: wl, Namespace: namespace}}
}

// LocalQueue reads a LocalQueue. Call it once Served said yes.
func (c *Client) LocalQueue(ctx context.Context, namespace, name string) (*LocalQueue, error) {
	lq := &LocalQueue{}
	if err := c.get(ctx, c.kueuePath(namespace, "localqueues", name), lq); err != nil {
		return nil, err
	}
	return lq, nil
}

// PendingWorkloads asks Kueue's visibility API for the pending Workloads of a LocalQueue, in the version of
// Kueue's API that is served. The visibility API is an aggregated API that a cluster may not serve (the
// local cluster does: docs/kueue.md): the error is then NotFound or ServiceUnavailable. Call it once Served
// said yes.
func (c *Client) PendingWorkloads(ctx context.Context, namespace, localQueue string) ([]PendingWorkload, error) {
	var s pendingWorkloadsSummary
	p := path.Join("/apis", visibilityGroup, c.version, "namespaces", namespace, "localqueues", localQueue, "pendingworkloads")
	if err := c.get(ctx, p, &s); err != nil {
		return nil, err
	}
	return s.Items, nil
}

// SetActive sets the Workload's spec.active, as kueuectl stop/resume workload does (a merge patch).
func (c *Client) SetActive(ctx context.Context, wl *Workload, active bool) error {
	body := fmt.Appendf(nil, `{"spec":{"active":%t}}`, active)
	return c.rest.Patch(types.MergePatchType).AbsPath(c.kueuePath(wl.Namespace, "workloads", wl.Name)).Body(body).Do(ctx).Error()
}

// kueuePath is the path of a resource of Kueue's API in namespace ("": every namespace), with its name when
// given.
func (c *Client) kueuePath(namespace, resource string, name ...string) string {
	parts := []string{"/apis", Group, c.version}
	if namespace != "" {
		parts = append(parts, "namespaces", namespace)
	}
	return path.Join(append(append(parts, resource), name...)...)
}

func (c *Client) get(ctx context.Context, p string, into any) error {
	raw, err := c.rest.Get().AbsPath(p).Do(ctx).Raw()
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, into)
}

// maxShort is how long Short lets a message be.
const maxShort = 100

// Short shortens a message of Kueue's for a table cell: without the pod set that the flavor assigner names
// first ("couldn't assign flavors to pod set node: "), and cut at maxShort characters.
func Short(msg string) string {
	if rest, ok := strings.CutPrefix(msg, "couldn't assign flavors to pod set "); ok {
		if _, reason, ok := strings.Cut(rest, ": "); ok {
			msg = reason
		}
	}
	if r := []rune(msg); len(r) > maxShort {
		msg = string(r[:maxShort-1]) + "…"
	}
	return msg
}
