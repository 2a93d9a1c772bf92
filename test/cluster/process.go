package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// stopTimeout is how long a component may take to exit after SIGTERM before it is killed.
const stopTimeout = 10 * time.Second

// restartLimit is how many times startProcess starts a control-plane component again that exited on its own,
// as the kubelet restarts a static pod's container (restartPolicy Always), the first time after restartBackoff
// and then after twice as long each time. A component dies in a real cluster too — KWOK v0.8.0 at times at its
// start, of a race in a library it uses (fatal error: concurrent map writes, in easycel's type registry) — and
// what the cluster runs must not be lost for good with it; one that keeps exiting fails the cluster's checks
// (waitUntil) once it has been started restartLimit times more, its log saying every exit.
const restartLimit = 3

// restartBackoff is the wait before the first restart (a variable for the tests).
var restartBackoff = time.Second

// process is one component the cluster started and must stop.
type process struct {
	name string
	done chan struct{} // closed once the process has exited for good
	err  error         // how it last exited; read only after done is closed

	// respawn starts the component again (nil: it is not restarted); the n-th restart is told n.
	respawn  func(n int) (*exec.Cmd, error)
	stopping chan struct{} // closed by stop: no more restarts

	mu       sync.Mutex
	cmd      *exec.Cmd // the running process
	restarts int
	stopped  bool
}

// startProcess starts a component in its own process group (so a Ctrl-C meant for its parent does not reach it
// before Stop does), with its output in LogDir/<name>.log, and starts it again when it exits on its own
// (restartLimit). It gets SIGKILL when the process that started it dies, so no component outlives a crashed or
// killed test. (Linux sends that signal when the starting OS thread exits; the Go runtime keeps its threads
// unless a goroutine exits while locked to one.)
func (c *Cluster) startProcess(name, binary string, args, env []string) (*process, error) {
	out, err := c.openLog(name)
	if err != nil {
		return nil, err
	}
	logPath := out.Name()
	cmd, err := startCommand(out, name, binary, args, env)
	if err != nil {
		return nil, err
	}
	p := newProcess(name, cmd, func(n int) (*exec.Cmd, error) {
		out, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return nil, fmt.Errorf("restart %s: %w", name, err)
		}
		if _, err := fmt.Fprintf(out, "# restart %d of %d\n", n, restartLimit); err != nil {
			out.Close()
			return nil, err
		}
		return startCommand(out, name, binary, args, env)
	})
	c.procs = append(c.procs, p)
	return p, nil
}

// startLogged starts a component as startProcess does, writing its output to out, which it closes; it is not
// started again when it exits (the real node's programs, whose exit a test watches).
func startLogged(out *os.File, name, binary string, args, env []string) (*process, error) {
	cmd, err := startCommand(out, name, binary, args, env)
	if err != nil {
		return nil, err
	}
	return newProcess(name, cmd, nil), nil
}

// startCommand starts binary in its own process group, with its output written to out, which it closes.
func startCommand(out *os.File, name, binary string, args, env []string) (*exec.Cmd, error) {
	defer out.Close() // the child has its own copy

	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if _, err := fmt.Fprintf(out, "# %s\n", strings.Join(cmd.Args, " ")); err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	return cmd, nil
}

// newProcess watches cmd, which has started, and starts it again with respawn (when not nil) each time it
// exits on its own, up to restartLimit times.
func newProcess(name string, cmd *exec.Cmd, respawn func(n int) (*exec.Cmd, error)) *process {
	p := &process{name: name, cmd: cmd, respawn: respawn, done: make(chan struct{}), stopping: make(chan struct{})}
	go p.supervise()
	return p
}

// supervise waits for the running process to exit and, unless it was stopped or has been restarted
// restartLimit times, starts it again after the backoff.
func (p *process) supervise() {
	defer close(p.done)
	for {
		p.mu.Lock()
		cmd := p.cmd
		p.mu.Unlock()
		p.err = cmd.Wait()

		p.mu.Lock()
		n := p.restarts + 1
		if p.respawn == nil || p.stopped || n > restartLimit {
			if p.respawn != nil && n > restartLimit {
				p.err = fmt.Errorf("%w, after %d restarts", p.err, p.restarts)
			}
			p.mu.Unlock()
			return
		}
		p.restarts = n
		p.mu.Unlock()

		select {
		case <-p.stopping:
			return
		case <-time.After(restartBackoff << (n - 1)):
		}
		p.mu.Lock()
		if p.stopped {
			p.mu.Unlock()
			return
		}
		next, err := p.respawn(n)
		if err != nil {
			p.err = err
			p.mu.Unlock()
			return
		}
		p.cmd = next
		p.mu.Unlock()
	}
}

