package logs

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/stage"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
)

// follower follows the logs of a TrainJob until it is terminal. One goroutine (run) watches the TrainJob and
// its pods and decides; every container read has a goroutine of its own (followedTail.run) that it signals.
// The design is stern's: re-target on a new pod or a restarted container, resume from the last timestamp.
type follower struct {
	o       *LogsOptions
	tj      *trainer.TrainJob // as read when the follow began: its UID is what the pods must lead to
	out     *printer
	plan    *plan
	lineage *cmdutil.Lineage // tells the TrainJob's pods from pods that only carry its labels; made with the plan
	prefix  bool
	// seen is set once the TrainJob was seen running: pods seen before are followed from then on, so that a
	// TrainJob already terminal when the follow begins has its logs read once, in pipeline order (finish).
	seen   bool
	pods   map[types.UID]*corev1.Pod
	tails  map[tailKey]*followedTail
	warned map[string]bool
	active atomic.Int32
	tailWG sync.WaitGroup // the tails' goroutines
	infWG  sync.WaitGroup // until the watches have stopped
}

type tailKey struct {
	pod       types.UID
	container string
}

func newFollower(o *LogsOptions, tj *trainer.TrainJob) *follower {
	return &follower{
		o:      o,
		tj:     tj,
		out:    o.printer(),
		pods:   map[types.UID]*corev1.Pod{},
		tails:  map[tailKey]*followedTail{},
		warned: map[string]bool{},
	}
}

// event is what the watches report: a pod or the TrainJob, added, changed or deleted.
type event struct {
	obj     runtime.Object
	deleted bool
}

func (f *follower) run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		f.tailWG.Wait()
		f.infWG.Wait()
	}()
	events := make(chan event, 256)
	if err := f.watch(ctx, events); err != nil {
		return err
	}

	for {
		var ev event
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev = <-events:
		}
		switch obj := ev.obj.(type) {
		case *trainer.TrainJob:
			if ev.deleted {
				return fmt.Errorf("TrainJob %s was deleted", f.o.Name)
			}
			if err := f.resolvePlan(ctx); err != nil {
				return err
			}
			if stage.Of(obj).Terminal() {
				return f.finish(ctx, obj)
			}
			if !f.seen {
				f.seen = true
				if err := f.followPods(ctx); err != nil {
					return err
				}
			}
		case *corev1.Pod:
			if ev.deleted {
				delete(f.pods, obj.UID)
			} else {
				f.pods[obj.UID] = obj
			}
			if err := f.resolvePlan(ctx); err != nil {
				return err
			}
			if f.plan != nil && f.seen {
				if err := f.pod(ctx, obj, ev.deleted); err != nil {
					return err
				}
			}
		}
	}
}

// watch follows the TrainJob and its pods, sending what it sees to events.
func (f *follower) watch(ctx context.Context, events chan<- event) error {
	send := func(e cmdutil.Event) {
		select {
		case events <- event{obj: e.Object, deleted: e.Deleted}:
		case <-ctx.Done():
		}
	}
	ns, name := f.o.Namespace, f.o.Name
	for _, w := range []cmdutil.Watch{
		{Object: &corev1.Pod{}, Namespace: ns, Options: []client.ListOption{cmdutil.ChildrenOf(name)}},
		{Object: &trainer.TrainJob{}, Namespace: ns, Options: []client.ListOption{client.MatchingFields{"metadata.name": name}}},
	} {
		done, err := w.Start(ctx, f.o.client, send)
		if err != nil {
			return err
		}
		f.infWG.Go(func() { <-done })
	}
	return nil
}

// resolvePlan makes the plan once the TrainJob's JobSet exists, and then reads the pods seen so far.
func (f *follower) resolvePlan(ctx context.Context) error {
	if f.plan != nil {
		return nil
	}
	lineage, err := cmdutil.ReadLineage(ctx, f.o.client, f.tj)
	if err != nil || lineage.JobSet() == nil {
		return err
	}
	p, err := newPlan(f.o.sel, f.o.Name, lineage.JobSet())
	if err != nil {
		return err
	}
	n, known := p.streams()
	if known && n > f.o.MaxLogRequests {
		return tooManyStreams(n, f.o.MaxLogRequests, p)
	}
	f.plan, f.prefix, f.lineage = p, f.o.usePrefix(n, known), lineage
	return f.followPods(ctx)
}

