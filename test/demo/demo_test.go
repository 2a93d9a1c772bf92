package main

import (
	"bytes"
	"strings"
	"sync"
	"testing"

	"github.com/kubectl-trainjob/kubectl-trainjob/test/stack"
)

// TestNoWait runs the demo as `make demo DEMO_ARGS=--no-wait` does, on a cluster of its own: the sample
// TrainJob reaches Complete and everything stops.
func TestNoWait(t *testing.T) {
	dir := t.TempDir()
	binary, err := stack.Binary(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	out := &syncBuffer{}
	err = run(t.Context(), options{noWait: true, binary: binary, dir: dir, out: out})
	t.Logf("demo output:\n%s", out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Initializing", "Training", "TrainJob default/demo is Complete"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the demo's output lacks %q", want)
		}
	}
}

// syncBuffer is a bytes.Buffer that the demo's goroutines may write to at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