// exited returns an error if the process has exited for good, nil while it runs or is being restarted.
func (p *process) exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited: %v", p.name, p.err)
	default:
		return nil
	}
}

// stop sends SIGTERM to the process group, and SIGKILL if it has not exited within stopTimeout; it is not
// started again.
func (p *process) stop() error {
	p.mu.Lock()
	if !p.stopped {
		p.stopped = true
		close(p.stopping)
	}
	cmd := p.cmd
	p.mu.Unlock()
	if p.exited() != nil {
		return nil
	}
	pgid := -cmd.Process.Pid
	if err := syscall.Kill(pgid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("stop %s: %w", p.name, err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(stopTimeout):
	}
	if err := syscall.Kill(pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill %s: %w", p.name, err)
	}
	<-p.done
	return fmt.Errorf("%s did not exit within %v of SIGTERM and was killed", p.name, stopTimeout)
}

// KillComponent kills a component this package started (kube-controller-manager, kube-scheduler, kwok, jobset,
// kueue) with SIGKILL, as a crash or the OOM killer would, and returns once it has exited; it is started again
// (restartLimit).
func (c *Cluster) KillComponent(ctx context.Context, name string) error {
	for _, p := range c.procs {
		if p.name != name {
			continue
		}
		p.mu.Lock()
		cmd, restarts := p.cmd, p.restarts
		p.mu.Unlock()
		if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
			return fmt.Errorf("kill %s: %w", name, err)
		}
		return wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, stopTimeout, true, func(context.Context) (bool, error) {
			p.mu.Lock()
			defer p.mu.Unlock()
			return p.restarts > restarts || p.exited() != nil, nil
		})
	}
	return fmt.Errorf("no component %q: the cluster runs %v", name, c.components)
}

// openLog creates (or truncates) LogDir/<name>.log.
func (c *Cluster) openLog(name string) (*os.File, error) {
	f, err := os.Create(filepath.Join(c.LogDir, name+".log"))
	if err != nil {
		return nil, fmt.Errorf("create log of %s: %w", name, err)
	}
	c.components = append(c.components, name)
	return f, nil
}

// withDeathSignal writes a script that runs binary with the parent-death signal set to SIGKILL, for the
// processes envtest starts (it offers no way to set SysProcAttr). setpriv execs, so the component keeps the
// script's pid and its parent stays the process that started it.
func (c *Cluster) withDeathSignal(binary string) (string, error) {
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		return "", fmt.Errorf("setpriv (util-linux) is needed to tie etcd and kube-apiserver to this process: %w", err)
	}
	dir := filepath.Join(c.Dir, "bin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	script := filepath.Join(dir, filepath.Base(binary))
	body := fmt.Sprintf("#!/bin/sh\nexec %s --pdeathsig KILL -- %s \"$@\"\n", setpriv, binary)
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		return "", err
	}
	return script, nil
}

// waitUntil polls cond every 100ms until it is true, ctx ends or timeout passes. It fails at once if one of
// procs has exited, since whatever cond waits for will then never happen.
func waitUntil(ctx context.Context, timeout time.Duration, what string, procs []*process, cond func(context.Context) (bool, error)) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		for _, p := range procs {
			if err := p.exited(); err != nil {
				return false, err
			}
		}
		ok, err := cond(ctx)
		if err != nil {
			last = err
		}
		return ok, nil
	})
	if err != nil {
		if last != nil {
			return fmt.Errorf("waiting for %s: %w (last error: %v)", what, err, last)
		}
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	return nil
}

// httpOK reports whether GET url answers 200. Components serve health endpoints with self-signed certificates.
func httpOK(ctx context.Context, url string) (bool, error) {
	client := &http.Client{
		Timeout:   time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // loopback health check
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return true, nil
}

// tlsServing reports whether a TLS server answers a handshake at addr.
func tlsServing(ctx context.Context, addr string) (bool, error) {
	d := tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // loopback readiness check
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false, err
	}
	return true, conn.Close()
}

