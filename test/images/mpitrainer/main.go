// Command mpitrainer is the MPI-shaped test trainer for the real node: the same data-parallel SGD as
// torchtrainer (package sgd), with the ranks met the way an MPI job's are — the launcher reads the hostfile the
// MPI plugin mounts and reaches every host in it by name, over plain TCP where mpirun would use SSH.
//
//	mpitrainer          the launcher: reads the hostfile at $OMPI_MCA_orte_default_hostfile (one `host slots=N`
//	                    line per rank; its own host is one of them), reaches the others at port 2222
//	mpitrainer worker   a node: listens at port 2222, where the deepspeed runtime's readiness probe looks for
//	                    sshd, and trains as the launcher tells it
//
// The launcher gives every host its rank (its line in the hostfile) and the training's options, and sums the
// gradients. Every rank prints the same `step N loss X` lines; the launcher reports the progress to the status
// server when the TrainJobStatus plugin says where it is. It exits 0 when done and 1 when a rank cannot be
// reached or drops out.
package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/kubectl-trainjob/kubectl-trainjob/test/images/progress"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/images/sgd"
)

// port is where the workers listen, sshd's port in the deepspeed runtime.
const port = "2222"

func main() {
	opts, err := sgd.OptionsFromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mpitrainer:", err)
		os.Exit(2)
	}
	if len(os.Args) > 1 && os.Args[1] == "worker" {
		err = work(":"+port, opts.Timeout, os.Stdout)
	} else {
		err = launch(opts)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mpitrainer:", err)
		os.Exit(1)
	}
}

func launch(opts sgd.Options) error {
	file := os.Getenv("OMPI_MCA_orte_default_hostfile")
	if file == "" {
		return errors.New("OMPI_MCA_orte_default_hostfile is not set: the launcher reads the hostfile the MPI plugin mounts")
	}
	hosts, err := readHostfile(file)
	if err != nil {
		return err
	}
	self, err := os.Hostname()
	if err != nil {
		return err
	}
	if opts.Progress, err = progress.Steps(os.Getenv, opts.Steps, os.Stderr); err != nil {
		return err
	}
	return runLauncher(hosts, self, port, opts, os.Stdout)
}

// readHostfile returns the hosts of an MPI hostfile, one rank each.
func readHostfile(file string) ([]string, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var hosts []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		for _, f := range fields[1:] {
			if f != "slots=1" {
				return nil, fmt.Errorf("hostfile %s: %q: this trainer runs one rank per host (slots=1)", file, line)
			}
		}
		hosts = append(hosts, fields[0])
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(hosts) == 0 {
		return nil, fmt.Errorf("hostfile %s lists no host", file)
	}
	return hosts, nil
}

// header is what the launcher tells each worker.
type header struct {
	Rank, World, Steps int64
	Pace, Timeout      int64 // nanoseconds
}

// runLauncher reaches every host but self (its name, or the first label of its name) at port, tells it its
// rank, and trains as the hub.
func runLauncher(hosts []string, self, port string, opts sgd.Options, out io.Writer) error {
	rank := -1
	for i, h := range hosts {
		if h == self || strings.Split(h, ".")[0] == self {
			rank = i
		}
	}
	if rank < 0 {
		return fmt.Errorf("this host, %s, is not in the hostfile %v", self, hosts)
	}
	deadline := time.Now().Add(opts.Timeout)
	var conns []net.Conn
	for i, h := range hosts {
		if i == rank {
			continue
		}
		conn, err := sgd.Dial(net.JoinHostPort(h, port), deadline)
		if err == nil {
			err = binary.Write(conn, binary.BigEndian, header{Rank: int64(i), World: int64(len(hosts)), Steps: int64(opts.Steps),
				Pace: int64(opts.Pace), Timeout: int64(opts.Timeout)})
		}
		if err != nil {
			for _, c := range append(conns, conn) {
				if c != nil {
					c.Close()
				}
			}
			return fmt.Errorf("launcher: host %s (rank %d) %w", h, i, err)
		}
		conns = append(conns, conn)
	}
	g := sgd.NewHub(rank, len(hosts), conns, opts.Timeout)
	defer g.Close()
	fmt.Fprintf(out, "launcher, rank %d of %d: reached %s\n", rank, len(hosts), strings.Join(hosts, ", "))
	return sgd.Train(g, opts, out)
}

// work listens at addr for the launcher until timeout, then trains as it says. It keeps answering connections
// that say nothing (the readiness probe's) while it trains, as sshd would.
func work(addr string, timeout time.Duration, out io.Writer) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	defer l.Close()
	if err := l.(*net.TCPListener).SetDeadline(time.Now().Add(timeout)); err != nil {
		return err
	}
	for {
		conn, err := l.Accept()
		if err != nil {
			return fmt.Errorf("worker: no launcher reached %s within %v: %w", addr, timeout, err)
		}
		var h header
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		if err := binary.Read(conn, binary.BigEndian, &h); err != nil || h.Rank < 0 || h.Rank >= h.World || h.Steps < 1 {
			conn.Close() // a probe, or not a launcher
			continue
		}
		_ = conn.SetReadDeadline(time.Time{})
		_ = l.(*net.TCPListener).SetDeadline(time.Time{})
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		g := sgd.NewMember(int(h.Rank), int(h.World), conn, time.Duration(h.Timeout))
		defer g.Close()
		fmt.Fprintf(out, "worker, rank %d of %d: reached by the launcher from %s\n", h.Rank, h.World, conn.RemoteAddr())
		return sgd.Train(g, sgd.Options{Steps: int(h.Steps), Pace: time.Duration(h.Pace), Timeout: time.Duration(h.Timeout)}, out)
	}
}
