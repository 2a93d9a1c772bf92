// Package eventrecorder records the operator's Events (events.k8s.io/v1) as client-go's events recorder does —
// the same Event, an isomorphic one repeated within six minutes folded into a series of the first — but keeps
// only what the folding needs in memory: a digest of what makes Events isomorphic, and the count and times of
// each Event, not a copy of it. client-go's broadcaster keeps every Event it recorded, whole, for 6 to 12
// minutes, so after a burst of TrainJobs its memory grows with the burst rather than with what the operator
// holds.
package eventrecorder

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"os"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/reference"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

const (
	// seriesWindow is how long after its last occurrence an Event can still be folded into (client-go's).
	seriesWindow = 6 * time.Minute
	// refreshAfter is how often a series still growing is written again (client-go's).
	refreshAfter = 30 * time.Minute
	// queueLength bounds the Events waiting to be written; more are dropped (client-go's).
	queueLength = 1000
	// writers is how many Events are written at once.
	writers = 16
	// maxTries and retryAfter: an Event the API server could not be reached for is tried again (client-go's).
	maxTries   = 12
	retryAfter = 10 * time.Second
)

// Recorder records Events through a client. It is a manager Runnable: Events are written while it runs.
type Recorder struct {
	client     client.Client
	scheme     *runtime.Scheme
	controller string
	instance   string
	now        func() time.Time

	queue chan *eventsv1.Event
	log   logr.Logger

	mu        sync.Mutex
	series    map[key]series
	lastSweep time.Time
}

// key identifies isomorphic Events: the first half of the SHA-256 of what client-go's recorder compares (type,
// action, reason, and the whole references to the regarding and related objects). Two different Events share a
// key with a chance of about n²/2¹²⁹ among n remembered, and the key holds no reference to the strings.
type key [sha256.Size / 2]byte

func newKey(eventType, action, reason string, regarding, related *corev1.ObjectReference) key {
	h := sha256.New()
	for _, ref := range []*corev1.ObjectReference{regarding, related} {
		if ref == nil {
			ref = &corev1.ObjectReference{}
		}
		for _, s := range []string{ref.Kind, ref.Namespace, ref.Name, string(ref.UID), ref.APIVersion, ref.ResourceVersion, ref.FieldPath} {
			writeField(h, s)
		}
	}
	for _, s := range []string{eventType, action, reason} {
		writeField(h, s)
	}
	var k key
	copy(k[:], h.Sum(nil))
	return k
}

// writeField writes s with its length first, so that no two lists of fields write the same bytes.
func writeField(h hash.Hash, s string) {
	h.Write(binary.LittleEndian.AppendUint64(nil, uint64(len(s))))
	h.Write([]byte(s))
}

// series is what the recorder remembers of an Event it recorded: when it was first recorded (its name is
// `<regarding>.<first in hex nanoseconds>`), how often, when last, and when last written.
type series struct {
	first, last, written int64 // Unix nanoseconds
	count                int32
}

// name is the name of the Event of s regarding an object named regarding.
func (s series) name(regarding string) string { return fmt.Sprintf("%v.%x", regarding, s.first) }

// New returns a Recorder writing through c as reportingController controller.
func New(c client.Client, scheme *runtime.Scheme, controller string) *Recorder {
	hostname, _ := os.Hostname()
	return &Recorder{
		client: c, scheme: scheme, controller: controller, instance: controller + "-" + hostname,
		now: time.Now, queue: make(chan *eventsv1.Event, queueLength), series: map[key]series{},
		log: ctrllog.Log.WithName("events"),
	}
}

// Eventf records an Event regarding an object: a new one, or the next of a series when an isomorphic Event was
// recorded less than six minutes ago. It never blocks: when too many Events wait to be written, it is dropped.
func (r *Recorder) Eventf(regarding, related runtime.Object, eventType, reason, action, note string, args ...any) {
	refRegarding, err := reference.GetReference(r.scheme, regarding)
	if err != nil {
		r.log.Error(err, "Could not reference the object of an Event; not recorded", "reason", reason)
		return
	}
	var refRelated *corev1.ObjectReference
	if related != nil {
		if refRelated, err = reference.GetReference(r.scheme, related); err != nil {
			refRelated = nil
		}
	}
	k := newKey(eventType, action, reason, refRegarding, refRelated)
	if ev := r.next(k, eventType, action, reason, refRegarding, refRelated, fmt.Sprintf(note, args...)); ev != nil {
		select {
		case r.queue <- ev:
		default:
			r.log.Info("Too many Events waiting to be written; dropped one", "reason", reason, "regarding", refRegarding.Name)
		}
	}
}

