package logs

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// position is how far the log of one container of one pod has been printed: the timestamp of the last line
// printed and how many printed lines carry exactly that timestamp. A stream re-opened after a restart or a
// disconnect asks for the log since that timestamp (the API server rounds sinceTime down to the second) and
// skips what was printed already, as stern does. Timestamps keep rising across the runs of a container, so one
// position serves all of them.
type position struct {
	last time.Time
	same int
}

// resume filters the lines of one stream opened at a position.
type resume struct {
	pos  *position
	last time.Time
	skip int
}

func (p *position) resume() *resume { return &resume{pos: p, last: p.last, skip: p.same} }

// printable tells whether a line with timestamp ts is new, and if so records it as printed.
func (r *resume) printable(ts time.Time) bool {
	if !r.last.IsZero() {
		if ts.Before(r.last) {
			return false
		}
		if ts.Equal(r.last) && r.skip > 0 {
			r.skip--
			return false
		}
	}
	if ts.Equal(r.pos.last) {
		r.pos.same++
	} else {
		r.pos.last, r.pos.same = ts, 1
	}
	return true
}

// sinceTime is the sinceTime of a stream re-opened at this position, nil before anything was printed.
func (p *position) sinceTime() *metav1.Time {
	if p.last.IsZero() {
		return nil
	}
	return &metav1.Time{Time: p.last}
}

// splitTimestamp splits a line of a log read with timestamps=true into its timestamp and message.
func splitTimestamp(line string) (time.Time, string, bool) {
	ts, msg, ok := strings.Cut(line, " ")
	if !ok {
		ts, msg = line, ""
	}
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return time.Time{}, line, false
	}
	return t, msg, true
}

// printer writes whole lines of several streams to one writer, those that filter keeps.
type printer struct {
	mu         sync.Mutex
	out        io.Writer
	timestamps bool
	filter     lineFilter
}

// lineFilter is --grep and --invert: it keeps the lines whose message matches grep (does not, with invert).
// The zero lineFilter keeps every line.
type lineFilter struct {
	grep   *regexp.Regexp
	invert bool
}

// keeps tells whether a line with message msg is printed; the prefix and timestamp are not matched.
func (f lineFilter) keeps(msg string) bool {
	return f.grep == nil || f.grep.MatchString(msg) != f.invert
}

func (p *printer) line(prefix string, ts time.Time, msg string) {
	if !p.filter.keeps(msg) {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var b strings.Builder
	b.WriteString(prefix)
	if p.timestamps && !ts.IsZero() {
		b.WriteString(ts.UTC().Format(time.RFC3339Nano))
		b.WriteByte(' ')
	}
	b.WriteString(msg)
	b.WriteByte('\n')
	_, _ = io.WriteString(p.out, b.String())
}

// tail reads the log of one container of one pod.
type tail struct {
	client    kubernetes.Interface
	namespace string
	pod       string
	container string
	prefix    string
	out       *printer
	pos       position

	// from applies to the first read of the current run only; later reads resume from pos.
	from  readFrom
	first bool
}

// readFrom is where the first read of a log begins: --since or --since-time, and --tail.
type readFrom struct {
	sinceSeconds *int64
	sinceTime    *metav1.Time
	tailLines    *int64
	// previous: the first read is of the previous instance (--previous, --failed), and --tail applies to it.
	previous bool
}

func newTail(client kubernetes.Interface, namespace, pod, container, prefix string, out *printer, from readFrom) *tail {
	return &tail{client: client, namespace: namespace, pod: pod, container: container, prefix: prefix, out: out, from: from, first: true}
}

// read streams the log once: the current run of the container, or the previous one; until its end, or with
// follow until the stream or ctx ends. Lines already printed are skipped.
func (t *tail) read(ctx context.Context, follow, previous bool) error {
	opts := &corev1.PodLogOptions{Container: t.container, Follow: follow, Previous: previous, Timestamps: true}
	if since := t.pos.sinceTime(); since != nil {
		opts.SinceTime = since
	} else {
		opts.SinceSeconds, opts.SinceTime = t.from.sinceSeconds, t.from.sinceTime
		if t.first && previous == t.from.previous {
			opts.TailLines = t.from.tailLines
		}
	}
	if previous == t.from.previous {
		t.first = false
	}
	stream, err := t.client.CoreV1().Pods(t.namespace).GetLogs(t.pod, opts).Stream(ctx)
	if err != nil {
		return err
	}
	defer stream.Close()
	r := bufio.NewReader(stream)
	filter := t.pos.resume()
	for {
		line, err := r.ReadString('\n')
		complete := strings.HasSuffix(line, "\n")
		// A line cut short by a cancelled stream is read again when the stream is re-opened.
		if line != "" && (complete || err == io.EOF) {
			ts, msg, ok := splitTimestamp(strings.TrimSuffix(line, "\n"))
			if !ok || filter.printable(ts) {
				t.out.line(t.prefix, ts, msg)
			}
		}
		switch {
		case err == nil:
		case errors.Is(err, io.EOF):
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		default:
			return fmt.Errorf("read the log of pod %s container %s: %w", t.pod, t.container, err)
		}
	}
}
