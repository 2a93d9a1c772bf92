// Package portforward is `kubectl trainjob port-forward`: local ports forwarded to the trainer pod of one
// rank of a TrainJob (TensorBoard, a debugger, a notebook), following the rank when its pod is replaced, as
// kubectl-ray's session does.
//
// The forwarding itself is kubectl port-forward's: client-go's tools/portforward, dialled as kubectl dials it
// (over WebSockets, falling back to SPDY; KUBECTL_PORT_FORWARD_WEBSOCKETS=false keeps to SPDY), to the URL of
// kubectl's REST client, with kubectl's --address and --pod-running-timeout and its way of naming container
// ports (util.LookupContainerPortNumberByName). It does not use kubectl's port-forward command
// (k8s.io/kubectl/pkg/cmd/portforward) nor polymorphichelpers.AttachablePodForObjectFn, on which that
// command chooses its pod: AttachablePodForObjectFn takes any pod the selector of a Deployment, Job or Service
// selects and waits for one with no way to stop it early, where a rank is one pod among the trainer's Jobs'
// pods, told by the JobSet's labels (cmdutil.PodRank), and the wait for it must end on Ctrl-C or when the
// TrainJob ends; and kubectl's command forwards to one pod until that pod ends, where this one goes on with
// the pod that replaces it. Importing either would also link kubectl's describe and get commands into the
// binary for none of their code.
package portforward

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	kcmdutil "k8s.io/kubectl/pkg/cmd/util"
	kutil "k8s.io/kubectl/pkg/util"
	streamhttp "k8s.io/streaming/pkg/httpstream"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/stage"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/completion"
)

const portForwardLong = `Forward local ports to the trainer pod of one rank of a TrainJob: TensorBoard, a debugger, a
notebook served by the trainer.

The pod is the one of the trainer's replicated job (node) with that rank (--rank, the completion index;
rank 0 by default), as logs --rank picks it. When that pod goes away — deleted, evicted, ended, replaced by
its Job or by a restart of the JobSet — port-forward says so, waits for the pod that takes its place, and
forwards the same local ports to it, as kubectl-ray's session does; kubectl port-forward would end there.

It ends on Ctrl-C (exit 0), or when the TrainJob has ended and no pod of the rank is left: exit 0 if it is
Complete, 2 if it Failed. It waits --pod-running-timeout for a running pod at the start (exit 3 after that).
Ports are written as for kubectl port-forward: REMOTE (the same port locally), LOCAL:REMOTE, :REMOTE (a free
local port), REMOTE being a number or the name of a container port.`

const portForwardExample = `  # TensorBoard of rank 0 of the TrainJob llama at http://localhost:6006
  kubectl trainjob port-forward llama 6006

  # A debugger listening on port 5678 of rank 3, at local port 15678
  kubectl trainjob port-forward llama 15678:5678 --rank 3

  # A free local port, on every address of this machine
  kubectl trainjob port-forward llama :8888 --address 0.0.0.0`

// defaultPodRunningTimeout is kubectl port-forward's.
const defaultPodRunningTimeout = 60 * time.Second

// retryInterval is how long to wait before forwarding again to a pod whose connection was lost or could not
// be made.
const retryInterval = time.Second

// PortForwardOptions are the options of `kubectl trainjob port-forward`.
type PortForwardOptions struct {
	Name    string
	Ports   []string
	Rank    int
	Address []string
	// PodRunningTimeout bounds the wait for the first running pod of the rank.
	PodRunningTimeout time.Duration

	namespace  string
	client     client.WithWatch
	config     *rest.Config
	restClient rest.Interface

	cmdutil.Streams
}

var _ cmdutil.Command = (*PortForwardOptions)(nil)

// NewPortForwardOptions returns the defaults of the flags.
func NewPortForwardOptions(streams cmdutil.Streams) *PortForwardOptions {
	return &PortForwardOptions{Streams: streams, Address: []string{"localhost"}}
}