// Ports for the programs that take a port number, not a listener (kube-controller-manager, kube-scheduler,
// KWOK). A port the kernel picked for a listener and that was closed again can be handed out at once as the
// local port of an outgoing connection, or to another test package running at the same time, before the
// program binds it. So these ports come from outside the kernel's ephemeral range (ip_local_port_range,
// 32768–60999 by default), which no outgoing connection takes: the 12 768 ports below it (not below 10 000),
// or the ports above it where it starts too low. Each is reserved across the processes of this machine by a
// file created exclusively in portDir, holding the reserving process's id; a reservation whose process is
// gone is taken over.
const (
	portFloor    = 10000
	portSpan     = 12768
	portsAtLeast = 1000
)

var (
	portDir          = filepath.Join(os.TempDir(), "trainjob-ports")
	ipLocalPortRange = "/proc/sys/net/ipv4/ip_local_port_range"
)

// FreePort returns a TCP port on 127.0.0.1, free now and reserved for this process.
func FreePort() (int, error) {
	first, last, err := freePortRange()
	if err != nil {
		return 0, err
	}
	if err := os.MkdirAll(portDir, 0o755); err != nil {
		return 0, err
	}
	for range 1000 {
		port := first + rand.IntN(last-first+1)
		if !reservePort(port) {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue // another program has it; the reservation stays, unused
		}
		if err := l.Close(); err != nil {
			return 0, err
		}
		return port, nil
	}
	return 0, fmt.Errorf("no free port in %d–%d", first, last)
}

// freePortRange is where FreePort picks its ports: below the kernel's ephemeral range, or above it.
func freePortRange() (first, last int, err error) {
	ephemeralFirst, ephemeralLast, err := ephemeralPorts()
	if err != nil {
		return 0, 0, err
	}
	if first, last = max(portFloor, ephemeralFirst-portSpan), ephemeralFirst-1; last-first+1 >= portsAtLeast {
		return first, last, nil
	}
	if first, last = ephemeralLast+1, min(65535, ephemeralLast+portSpan); last-first+1 >= portsAtLeast {
		return first, last, nil
	}
	return 0, 0, fmt.Errorf("the ephemeral port range %d–%d (net.ipv4.ip_local_port_range) leaves no %d ports above %d outside it", ephemeralFirst, ephemeralLast, portsAtLeast, portFloor)
}

// FreePorts returns n distinct ports of FreePort.
func FreePorts(n int) ([]int, error) {
	ports := make([]int, n)
	for i := range ports {
		port, err := FreePort()
		if err != nil {
			return nil, err
		}
		ports[i] = port
	}
	return ports, nil
}

// EphemeralPortsFirst is the first port of the kernel's ephemeral range, from which it hands out the local
// ports of outgoing connections (and of listeners on port 0).
func EphemeralPortsFirst() (int, error) {
	first, _, err := ephemeralPorts()
	return first, err
}

// ephemeralPorts is the kernel's ephemeral port range, net.ipv4.ip_local_port_range; Linux's default where
// there is no such file.
func ephemeralPorts() (first, last int, err error) {
	data, err := os.ReadFile(ipLocalPortRange)
	if errors.Is(err, os.ErrNotExist) {
		return 32768, 60999, nil
	}
	if err != nil {
		return 0, 0, err
	}
	fields := strings.Fields(string(data))
	if len(fields) == 2 {
		first, err = strconv.Atoi(fields[0])
		if err == nil {
			last, err = strconv.Atoi(fields[1])
		}
		if err == nil && first <= last {
			return first, last, nil
		}
	}
	return 0, 0, fmt.Errorf("ip_local_port_range: %q, want two ports, the first not above the second", data)
}

// reservePort reserves port for this process unless a running process holds it.
func reservePort(port int) bool {
	path := filepath.Join(portDir, strconv.Itoa(port))
	for range 2 {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err == nil {
			_, werr := fmt.Fprint(f, os.Getpid())
			return errors.Join(werr, f.Close()) == nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil || pid == os.Getpid() || syscall.Kill(pid, 0) == nil {
			return false
		}
		// The process that reserved it is gone: take the reservation over, once.
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return false
		}
	}
	return false
}
