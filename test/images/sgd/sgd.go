// Package sgd is the test trainers' training: data-parallel SGD on a synthetic linear regression whose rows are
// split between the ranks. Each step every rank computes the gradient of its rows, the gradients are summed by
// an all-reduce through one hub rank, and every rank applies the same update — so every rank prints the same
// `step N loss X` lines, and the loss goes down. How the ranks meet is the trainer's: torchtrainer meets at rank
// 0 (Rendezvous), mpitrainer's launcher dials every host of the MPI hostfile (NewHub, NewMember).
package sgd

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/optimization/search"
)

// Config is one rank's view of a torch job.
type Config struct {
	World, Rank            int
	MasterAddr, MasterPort string
	Options
}

// Options are the training's knobs, the same for every trainer.
type Options struct {
	Steps int
	// Pace is the least time a step takes, as if it computed more: long enough, a test can act while the
	// ranks train.
	Pace time.Duration
	// Timeout bounds the meeting of the ranks and each step's exchange.
	Timeout time.Duration
	// LearningRate is the step size of the updates; 0 is DefaultLearningRate.
	LearningRate float64
	// Progress, when set, is told after each step.
	Progress Progress
}

// DefaultLearningRate is the learning rate of a training that is not given one.
const DefaultLearningRate = 0.1

// LearningRateEnv is where an OptimizationJob's trial finds its learning rate: KEP-2605's variable of a
// parameter named lr.
var LearningRateEnv = search.EnvName("lr")

// OptionsFromEnv reads TRAINER_STEPS (default 20), TRAINER_STEP_PACE (default none), TRAINER_TIMEOUT
// (default 2m) and LearningRateEnv (default DefaultLearningRate).
func OptionsFromEnv(getenv func(string) string) (Options, error) {
	o := Options{Steps: 20, Timeout: 2 * time.Minute, LearningRate: DefaultLearningRate}
	if s := getenv(LearningRateEnv); s != "" {
		lr, err := strconv.ParseFloat(s, 64)
		if err != nil || !(lr > 0) || math.IsInf(lr, 0) {
			return o, fmt.Errorf("%s=%q: want a number > 0", LearningRateEnv, s)
		}
		o.LearningRate = lr
	}
	if s := getenv("TRAINER_STEPS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return o, fmt.Errorf("TRAINER_STEPS=%q: want a positive integer", s)
		}
		o.Steps = n
	}
	for _, d := range []struct {
		name string
		dst  *time.Duration
	}{{"TRAINER_STEP_PACE", &o.Pace}, {"TRAINER_TIMEOUT", &o.Timeout}} {
		if s := getenv(d.name); s != "" {
			v, err := time.ParseDuration(s)
			if err != nil || v < 0 {
				return o, fmt.Errorf("%s=%q: want a duration ≥ 0", d.name, s)
			}
			*d.dst = v
		}
	}
	return o, nil
}

const (
	features    = 4
	rowsPerRank = 64
)

// Group is one rank's links to the others: the hub, which sums, holds one connection to every other rank;
// every other rank holds one to the hub.
type Group struct {
	Rank, World int
	hub         bool
	conns       []net.Conn
	// timeout bounds each step's exchange: a rank that stops answering fails the others.
	timeout time.Duration
}

// NewHub is the group of the rank that sums, with a connection to each of the other ranks.
func NewHub(rank, world int, others []net.Conn, timeout time.Duration) *Group {
	return &Group{Rank: rank, World: world, hub: true, conns: others, timeout: timeout}
}

// NewMember is the group of a rank connected to the hub by conn.
func NewMember(rank, world int, conn net.Conn, timeout time.Duration) *Group {
	return &Group{Rank: rank, World: world, conns: []net.Conn{conn}, timeout: timeout}
}

// Close closes the group's connections.
func (g *Group) Close() {
	for _, c := range g.conns {
		c.Close()
	}
}

// Progress is told after each step its number and the mean loss; the trainers report it to the status server.
type Progress func(step int, loss float64)

// Train runs o.Steps steps of g's rank, printing `step N loss X` after each to out.
func Train(g *Group, o Options, out io.Writer) error {
	x, y := shard(g.Rank)
	w := make([]float64, features)
	lr := cmp.Or(o.LearningRate, DefaultLearningRate)
	for step := 1; step <= o.Steps; step++ {
		began := time.Now()
		grad, loss := gradient(x, y, w)
		// Sum of every rank's gradient and loss, then their mean.
		sum, err := g.allReduce(append(grad, loss))
		if err != nil {
			return fmt.Errorf("step %d: %w", step, err)
		}
		for i := range w {
			w[i] -= lr * sum[i] / float64(g.World)
		}
		mean := sum[features] / float64(g.World)
		fmt.Fprintf(out, "step %d loss %.6f\n", step, mean)
		if o.Progress != nil {
			o.Progress(step, mean)
		}
		time.Sleep(o.Pace - time.Since(began))
	}
	fmt.Fprintf(out, "rank %d done: w = %.4f\n", g.Rank, w)
	return nil
}

// trueWeights make the data: y = x·trueWeights + noise.
var trueWeights = [features]float64{2, -3, 0.5, 1}

// shard is rank's rows of the data set; every rank makes its own from the same seed.
func shard(rank int) ([][]float64, []float64) {
	rng := rand.New(rand.NewPCG(uint64(rank)+1, 42))
	x := make([][]float64, rowsPerRank)
	y := make([]float64, rowsPerRank)
	for r := range x {
		x[r] = make([]float64, features)
		for f := range x[r] {
			x[r][f] = rng.NormFloat64()
			y[r] += x[r][f] * trueWeights[f]
		}
		y[r] += 0.01 * rng.NormFloat64()
	}
	return x, y
}

