package sgd

import (
	"bytes"
	"math"
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

// TestLearningRateFromEnv: an OptimizationJob's trial sets the learning rate through KUBEFLOW_TRAINER_OPT_LR
// (KEP-2605's variable of the parameter lr); without it the rate is the default.
func TestLearningRateFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		want        float64
		wantErr     string
	}{
		{name: "unset", want: DefaultLearningRate},
		{name: "set", value: "0.0125", want: 0.0125},
		{name: "exponent", value: "1e-3", want: 0.001},
		{name: "not a number", value: "fast", wantErr: `KUBEFLOW_TRAINER_OPT_LR="fast": want a number > 0`},
		{name: "zero", value: "0", wantErr: `KUBEFLOW_TRAINER_OPT_LR="0": want a number > 0`},
		{name: "infinite", value: "Inf", wantErr: `KUBEFLOW_TRAINER_OPT_LR="Inf": want a number > 0`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := OptionsFromEnv(func(name string) string {
				if name == "KUBEFLOW_TRAINER_OPT_LR" {
					return tc.value
				}
				return ""
			})
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("got error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if o.LearningRate != tc.want {
				t.Errorf("LearningRate = %v, want %v", o.LearningRate, tc.want)
			}
		})
	}
}

// TestLearningRateChangesTheLoss: the rate is the one the steps use, so a search over it finds a lower loss:
// after 10 steps a rate of 0.1 ends far lower than one of 0.001, and both report their loss after every step.
func TestLearningRateChangesTheLoss(t *testing.T) {
	final := map[float64]float64{}
	for _, lr := range []float64{0.001, 0.1} {
		g := NewHub(0, 1, nil, time.Second)
		var reported []float64
		o := Options{Steps: 10, LearningRate: lr, Progress: func(_ int, loss float64) { reported = append(reported, loss) }}
		var out bytes.Buffer
		if err := Train(g, o, &out); err != nil {
			t.Fatal(err)
		}
		lines := StepLines(out.String())
		if len(reported) != 10 || len(lines) != 10 {
			t.Fatalf("lr %v: %d reports and %d step lines, want 10 of each", lr, len(reported), len(lines))
		}
		if printed := lossOf(t, lines[9]); math.Abs(printed-reported[9]) > 1e-6 {
			t.Errorf("lr %v: step 10 printed loss %v, reported %v", lr, printed, reported[9])
		}
		final[lr] = reported[9]
	}
	if !(final[0.1] < final[0.001]/10) {
		t.Errorf("after 10 steps: loss %v at lr 0.1, %v at lr 0.001; want the first ten times lower", final[0.1], final[0.001])
	}
}
