// Package sgd is the torchtrainer's training: data-parallel SGD on a synthetic linear regression, with the
// gradients averaged across ranks by an all-reduce over TCP through rank 0.
package sgd

import (
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
)

// Config is one rank's view of the job.
type Config struct {
	World, Rank            int
	MasterAddr, MasterPort string
	Steps                  int
	// Timeout bounds the rendezvous and each step's exchange.
	Timeout time.Duration
}

const (
	features     = 4
	rowsPerRank  = 64
	learningRate = 0.1
)

// Train runs cfg's rank to the end, printing `step N loss X` after each step to out.
func Train(cfg Config, out io.Writer) error {
	peers, err := rendezvous(cfg)
	if err != nil {
		return err
	}
	defer func() {
		for _, p := range peers {
			p.Close()
		}
	}()
	fmt.Fprintf(out, "rank %d of %d: joined at %s\n", cfg.Rank, cfg.World, net.JoinHostPort(cfg.MasterAddr, cfg.MasterPort))
	x, y := shard(cfg.Rank)
	w := make([]float64, features)
	for step := 1; step <= cfg.Steps; step++ {
		grad, loss := gradient(x, y, w)
		// Sum of every rank's gradient and loss, then their mean.
		sum, err := allReduce(cfg, peers, append(grad, loss))
		if err != nil {
			return fmt.Errorf("step %d: %w", step, err)
		}
		for i := range w {
			w[i] -= learningRate * sum[i] / float64(cfg.World)
		}
		fmt.Fprintf(out, "step %d loss %.6f\n", step, sum[features]/float64(cfg.World))
	}
	fmt.Fprintf(out, "rank %d done: w = %.4f\n", cfg.Rank, w)
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

// rendezvous connects the ranks: rank 0 accepts one connection from each other rank (which says its rank
// first) and returns them by rank; every other rank returns its one connection to rank 0, retrying while the
// name does not resolve or rank 0 does not listen yet.
func rendezvous(cfg Config) ([]net.Conn, error) {
	deadline := time.Now().Add(cfg.Timeout)
	addr := net.JoinHostPort(cfg.MasterAddr, cfg.MasterPort)
	if cfg.Rank != 0 {
		var last error
		for time.Now().Before(deadline) {
			conn, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				if err := binary.Write(conn, binary.BigEndian, int32(cfg.Rank)); err != nil {
					conn.Close()
					return nil, err
				}
				return []net.Conn{conn}, nil
			}
			last = err
			time.Sleep(200 * time.Millisecond)
		}
		return nil, fmt.Errorf("rank 0 at %s unreachable for %v: %w", addr, cfg.Timeout, last)
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
	return peers[1:], nil
}

// allReduce returns the element-wise sum of v over all ranks: the other ranks send theirs to rank 0, which
// sends the sum back.
func allReduce(cfg Config, peers []net.Conn, v []float64) ([]float64, error) {
	deadline := time.Now().Add(cfg.Timeout)
	if cfg.Rank != 0 {
		conn := peers[0]
		_ = conn.SetDeadline(deadline)
		if err := binary.Write(conn, binary.BigEndian, v); err != nil {
			return nil, fmt.Errorf("send to rank 0: %w", err)
		}
		sum := make([]float64, len(v))
		if err := binary.Read(conn, binary.BigEndian, sum); err != nil {
			return nil, fmt.Errorf("receive from rank 0: %w", err)
		}
		return sum, nil
	}
	sum := append([]float64(nil), v...)
	other := make([]float64, len(v))
	for i, conn := range peers {
		_ = conn.SetDeadline(deadline)
		if err := binary.Read(conn, binary.BigEndian, other); err != nil {
			return nil, fmt.Errorf("receive from rank %d: %w", i+1, err)
		}
		for j := range sum {
			sum[j] += other[j]
		}
	}
	for i, conn := range peers {
		if err := binary.Write(conn, binary.BigEndian, sum); err != nil {
			return nil, fmt.Errorf("send to rank %d: %w", i+1, err)
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