// gradient is the gradient and value of the mean squared error of w on the rows x, y.
func gradient(x [][]float64, y []float64, w []float64) ([]float64, float64) {
	grad := make([]float64, len(w))
	var loss float64
	for r := range x {
		var pred float64
		for f := range w {
			pred += x[r][f] * w[f]
		}
		diff := pred - y[r]
		loss += diff * diff
		for f := range w {
			grad[f] += 2 * diff * x[r][f]
		}
	}
	n := float64(len(x))
	for f := range grad {
		grad[f] /= n
	}
	return grad, loss / n
}

// Rendezvous connects the ranks of a torch job at rank 0, the hub: rank 0 accepts one connection from each
// other rank (which says its rank first); every other rank connects to rank 0, retrying while the name does
// not resolve or rank 0 does not listen yet.
func Rendezvous(cfg Config) (*Group, error) {
	deadline := time.Now().Add(cfg.Timeout)
	addr := net.JoinHostPort(cfg.MasterAddr, cfg.MasterPort)
	if cfg.Rank != 0 {
		conn, err := Dial(addr, deadline)
		if err != nil {
			return nil, fmt.Errorf("rank 0 %w", err)
		}
		if err := binary.Write(conn, binary.BigEndian, int32(cfg.Rank)); err != nil {
			conn.Close()
			return nil, err
		}
		return NewMember(cfg.Rank, cfg.World, conn, cfg.Timeout), nil
	}
	l, err := net.Listen("tcp", net.JoinHostPort("", cfg.MasterPort))
	if err != nil {
		return nil, err
	}
	defer l.Close()
	peers := make([]net.Conn, cfg.World)
	for joined := 1; joined < cfg.World; {
		if err := l.(*net.TCPListener).SetDeadline(deadline); err != nil {
			return nil, err
		}
		conn, err := l.Accept()
		if err != nil {
			for _, p := range peers {
				if p != nil {
					p.Close() // the ranks that joined fail at once rather than at their timeout
				}
			}
			return nil, fmt.Errorf("waiting for %d of %d ranks: %w", cfg.World-joined, cfg.World-1, err)
		}
		var rank int32
		if err := binary.Read(conn, binary.BigEndian, &rank); err != nil || rank < 1 || int(rank) >= cfg.World || peers[rank] != nil {
			conn.Close()
			continue
		}
		peers[rank] = conn
		joined++
	}
	return NewHub(0, cfg.World, peers[1:], cfg.Timeout), nil
}

// Dial connects to addr, retrying until deadline while the name does not resolve or nothing listens yet (the
// other rank's pod may start later); the error says the address was unreachable.
func Dial(addr string, deadline time.Time) (net.Conn, error) {
	var last error
	for time.Now().Before(deadline) {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			return conn, nil
		}
		last = err
		time.Sleep(200 * time.Millisecond)
	}
	return nil, fmt.Errorf("at %s unreachable: %w", addr, last)
}

// allReduce returns the element-wise sum of v over all ranks: the other ranks send theirs to the hub, which
// sends the sum back.
func (g *Group) allReduce(v []float64) ([]float64, error) {
	deadline := time.Now().Add(g.timeout)
	if !g.hub {
		conn := g.conns[0]
		_ = conn.SetDeadline(deadline)
		if err := binary.Write(conn, binary.BigEndian, v); err != nil {
			return nil, fmt.Errorf("send to the hub: %w", err)
		}
		sum := make([]float64, len(v))
		if err := binary.Read(conn, binary.BigEndian, sum); err != nil {
			return nil, fmt.Errorf("receive from the hub: %w", err)
		}
		return sum, nil
	}
	sum := append([]float64(nil), v...)
	other := make([]float64, len(v))
	for _, conn := range g.conns {
		_ = conn.SetDeadline(deadline)
		if err := binary.Read(conn, binary.BigEndian, other); err != nil {
			return nil, fmt.Errorf("receive from %s: %w", conn.RemoteAddr(), err)
		}
		for j := range sum {
			sum[j] += other[j]
		}
	}
	for _, conn := range g.conns {
		if err := binary.Write(conn, binary.BigEndian, sum); err != nil {
			return nil, fmt.Errorf("send to %s: %w", conn.RemoteAddr(), err)
		}
	}
	for _, x := range sum {
		if math.IsNaN(x) {
			return nil, errors.New("the gradients diverged")
		}
	}
	return sum, nil
}

// StepLines returns the `step N loss X` lines of a rank's output, trimmed.
func StepLines(out string) []string {
	var lines []string
	for l := range strings.Lines(out) {
		if strings.HasPrefix(l, "step ") {
			lines = append(lines, strings.TrimSpace(l))
		}
	}
	return lines
}

// Loss is the X of a `step N loss X` line.
func Loss(line string) (float64, error) {
	f := strings.Fields(line)
	if len(f) != 4 || f[0] != "step" || f[2] != "loss" {
		return 0, fmt.Errorf("%q is not a step line", line)
	}
	return strconv.ParseFloat(f[3], 64)
}

// RunTorch is a torch job's rank from start to end: Rendezvous, then Train.
func RunTorch(cfg Config, out io.Writer) error {
	g, err := Rendezvous(cfg)
	if err != nil {
		return err
	}
	defer g.Close()
	fmt.Fprintf(out, "rank %d of %d: joined at %s\n", cfg.Rank, cfg.World, net.JoinHostPort(cfg.MasterAddr, cfg.MasterPort))
	return Train(g, cfg.Options, out)
}