// NewCmdPortForward is `kubectl trainjob port-forward`.
func NewCmdPortForward(f cmdutil.Factory, streams cmdutil.Streams) *cobra.Command {
	o := NewPortForwardOptions(streams)
	names := completion.TrainJobNames(f)
	cmd := &cobra.Command{
		Use:                   "port-forward NAME [LOCAL_PORT:]REMOTE_PORT [...[LOCAL_PORT_N:]REMOTE_PORT_N] [--rank N]",
		DisableFlagsInUseLine: true,
		Short:                 "Forward local ports to a trainer pod of a TrainJob, following it when it is replaced",
		Long:                  portForwardLong,
		Example:               portForwardExample,
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return names(cmd, args, toComplete)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.RunCommand(f, o, cmd, args)
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&o.Rank, "rank", o.Rank, "Rank of the trainer (completion index of the replicated job node) whose pod to forward to")
	fl.StringSliceVar(&o.Address, "address", o.Address, "Addresses to listen on (comma separated): IP addresses or localhost, as for kubectl port-forward")
	kcmdutil.AddPodRunningTimeoutFlag(cmd, defaultPodRunningTimeout)
	_ = cmd.RegisterFlagCompletionFunc("rank", completion.TrainerRanks(f))
	_ = cmd.RegisterFlagCompletionFunc("address", cobra.FixedCompletions([]cobra.Completion{"localhost", "0.0.0.0"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// Complete resolves NAME, the ports, the namespace and the clients.
func (o *PortForwardOptions) Complete(f cmdutil.Factory, cmd *cobra.Command, args []string) error {
	if len(args) < 2 {
		return kcmdutil.UsageErrorf(cmd, "give a TrainJob NAME and at least one [LOCAL_PORT:]REMOTE_PORT")
	}
	o.Name, o.Ports = args[0], args[1:]
	var err error
	if o.PodRunningTimeout, err = kcmdutil.GetPodRunningTimeoutFlag(cmd); err != nil {
		return err
	}
	if o.namespace, err = cmdutil.Namespace(f); err != nil {
		return err
	}
	if o.client, err = f.Client(); err != nil {
		return err
	}
	if o.config, err = f.ToRESTConfig(); err != nil {
		return err
	}
	o.restClient, err = f.RESTClient()
	return err
}

// Validate rejects a rank or a port that cannot be.
func (o *PortForwardOptions) Validate() error {
	if o.Rank < 0 {
		return fmt.Errorf("invalid --rank %d: use a completion index (0, 1, …)", o.Rank)
	}
	for _, p := range o.Ports {
		if err := checkPort(p); err != nil {
			return err
		}
	}
	return nil
}

// checkPort checks a [LOCAL_PORT:]REMOTE_PORT before anything is asked of the cluster.
func checkPort(p string) error {
	bad := func(why string) error {
		return fmt.Errorf("invalid port %q: %s; write it as REMOTE, LOCAL:REMOTE or :REMOTE, e.g. 6006 or 16006:6006", p, why)
	}
	parts := strings.Split(p, ":")
	if len(parts) > 2 {
		return bad("more than one ':'")
	}
	local, remote := parts[0], parts[len(parts)-1]
	if len(parts) == 2 && local != "" {
		if _, err := strconv.ParseUint(local, 10, 16); err != nil {
			return bad(fmt.Sprintf("the local port %q is not a number from 0 to 65535", local))
		}
	}
	if remote == "" {
		return bad("no remote port")
	}
	if n, err := strconv.ParseUint(remote, 10, 16); err == nil {
		if n == 0 {
			return bad("the remote port is 0")
		}
		return nil
	}
	if len(validation.IsValidPortName(remote)) > 0 {
		return bad(fmt.Sprintf("the remote port %q is neither a number from 1 to 65535 nor the name of a container port", remote))
	}
	return nil
}

// Run forwards until Ctrl-C, or until the TrainJob has ended and no pod of the rank is left.
func (o *PortForwardOptions) Run(ctx context.Context) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt)
	defer stop()
	tj, err := cmdutil.GetTrainJob(ctx, o.client, o.namespace, o.Name)
	if err != nil {
		return err
	}
	f := &follower{o: o, tj: tj, pods: map[types.UID]*corev1.Pod{}, changed: make(chan struct{}, 1)}
	return f.run(ctx)
}

// follower forwards to the pod of the rank, and to the pod that replaces it. One goroutine (run) decides;
// the watches tell it what changed.
type follower struct {
	o *PortForwardOptions

	mu       sync.Mutex
	tj       *trainer.TrainJob
	deleted  bool
	watchErr error
	pods     map[types.UID]*corev1.Pod // the pods of the trainer's replicated job
	changed  chan struct{}

	perJob  int              // pods per Job of the trainer, once its JobSet is read
	lineage *cmdutil.Lineage // tells the TrainJob's pods from pods that only carry its labels; read with perJob
	current *corev1.Pod      // the pod forwarded to last
	gone    bool             // current is gone, and the user was told
	ports   []string         // the ports forwarded to current, local ports as they were bound
	fw      *forwarding      // the forwarding running, nil between pods
	retry   <-chan time.Time
}

// forwarding is one pod's forwarding: closing stop ends it, done says how it ended.
type forwarding struct {
	stop chan struct{}
	done chan error
}

func (fw *forwarding) end() {
	close(fw.stop)
	<-fw.done
}

func (f *follower) run(ctx context.Context) error {
	o := f.o
	watchCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, w := range []cmdutil.Watch{
		{Object: &corev1.Pod{}, Namespace: o.namespace, Options: []client.ListOption{
			cmdutil.ChildrenOf(o.Name), client.MatchingLabels{jobsetv1alpha2.ReplicatedJobNameKey: trainer.Node}}},
		{Object: &trainer.TrainJob{}, Namespace: o.namespace, Options: []client.ListOption{client.MatchingFields{"metadata.name": o.Name}}},
	} {
		if _, err := w.Start(watchCtx, o.client, f.handle); err != nil {
			return err
		}
	}
	defer func() {
		if f.fw != nil {
			f.fw.end()
		}
	}()
	firstPod := time.NewTimer(o.PodRunningTimeout)
	defer firstPod.Stop()
	for {
		var done <-chan error
		if f.fw != nil {
			done = f.fw.done
		}
		select {
		case <-ctx.Done():
			return nil
		case <-f.changed:
		case <-f.retry:
			f.retry = nil
		case err := <-done:
			// The forwarding ended by itself: the connection to the pod was lost (the pod went away, or a
			// connection to a port that nothing listens on broke it, as in kubectl port-forward).
			fmt.Fprintf(o.ErrOut, "Lost the connection to pod %s: %v\n", f.current.Name, err)
			f.fw, f.retry = nil, time.After(retryInterval)
		case <-firstPod.C:
			if f.current == nil {
				return cmdutil.WithExitCode(cmdutil.ExitTimeout, fmt.Errorf("timed out after %s waiting for a running pod of rank %d of TrainJob %s (it is %s); wait longer with --pod-running-timeout, or see why with: kubectl trainjob status %s",
					o.PodRunningTimeout, o.Rank, o.Name, stage.Of(f.trainJob()), o.Name))
			}
		}
		if err := f.step(ctx); err != nil {
			return err
		}
		if ended, err := f.end(); ended {
			return err
		}
	}
}

// handle takes a change a watch saw.
func (f *follower) handle(e cmdutil.Event) {
	f.mu.Lock()
	switch obj := e.Object.(type) {
	case *corev1.Pod:
		if e.Deleted {
			delete(f.pods, obj.UID)
		} else {
			f.pods[obj.UID] = obj
		}
	case *trainer.TrainJob:
		f.tj, f.deleted = obj, e.Deleted
	}
	if e.Err != nil {
		f.watchErr = e.Err
	}
	f.mu.Unlock()
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

func (f *follower) trainJob() *trainer.TrainJob {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tj
}

// step moves the forwarding to the pod of the rank there is now: it stops forwarding to a pod that is gone,
// and forwards to the pod that is there.
func (f *follower) step(ctx context.Context) error {
	o := f.o
	pod, err := f.pod(ctx)
	if err != nil {
		return err
	}
	if f.current != nil && !f.gone && (pod == nil || pod.UID != f.current.UID) {
		if f.fw != nil {
			f.fw.end()
			f.fw = nil
		}
		f.gone = true
		fmt.Fprintf(o.Out, "Pod %s is gone: waiting for the pod that takes its place as rank %d\n", f.current.Name, o.Rank)
	}
	if f.fw != nil || pod == nil || f.retry != nil {
		return nil
	}
	switch {
	case f.current == nil:
		fmt.Fprintf(o.Out, "Forwarding to pod %s, rank %d of TrainJob %s\n", pod.Name, o.Rank, o.Name)
	case f.gone:
		fmt.Fprintf(o.Out, "Forwarding to pod %s, rank %d of TrainJob %s, which took the place of %s\n", pod.Name, o.Rank, o.Name, f.current.Name)
	default:
		fmt.Fprintf(o.ErrOut, "Forwarding to pod %s again\n", pod.Name)
	}
	first := f.current == nil
	f.current, f.gone = pod, false
	if err := f.forward(pod); err != nil {
		if first {
			return err
		}
		// The pod may be about to end, and the watch to say so; else the next attempt may succeed.
		fmt.Fprintf(o.ErrOut, "Cannot forward to pod %s: %v\n", pod.Name, err)
		f.retry = time.After(retryInterval)
	}
	return nil
}

// end tells whether there is nothing left to forward to — the TrainJob has ended and no pod of the rank runs
// — and with what: nil when it is Complete, cmdutil.Failed when it Failed.
func (f *follower) end() (bool, error) {
	tj := f.trainJob()
	if f.fw != nil || !stage.Of(tj).Terminal() {
		return false, nil
	}
	if stage.Of(tj) == stage.Failed {
		return true, cmdutil.Failed(tj)
	}
	fmt.Fprintf(f.o.Out, "TrainJob %s is Complete: no pod of rank %d is left to forward to\n", f.o.Name, f.o.Rank)
	return true, nil
}

// pod is the running pod of the rank: of the TrainJob's trainer pods (cmdutil.Lineage: not any pod with its
// labels) that run and are not being deleted, the one with that rank that replaced the others
// (cmdutil.NewerPod); nil when there is none.
func (f *follower) pod(ctx context.Context) (*corev1.Pod, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.watchErr != nil {
		return nil, f.watchErr
	}
	if f.deleted {
		return nil, fmt.Errorf("TrainJob %s was deleted", f.o.Name)
	}
	if len(f.pods) > 0 && f.perJob == 0 {
		perJob, err := f.ranks(ctx)
		if err != nil {
			return nil, err
		}
		f.perJob = perJob
	}
	var best *corev1.Pod
	for _, p := range f.pods {
		rank, ok := cmdutil.PodRank(p, f.perJob)
		if !ok || rank != f.o.Rank || p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			continue
		}
		if owned, err := f.lineage.Owns(ctx, p); err != nil || !owned {
			if err != nil {
				return nil, err
			}
			continue
		}
		if best == nil || cmdutil.NewerPod(p, best) {
			best = p
		}
	}
	return best, nil
}

// ranks reads the TrainJob's JobSet and Jobs into f.lineage, and the trainer's shape from the JobSet: the pods
// per Job, and whether the rank is one of its ranks. Without a JobSet that the TrainJob controls, no pod is
// its: 0, to be read again when pods change.
func (f *follower) ranks(ctx context.Context) (int, error) {
	o := f.o
	lineage, err := cmdutil.ReadLineage(ctx, o.client, f.tj)
	if err != nil {
		return 0, fmt.Errorf("cannot read the JobSet of TrainJob %s: %w", o.Name, err)
	}
	f.lineage = lineage
	js := lineage.JobSet()
	if js == nil {
		return 0, nil
	}
	for _, rj := range js.Spec.ReplicatedJobs {
		if rj.Name != trainer.Node {
			continue
		}
		perJob := cmdutil.PodsPerJob(rj.Template.Spec)
		if ranks := int(rj.Replicas) * perJob; o.Rank >= ranks {
			return 0, fmt.Errorf("rank %d out of range: the trainer of TrainJob %s has %d rank(s), 0 to %d", o.Rank, o.Name, ranks, ranks-1)
		}
		return perJob, nil
	}
	return 0, fmt.Errorf("TrainJob %s has no trainer to forward to: its JobSet has no replicated job %q", o.Name, trainer.Node)
}

// forward starts forwarding to pod and returns once the local ports listen.
func (f *follower) forward(pod *corev1.Pod) error {
	o := f.o
	ports := f.ports
	if ports == nil {
		var err error
		if ports, err = remotePorts(o.Ports, pod); err != nil {
			return err
		}
	}
	u := o.restClient.Post().Resource("pods").Namespace(pod.Namespace).Name(pod.Name).SubResource("portforward").URL()
	dialer, err := newDialer(u, o.config)
	if err != nil {
		return err
	}
	fw := &forwarding{stop: make(chan struct{}), done: make(chan error, 1)}
	ready := make(chan struct{})
	pf, err := portforward.NewOnAddressesForStreaming(dialer, o.Address, ports, fw.stop, ready, o.Out, o.ErrOut)
	if err != nil {
		return err
	}
	go func() { fw.done <- pf.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-fw.done:
		if err == nil {
			err = errors.New("the forwarding ended before it began")
		}
		return err
	}
	if f.ports == nil {
		// The same local ports for every pod that follows, also those the system chose (:REMOTE).
		bound, err := pf.GetPorts()
		if err != nil {
			fw.end()
			return err
		}
		for _, p := range bound {
			f.ports = append(f.ports, fmt.Sprintf("%d:%d", p.Local, p.Remote))
		}
	}
	f.fw = fw
	return nil
}

// remotePorts are the ports as tools/portforward takes them, a container port's name replaced by its number
// in pod.
func remotePorts(ports []string, pod *corev1.Pod) ([]string, error) {
	out := make([]string, 0, len(ports))
	for _, p := range ports {
		local, remote, hasLocal := strings.Cut(p, ":")
		if !hasLocal {
			local, remote = p, p
		}
		if _, err := strconv.Atoi(remote); err != nil {
			n, err := kutil.LookupContainerPortNumberByName(*pod, remote)
			if err != nil {
				return nil, err
			}
			if !hasLocal {
				local = strconv.Itoa(int(n))
			}
			remote = strconv.Itoa(int(n))
		}
		out = append(out, local+":"+remote)
	}
	return out, nil
}

// newDialer dials the pod's portforward subresource at u as kubectl port-forward does: over WebSockets,
// falling back to SPDY where the API server or a proxy does not upgrade to them; SPDY alone when
// KUBECTL_PORT_FORWARD_WEBSOCKETS=false.
func newDialer(u *url.URL, cfg *rest.Config) (streamhttp.Dialer, error) {
	transport, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		return nil, err
	}
	dialer := spdy.NewDialerForStreaming(upgrader, &http.Client{Transport: transport}, http.MethodPost, u)
	if kcmdutil.PortForwardWebsockets.IsDisabled() {
		return dialer, nil
	}
	tunneling, err := portforward.NewSPDYOverWebsocketDialerForStreaming(u, cfg)
	if err != nil {
		return nil, err
	}
	return portforward.NewFallbackDialerForStreaming(tunneling, dialer, func(err error) bool {
		return streamhttp.IsUpgradeFailure(err) || streamhttp.IsHTTPSProxyError(err)
	}), nil
}