// followPods follows the pods seen so far, oldest first, once there is a plan and the TrainJob was seen running.
func (f *follower) followPods(ctx context.Context) error {
	if f.plan == nil || !f.seen {
		return nil
	}
	for _, pod := range oldestFirst(f.pods) {
		if err := f.pod(ctx, pod, false); err != nil {
			return err
		}
	}
	return nil
}

// tooManyStreams says that following the plan opens more streams than --max-log-requests, and how to narrow it
// or, on purpose, raise the limit (kubectl and stern refuse the same way).
func tooManyStreams(n, limit int, p *plan) error {
	return fmt.Errorf("following %s opens %d log streams, more than --max-log-requests=%d: choose ranks with --rank N or a node with --node HOST, "+
		"read them without -f (at most %d at once), or raise --max-log-requests to %d", p.describe(), n, limit, limit, n)
}

// pod starts, signals or ends the reading of a pod's containers after a change of the pod: a pod of the
// TrainJob (its Job, maybe new, is read if need be), not one that only carries its labels.
func (f *follower) pod(ctx context.Context, pod *corev1.Pod, deleted bool) error {
	t, ok := f.plan.match(pod)
	if !ok {
		return nil
	}
	if owned, err := f.lineage.Owns(ctx, pod); err != nil || !owned {
		return err
	}
	names, err := f.o.containersOf(pod, t.step)
	if err != nil {
		if !f.warned[pod.Name] {
			f.warned[pod.Name] = true
			fmt.Fprintf(f.o.ErrOut, "warning: %v\n", err)
		}
		return nil
	}
	for _, name := range names {
		if err := f.container(ctx, t, name, deleted); err != nil {
			return err
		}
	}
	return nil
}

// container starts, signals or ends the reading of one container of a pod.
func (f *follower) container(ctx context.Context, t podTarget, name string, deleted bool) error {
	pod := t.pod
	key := tailKey{pod.UID, name}
	ft := f.tails[key]
	if deleted {
		if ft != nil {
			ft.signal(sigFinish)
		}
		return nil
	}
	st := containerStatus(pod, name)
	if !started(st) {
		return nil
	}
	if ft == nil {
		if _, known := f.plan.streams(); !known && int(f.active.Load()) >= f.o.MaxLogRequests {
			return tooManyStreams(int(f.active.Load())+1, f.o.MaxLogRequests, f.plan)
		}
		ft = &followedTail{
			tail:     newTail(f.o.clientset, f.o.Namespace, pod.Name, name, f.o.prefix(f.prefix, t, name), f.out, f.o.from(false)),
			restarts: st.RestartCount,
			signals:  make(chan signal, 8),
			errOut:   f.o.ErrOut,
		}
		f.tails[key] = ft
		f.active.Add(1)
		f.tailWG.Go(func() {
			defer f.active.Add(-1)
			ft.run(ctx, f.o.RetryInterval)
		})
	} else if st.RestartCount > ft.restarts {
		ft.restarts = st.RestartCount
		ft.signal(sigRestart)
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed || ranItsCourse(pod, name, st) {
		ft.signal(sigFinish)
	}
	return nil
}

// ranItsCourse tells whether a container will write no more: an init container (not a sidecar) that ended.
// Its log is read to the end instead of being re-opened until the pod ends.
func ranItsCourse(pod *corev1.Pod, name string, st *corev1.ContainerStatus) bool {
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return st.State.Terminated != nil && (c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways)
		}
	}
	return false
}

// finish reads what is left of every log once the TrainJob is terminal, and returns its outcome.
func (f *follower) finish(ctx context.Context, tj *trainer.TrainJob) error {
	if err := f.resolvePlan(ctx); err != nil {
		return err
	}
	if f.plan != nil {
		// The pod watch may lag behind the TrainJob's: take the pods as they are now.
		pods, err := f.o.pods(ctx, f.lineage)
		if err != nil {
			return err
		}
		if len(f.tails) == 0 {
			// Nothing followed yet: the TrainJob ended before the follow began. Each log is read once, in
			// pipeline order.
			if err := f.readInOrder(ctx, pods); err != nil {
				return err
			}
		}
		for i := range pods {
			if err := f.pod(ctx, &pods[i], false); err != nil {
				return err
			}
		}
	}
	for _, ft := range f.tails {
		ft.signal(sigFinish)
	}
	f.tailWG.Wait()
	return outcome(tj)
}

