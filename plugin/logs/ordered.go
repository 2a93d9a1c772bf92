package logs

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
)

// stream is one container's log to read, and the prefix of its lines.
type stream struct {
	pod, container string
	prefix         string
}

// readInOrder reads the logs of streams (of their previous instances with previous), at most
// --max-log-requests at once, and prints each whole, in the order of streams: the first as its lines come, the
// next ones as soon as those before them are done. A thousand ranks are read sixteen at a time, and their
// lines never interleave.
func (o *LogsOptions) readInOrder(parent context.Context, streams []stream, previous bool) error {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	out := newOrdered(o.Out, o.MaxLogRequests)
	errs := make([]error, len(streams))
	var wg sync.WaitGroup
	for i, s := range streams {
		if !out.wait(ctx, i) {
			break
		}
		p := o.printer()
		p.out = out.writer(i)
		tl := newTail(o.clientset, o.Namespace, s.pod, s.container, s.prefix, p, o.from(previous))
		wg.Go(func() {
			defer out.finish(i)
			if errs[i] = tl.read(ctx, false, previous); errs[i] != nil {
				cancel()
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		// A read that failed cancelled the others: its error is the cause.
		if err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
	}
	return parent.Err()
}

// ordered writes the output of numbered streams to out in their order: the stream at the head goes straight
// through, the others are held until the streams before them finish. At most window streams are started
// beyond the head (wait), which bounds both the requests at once and what is held.
type ordered struct {
	mu     sync.Mutex
	cond   *sync.Cond
	out    io.Writer
	window int
	head   int
	held   map[int]*bytes.Buffer
	done   map[int]bool
}

func newOrdered(out io.Writer, window int) *ordered {
	o := &ordered{out: out, window: window, held: map[int]*bytes.Buffer{}, done: map[int]bool{}}
	o.cond = sync.NewCond(&o.mu)
	return o
}

// wait blocks until stream i may start: fewer than window streams are started and not yet printed. It tells
// false when ctx ended.
func (o *ordered) wait(ctx context.Context, i int) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for i >= o.head+o.window && ctx.Err() == nil {
		o.cond.Wait()
	}
	return ctx.Err() == nil
}

// writer is stream i's writer.
func (o *ordered) writer(i int) io.Writer { return streamWriter{o, i} }

type streamWriter struct {
	o *ordered
	i int
}

func (w streamWriter) Write(p []byte) (int, error) {
	o := w.o
	o.mu.Lock()
	defer o.mu.Unlock()
	if w.i == o.head {
		return o.out.Write(p)
	}
	b := o.held[w.i]
	if b == nil {
		b = &bytes.Buffer{}
		o.held[w.i] = b
	}
	return b.Write(p)
}

// finish marks stream i done, and moves the head past every done stream, writing out what each held.
func (o *ordered) finish(i int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.done[i] = true
	for o.done[o.head] {
		delete(o.done, o.head)
		o.head++
		if b := o.held[o.head]; b != nil {
			_, _ = o.out.Write(b.Bytes())
			delete(o.held, o.head)
		}
	}
	o.cond.Broadcast()
}
