package sgd

import (
	"bytes"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
)

// runRanks runs the given ranks of a job of world ranks and returns each one's output and error.
func runRanks(t *testing.T, world int, ranks []int, timeout time.Duration) ([]string, []error) {
	t.Helper()
	port := strconv.Itoa(cluster.FreePortFor(t))
	outs, errs := make([]string, len(ranks)), make([]error, len(ranks))
	var wg sync.WaitGroup
	for i, rank := range ranks {
		wg.Go(func() {
			var out bytes.Buffer
			errs[i] = RunTorch(Config{World: world, Rank: rank, MasterAddr: "127.0.0.1", MasterPort: port, Options: Options{Steps: 10, Timeout: timeout}}, &out)
			outs[i] = out.String()
		})
	}
	wg.Wait()
	return outs, errs
}

func TestThreeRanksTrainTogether(t *testing.T) {
	outs, errs := runRanks(t, 3, []int{0, 1, 2}, 30*time.Second)
	for rank, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v\n%s", rank, err, outs[rank])
		}
	}
	want := StepLines(outs[0])
	if len(want) != 10 {
		t.Fatalf("rank 0 printed %d step lines, want 10:\n%s", len(want), outs[0])
	}
	for rank := 1; rank < 3; rank++ {
		if got := strings.Join(StepLines(outs[rank]), "\n"); got != strings.Join(want, "\n") {
			t.Errorf("rank %d's steps differ from rank 0's:\n%s\nrank 0:\n%s", rank, got, strings.Join(want, "\n"))
		}
	}
	first, last := lossOf(t, want[0]), lossOf(t, want[len(want)-1])
	if !(last < first/10) {
		t.Errorf("loss went from %v to %v: want it to fall tenfold", first, last)
	}
}

func lossOf(t *testing.T, line string) float64 {
	t.Helper()
	v, err := Loss(line)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestMissingRankFailsEveryone(t *testing.T) {
	// Rank 2 never starts: rank 0 gives up waiting for it, and rank 1, which joined, loses rank 0.
	outs, errs := runRanks(t, 3, []int{0, 1}, time.Second)
	if errs[0] == nil || !strings.Contains(errs[0].Error(), "waiting for 1 of 2 ranks") {
		t.Errorf("rank 0: got %v, want it to give up waiting for rank 2\n%s", errs[0], outs[0])
	}
	if errs[1] == nil {
		t.Errorf("rank 1 succeeded without rank 2:\n%s", outs[1])
	}
}

func TestUnreachableMaster(t *testing.T) {
	_, errs := runRanks(t, 2, []int{1}, 500*time.Millisecond)
	if errs[0] == nil || !strings.Contains(errs[0].Error(), "unreachable") {
		t.Errorf("got %v, want rank 0 unreachable", errs[0])
	}
}