// outcome is the error a follow of the terminal TrainJob tj ends with: none when it is Complete, exit code 2
// with its reason when it Failed.
func outcome(tj *trainer.TrainJob) error {
	if stage.Of(tj) == stage.Failed {
		return cmdutil.Failed(tj)
	}
	return nil
}

// readInOrder reads the logs of the pods the plan reads, newest pod of each step and rank, in pipeline order,
// at most --max-log-requests at once, and marks them read (finish then starts no tail for them).
func (f *follower) readInOrder(ctx context.Context, pods []corev1.Pod) error {
	var streams []stream
	for _, t := range f.plan.targets(pods) {
		names, err := f.o.containersOf(t.pod, t.step)
		if err != nil {
			continue // finish's f.pod warns
		}
		for _, name := range names {
			if !started(containerStatus(t.pod, name)) {
				continue
			}
			streams = append(streams, stream{pod: t.pod.Name, container: name, prefix: f.o.prefix(f.prefix, t, name)})
			// Read to the end: a tail that signals ignore.
			f.tails[tailKey{t.pod.UID, name}] = &followedTail{tail: &tail{pod: t.pod.Name, container: name}, finishing: true, errOut: f.o.ErrOut}
		}
	}
	return f.o.readInOrder(ctx, streams, false)
}

// oldestFirst is the pods by creation time.
func oldestFirst(pods map[types.UID]*corev1.Pod) []*corev1.Pod {
	out := make([]*corev1.Pod, 0, len(pods))
	for _, p := range pods {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *corev1.Pod) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

type signal int

const (
	// sigRestart: the container restarted; read the rest of the run that ended, then follow the new one.
	sigRestart signal = iota
	// sigFinish: nothing more will be written (the pod ended, or the TrainJob did); read the rest and stop.
	sigFinish
)

// followedTail is a tail that the follower signals.
type followedTail struct {
	*tail
	restarts  int32 // the restart count of the container last seen by the follower
	finishing bool  // sigFinish was sent

	signals chan signal
	errOut  interface{ Write([]byte) (int, error) }

	mu      sync.Mutex
	cancel  context.CancelFunc // ends the follow stream being read
	lastErr string
}

// signal tells the tail's goroutine what happened and ends the stream it is following. Only the follower's
// goroutine calls it.
func (ft *followedTail) signal(s signal) {
	if ft.finishing {
		return
	}
	ft.finishing = s == sigFinish
	ft.signals <- s
	ft.mu.Lock()
	if ft.cancel != nil {
		ft.cancel()
	}
	ft.mu.Unlock()
}

// run follows the container until it is signalled to finish. Reads that end without a signal (a disconnect,
// or a kubelet closing the stream of a container that exited) are re-opened after retry.
func (ft *followedTail) run(ctx context.Context, retry time.Duration) {
	for {
		streamCtx, cancel := context.WithCancel(ctx)
		ft.mu.Lock()
		ft.cancel = cancel
		ft.mu.Unlock()
		// A signal sent before cancel was set would not end the stream: look before following.
		select {
		case s := <-ft.signals:
			cancel()
			if ft.handle(ctx, s) {
				return
			}
			continue
		default:
		}
		err := ft.read(streamCtx, true, false)
		cancel()
		if err != nil && streamCtx.Err() == nil {
			ft.warn(err)
		}
		select {
		case s := <-ft.signals:
			if ft.handle(ctx, s) {
				return
			}
		case <-time.After(retry):
		case <-ctx.Done():
			return
		}
	}
}

// handle acts on a signal and tells whether the tail is done.
func (ft *followedTail) handle(ctx context.Context, s signal) bool {
	switch s {
	case sigRestart:
		if err := ft.read(ctx, false, true); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsBadRequest(err) {
			ft.warn(err)
		}
		return false
	default:
		if err := ft.read(ctx, false, false); err != nil && !apierrors.IsNotFound(err) {
			ft.warn(err)
		}
		return true
	}
}

// warn reports a failed read once until another error comes.
func (ft *followedTail) warn(err error) {
	if err.Error() == ft.lastErr {
		return
	}
	ft.lastErr = err.Error()
	fmt.Fprintf(ft.errOut, "warning: pod %s container %s: %v\n", ft.pod, ft.container, err)
}