// next returns the Event to write for an occurrence of k: a new Event, the Event of its series with the new
// count, or nil when the series was written less than refreshAfter ago.
func (r *Recorder) next(k key, eventType, action, reason string, regarding, related *corev1.ObjectReference, note string) *eventsv1.Event {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sweepLocked(now)
	s, ok := r.series[k]
	if !ok {
		s = series{first: now.UnixNano(), last: now.UnixNano(), written: now.UnixNano(), count: 1}
		r.series[k] = s
		return r.event(s, eventType, action, reason, regarding, related, note, now)
	}
	s.count++
	s.last = now.UnixNano()
	if s.count > 2 && now.Sub(time.Unix(0, s.written)) < refreshAfter {
		r.series[k] = s
		return nil
	}
	s.written = now.UnixNano()
	r.series[k] = s
	ev := r.event(s, eventType, action, reason, regarding, related, note, now)
	ev.Series = &eventsv1.EventSeries{Count: s.count, LastObservedTime: metav1.NewMicroTime(now)}
	return ev
}

// sweep forgets the series whose last occurrence is older than seriesWindow.
func (r *Recorder) sweep() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sweepLocked(r.now())
}

// sweepLocked sweeps, at most once a minute; r.mu is held.
func (r *Recorder) sweepLocked(now time.Time) {
	if now.Sub(r.lastSweep) < time.Minute {
		return
	}
	r.lastSweep = now
	live := func(s series) bool { return now.Sub(time.Unix(0, s.last)) <= seriesWindow }
	n := 0
	for _, s := range r.series {
		if live(s) {
			n++
		}
	}
	if n == len(r.series) {
		return
	}
	// Into a map of the survivors' size: a Go map never shrinks, and the
	// one a burst of Events grew would otherwise stay that large for good.
	kept := make(map[key]series, n)
	for k, s := range r.series {
		if live(s) {
			kept[k] = s
		}
	}
	r.series = kept
}

// remembered is how many series the recorder remembers.
func (r *Recorder) remembered() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.series)
}

func (r *Recorder) event(s series, eventType, action, reason string, regarding, related *corev1.ObjectReference, note string, now time.Time) *eventsv1.Event {
	namespace := regarding.Namespace
	if namespace == "" {
		namespace = metav1.NamespaceDefault
	}
	return &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: s.name(regarding.Name), Namespace: namespace},
		EventTime:           metav1.NewMicroTime(now),
		ReportingController: r.controller,
		ReportingInstance:   r.instance,
		Action:              action,
		Reason:              reason,
		Regarding:           *regarding,
		Related:             related,
		Note:                note,
		Type:                eventType,
	}
}

// Start writes the queued Events, writers at a time, until ctx ends; meanwhile it forgets, once a minute, the
// series past their window, even when no Event comes.
func (r *Recorder) Start(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	slots := make(chan struct{}, writers)
	sweep := time.NewTicker(time.Minute)
	defer sweep.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-sweep.C:
			r.sweep()
		case ev := <-r.queue:
			select {
			case <-ctx.Done():
				return nil
			case slots <- struct{}{}:
			}
			wg.Add(1)
			go func() {
				defer func() { <-slots; wg.Done() }()
				r.write(ctx, ev)
			}()
		}
	}
}

// NeedLeaderElection is false: whichever replica records an Event writes it.
func (*Recorder) NeedLeaderElection() bool { return false }

// write creates the Event, or patches the series of an Event that exists (creating it when it no longer does),
// trying again while the API server cannot be reached.
func (r *Recorder) write(ctx context.Context, ev *eventsv1.Event) {
	for try := 1; ; try++ {
		err := r.writeOnce(ctx, ev)
		var status apierrors.APIStatus
		switch {
		case err == nil:
			return
		case apierrors.IsAlreadyExists(err):
			if ev.Series == nil {
				return // written already
			}
			// The Event of the series did not exist, and was created meanwhile: patch it.
		case errors.As(err, &status):
			r.log.Error(err, "The API server refused an Event", "event", ev.Name, "namespace", ev.Namespace, "reason", ev.Reason)
			return
		}
		if try == maxTries {
			r.log.Error(err, "Could not write an Event", "event", ev.Name, "namespace", ev.Namespace, "reason", ev.Reason)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait.Jitter(retryAfter, 0.25)):
		}
	}
}

func (r *Recorder) writeOnce(ctx context.Context, ev *eventsv1.Event) error {
	if ev.Series != nil {
		patch := client.RawPatch("application/merge-patch+json", fmt.Appendf(nil,
			`{"series":{"count":%d,"lastObservedTime":%q}}`, ev.Series.Count, ev.Series.LastObservedTime.Format(metav1.RFC3339Micro)))
		err := r.client.Patch(ctx, &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: ev.Name, Namespace: ev.Namespace}}, patch)
		if !apierrors.IsNotFound(err) {
			return err
		}
	}
	return r.client.Create(ctx, ev.DeepCopy())
}
