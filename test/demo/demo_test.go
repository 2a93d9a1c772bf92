package main

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/kubectl-trainjob/kubectl-trainjob/test/stack"
)

// demoTimeout is the demo's deadline in the test: the demo's default, which a busy machine needs.
const demoTimeout = defaultTimeout

// TestNoWait runs the demo as `make demo DEMO_ARGS=--no-wait` does, on a cluster of its own: the sample
// TrainJob is followed through the stages Initializing, Training and Complete, in that order, as `status -w`
// prints them, and everything stops.
func TestNoWait(t *testing.T) {
	dir := t.TempDir()
	binary, err := stack.Binary(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	out := &syncBuffer{}
	err = run(t.Context(), options{noWait: true, timeout: demoTimeout, binary: binary, dir: dir, out: out})
	t.Logf("demo output:\n%s", out)
	if err != nil {
		t.Fatal(err)
	}
	if err := stagesInOrder(out.String()); err != nil {
		t.Error(err)
	}
	if !strings.Contains(out.String(), "\nTrainJob default/demo is Complete, ") {
		t.Errorf("the demo's output does not say that the TrainJob is Complete")
	}
}

// stageLine is a line `status -w` prints off a terminal for a change of stage (`16:23:26  +7s  Training
// running node (4/4 pods running)`) or a condition (`… Complete=True  AllJobsCompleted: …`): time, time since
// creation, then what changed. The demo's own progress lines (`==> [3] Applying the TrainingRuntime …`) are not.
var stageLine = regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d  \+\S+ +(\S+)  `)

// stagesInOrder checks that the demo's output has stage lines for Initializing, Training and Complete=True,
// each first seen after the one before.
func stagesInOrder(out string) error {
	first := map[string]int{}
	for i, m := range stageLine.FindAllStringSubmatch(out, -1) {
		if _, ok := first[m[1]]; !ok {
			first[m[1]] = i
		}
	}
	prev := ""
	for _, want := range []string{"Initializing", "Training", "Complete=True"} {
		i, ok := first[want]
		switch {
		case !ok:
			return fmt.Errorf("status -w printed no %s line (stage lines: %v)", want, stageLine.FindAllString(out, -1))
		case prev != "" && i < first[prev]:
			return fmt.Errorf("status -w printed %s before %s (stage lines: %v)", want, prev, stageLine.FindAllString(out, -1))
		}
		prev = want
	}
	return nil
}

// TestStagesInOrder: the demo test's stage check fails on what it must fail on.
func TestStagesInOrder(t *testing.T) {
	const (
		progress     = "==> [3] Applying the TrainingRuntime test/demo/runtime.yaml: Initializing, Training\n"
		initializing = "16:23:21  +2s       Initializing  running dataset-initializer (1/1 pods running)\n"
		training     = "16:23:26  +7s       Training  running node (4/4 pods running)\n"
		complete     = "16:23:34  +15s      Complete=True  AllJobsCompleted: jobset completed successfully\n"
	)
	for _, tc := range []struct {
		name, out string
		ok        bool
	}{
		{"every stage in order", progress + initializing + training + complete, true},
		{"stage names in progress lines only", progress + initializing + complete, false},
		{"Training after Complete", progress + initializing + complete + training, false},
		{"no Complete", progress + initializing + training, false},
	} {
		if err := stagesInOrder(tc.out); (err == nil) != tc.ok {
			t.Errorf("%s: stagesInOrder = %v, want ok=%v", tc.name, err, tc.ok)
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
