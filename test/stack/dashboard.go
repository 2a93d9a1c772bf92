package stack

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/chromedp/chromedp"
)

// dashboardURL is the URL `kubectl trainjob dashboard` prints, with its token.
var dashboardURL = regexp.MustCompile(`http://\S+\?token=\S+`)

// Dashboard is `kubectl trainjob dashboard` run as a process of its own, as a user runs it: by the demo, and
// by the benchmarks, which measure its memory.
type Dashboard struct {
	// URL is the URL it printed, with its token.
	URL string
	// LogPath holds what it printed.
	LogPath string

	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// StartDashboard runs `binary dashboard ARGS…` with the environment env (its KUBECONFIG), what it prints going
// to logPath, and returns once it has printed its URL.
func StartDashboard(ctx context.Context, binary string, env []string, logPath string, args ...string) (*Dashboard, error) {
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	args = append([]string{"dashboard"}, args...)
	fmt.Fprintf(log, "# %s %s\n", binary, strings.Join(args, " "))
	cmd := exec.Command(binary, args...)
	cmd.Env = env
	cmd.Stderr = log
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		_ = log.Close()
		return nil, err
	}
	// Its own process group, so that a Ctrl-C meant for the demo reaches it only through Stop; killed if the
	// process that started it dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return nil, fmt.Errorf("start kubectl trainjob dashboard: %w", err)
	}
	d := &Dashboard{LogPath: logPath, cmd: cmd, done: make(chan struct{})}
	printed := make(chan string, 1)
	go func() {
		defer func() { _ = log.Close() }()
		lines := bufio.NewScanner(stdout)
		for lines.Scan() {
			fmt.Fprintln(log, lines.Text())
			if u := dashboardURL.FindString(lines.Text()); u != "" {
				select {
				case printed <- u:
				default:
				}
			}
		}
		d.err = cmd.Wait()
		close(d.done)
	}()
	select {
	case d.URL = <-printed:
		return d, nil
	case <-d.done:
		return nil, fmt.Errorf("kubectl trainjob dashboard exited before it printed its URL: %v (log: %s)", d.err, logPath)
	case <-ctx.Done():
		_ = d.Stop()
		return nil, fmt.Errorf("kubectl trainjob dashboard printed no URL: %w (log: %s)", ctx.Err(), logPath)
	}
}

// PID is the dashboard's process id.
func (d *Dashboard) PID() int { return d.cmd.Process.Pid }

// Stop stops it as Ctrl-C does, and kills it unless it is gone within 5 s.
func (d *Dashboard) Stop() error {
	if err := d.cmd.Process.Signal(os.Interrupt); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-d.done:
		return nil
	case <-time.After(5 * time.Second):
	}
	_ = d.cmd.Process.Kill()
	<-d.done
	return fmt.Errorf("kubectl trainjob dashboard did not exit within 5 s of SIGINT and was killed (log: %s)", d.LogPath)
}

// Event is one server-sent event of the dashboard: its name ("trainjobs", "trainjob", "error") and its data,
// JSON.
type Event struct {
	Name, Data string
}

// Events GETs url with hc (which holds the dashboard's cookie) and sends the server-sent events it answers,
// one by one, until ctx ends or the stream does.
func Events(ctx context.Context, hc *http.Client, url string) (<-chan Event, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("GET %s: %d %s: %s", url, resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	events := make(chan Event, 16)
	go func() {
		defer resp.Body.Close()
		lines := bufio.NewScanner(resp.Body)
		lines.Buffer(nil, 16<<20)
		var name string
		for lines.Scan() {
			line := lines.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				select {
				case events <- Event{Name: name, Data: strings.TrimPrefix(line, "data: ")}:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return events, nil
}

// Chromium starts the headless chromium at path at 1440×900, as the dashboard's tests and benchmarks drive it,
// and returns the context of its tab (the browser starts with the first action run in it); stop ends it.
func Chromium(ctx context.Context, path string) (tab context.Context, stop context.CancelFunc) {
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.WindowSize(1440, 900), chromedp.Flag("disable-dev-shm-usage", true))
	// With --disable-dev-shm-usage the browser keeps its shared memory in files of TMPDIR
	// (org.chromium.Chromium.*), which a browser killed at the end leaves there: a folder of its own, removed
	// once it has stopped.
	tmp, err := os.MkdirTemp("", "chromium-")
	if err == nil {
		opts = append(opts, chromedp.Env("TMPDIR="+tmp))
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	tab, cancelTab := chromedp.NewContext(alloc)
	return tab, func() {
		cancelTab()
		cancelAlloc()
		if tmp != "" {
			_ = os.RemoveAll(tmp)
		}
	}
}
