// Package dashboard is `kubectl trainjob dashboard`: a web page served from the binary on loopback that shows
// the TrainJobs and where each one is in its pipeline, live, as list and status show them, read with the
// user's own kubeconfig and RBAC, as `kubectl proxy` does; nothing is installed in the cluster.
//
// The page is plain HTML, CSS and JavaScript embedded in the binary (assets/), which asks the server's JSON
// API; the server reads with the CLI's code (list's rows, status's Fetch and Summarize, the first failure of
// plugin/failure) and pushes changes with server-sent events, watching with the CLI's one watcher
// (cmdutil.Changes). It is safe by default: bound to loopback, every request must carry the random token of the
// URL it prints (a cookie after the first), names it by a loopback name or an IP (DNS rebinding) and comes
// from its own page (Origin); the Content-Security-Policy forbids inline scripts; it writes nothing unless
// started with --allow-writes, and then only what suspend, resume, delete and rerun write (their code).
package dashboard

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/dryrun"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/kueue"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/list"
)

const example = `  # The TrainJobs of the current namespace in a browser
  kubectl trainjob dashboard --open

  # Every namespace, on a fixed port, with suspend, resume, delete and rerun buttons
  kubectl trainjob dashboard -A --port 8765 --allow-writes`

// DashboardOptions are the flags and resolved inputs of `dashboard`.
type DashboardOptions struct {
	Streams cmdutil.Streams

	Address       string
	Port          int
	Open          bool
	AllNamespaces bool
	AllowWrites   bool

	Namespace string
	Client    client.WithWatch
	Kueue     *kueue.Client
	Logs      kubernetes.Interface
	// Pipeline sizes the TrainJobs (GPUs) as the binary's operator builds them, as list does.
	Pipeline cmdutil.Pipeline
	Clock    clock.PassiveClock
	// Resync is how often the page is pushed again while nothing changes (Resync); tests make it long, so that
	// only the watches can bring a change in time.
	Resync time.Duration
	// Batch is how long a page's changes are gathered into one push (Batch).
	Batch time.Duration
	// OpenURL opens the page in the user's browser (--open); tests replace it.
	OpenURL func(url string) error
	// MemoryLimit is the soft limit Run sets on the process's Go memory (debug.SetMemoryLimit) unless GOMEMLIMIT
	// sets one; 0 sets none, for a process that serves the dashboard among other work (a test's). The binary's
	// command (NewCmd) sets MemoryLimit.
	MemoryLimit int64
}

var _ cmdutil.Command = (*DashboardOptions)(nil)

// NewDashboardOptions returns options writing to streams.
func NewDashboardOptions(streams cmdutil.Streams) *DashboardOptions {
	return &DashboardOptions{Streams: streams, Address: "127.0.0.1", Clock: clock.RealClock{}, Resync: Resync, Batch: Batch, OpenURL: openBrowser}
}

// NewCmdDashboard is `kubectl trainjob dashboard` with the in-tree pipeline plugins.
func NewCmdDashboard(f cmdutil.Factory, streams cmdutil.Streams) *cobra.Command {
	return NewCmdDashboardWithOptions(f, NewDashboardOptions(streams))
}

// NewCmd is `kubectl trainjob dashboard` of a binary whose pipeline adds outOfTree (app.WithPlugin).
func NewCmd(outOfTree pipeline.Registry) func(cmdutil.Factory, cmdutil.Streams) *cobra.Command {
	return func(f cmdutil.Factory, streams cmdutil.Streams) *cobra.Command {
		o := NewDashboardOptions(streams)
		o.Pipeline.OutOfTree, o.MemoryLimit = outOfTree, MemoryLimit
		return NewCmdDashboardWithOptions(f, o)
	}
}

// NewCmdDashboardWithOptions is `kubectl trainjob dashboard` with preset options.
func NewCmdDashboardWithOptions(f cmdutil.Factory, o *DashboardOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dashboard",
		Short: "Serve a live web page of the TrainJobs, their stages, ranks and logs",
		Long: `Serve a web page of the TrainJobs from this binary, on loopback, and print its URL. Nothing is
installed in the cluster: the server reads with your kubeconfig, so your RBAC decides what the page
shows, and a read you may not make shows as forbidden. The page is live: the server watches the
TrainJobs and pushes every change, so a change of stage shows without a reload.

The list shows what list shows (stage, runtime, nodes, GPUs, progress, age), with a filter and
sorting; a TrainJob's page shows what status shows (the stage and why, the first failure, the
pipeline's stages, every condition and Event), a grid of its pods by rank coloured by phase, their
logs, charts of the trainer's progress and of a metric its ranks print (the loss), and the TrainJob
and its JobSet as YAML. The GPUs view shows every node's GPUs, free and used, and who holds them,
as fit counts them, and where a pasted TrainJob would fit now.

The URL holds a random token: every request without it (or the cookie it becomes) is refused, as
is any request that names the server by a DNS name other than localhost or that comes from another
site's page. The page can suspend, resume, delete (after listing what goes with it, as delete
does) and rerun (with --set changes) TrainJobs only with --allow-writes. It runs until
Ctrl-C.`,
		Example: example,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.RunCommand(f, o, cmd, args)
		},
	}
	cmd.Flags().StringVar(&o.Address, "address", o.Address, "The address to listen on: loopback unless you mean others to reach it (they still need the token).")
	cmd.Flags().IntVar(&o.Port, "port", o.Port, "The port to listen on (0: a free one).")
	cmd.Flags().BoolVar(&o.Open, "open", o.Open, "Open the page in the default browser.")
	cmd.Flags().BoolVarP(&o.AllNamespaces, "all-namespaces", "A", o.AllNamespaces, "Show the TrainJobs of every namespace.")
	cmd.Flags().BoolVar(&o.AllowWrites, "allow-writes", o.AllowWrites, "Let the page suspend, resume, delete and rerun TrainJobs (it is read-only without).")
	return cmd
}

// Complete resolves the namespace and the clients.
func (o *DashboardOptions) Complete(f cmdutil.Factory, _ *cobra.Command, _ []string) error {
	var err error
	if o.Namespace, o.Client, err = cmdutil.NamespaceAndClient(f, o.Client); err != nil {
		return err
	}
	if o.AllNamespaces {
		o.Namespace = ""
	}
	if o.Kueue == nil {
		if o.Kueue, err = kueue.NewClient(f); err != nil {
			return err
		}
	}
	if o.Logs == nil {
		o.Logs, err = f.KubernetesClientSet()
	}
	return err
}

// Validate checks the address and the port before anything is read.
func (o *DashboardOptions) Validate() error {
	if o.Address != "localhost" && net.ParseIP(o.Address) == nil {
		return fmt.Errorf("invalid --address %q: use an IP address (127.0.0.1, ::1, 0.0.0.0) or localhost", o.Address)
	}
	if o.Port < 0 || o.Port > 65535 {
		return fmt.Errorf("invalid --port %d: use 0 (a free port) to 65535", o.Port)
	}
	return nil
}

// MemoryLimit is the dashboard's soft limit on the Go runtime's memory (debug.SetMemoryLimit), unless
// GOMEMLIMIT sets another: the garbage collector runs before the heap outgrows it, rather than when the heap has
// doubled, so that a server that holds a row per TrainJob (8.5 MiB for 10 000) does not keep the garbage of
// making them (the first list's 140 MB) resident. A heap that needs more grows past it: the limit is soft.
const MemoryLimit = 40 << 20

// Run serves the dashboard until ctx ends.
func (o *DashboardOptions) Run(ctx context.Context) error {
	if o.MemoryLimit > 0 && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(o.MemoryLimit)
	}
	fw, err := o.Pipeline.Framework(ctx, &dryrun.Inputs{})
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", net.JoinHostPort(o.Address, strconv.Itoa(o.Port)))
	if err != nil {
		return fmt.Errorf("listen on %s port %d: %w", o.Address, o.Port, err)
	}
	s := &Server{Token: rand.Text(), AllowWrites: o.AllowWrites, Namespace: o.Namespace, Client: o.Client,
		Kueue: o.Kueue, Logs: o.Logs, Rows: list.NewRows(o.Client, fw).InQueues(o.Kueue, o.Namespace), Pipeline: &o.Pipeline, Clock: o.Clock, Resync: o.Resync, Batch: o.Batch}
	if err := s.Start(ctx); err != nil {
		return err
	}
	// The URL once the TrainJobs are in: the page opened shows them at once.
	s.cache.wait(ctx)
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	u := pageURL(l.Addr().(*net.TCPAddr), o.Address, s.Token)
	what := "namespace " + o.Namespace
	if o.Namespace == "" {
		what = "every namespace"
	}
	mode := "read-only"
	if o.AllowWrites {
		mode = "suspend, resume, delete and rerun allowed"
	}
	fmt.Fprintf(o.Streams.Out, "Serving the TrainJobs of %s (%s) at\n  %s\nPress Ctrl-C to stop.\n", what, mode, u)
	if ip := net.ParseIP(o.Address); ip != nil && !ip.IsLoopback() {
		fmt.Fprintf(o.Streams.ErrOut, "warning: listening on %s, not on loopback: whoever has the URL can see what your kubeconfig can read\n", o.Address)
	}
	if o.Open {
		if err := o.OpenURL(u); err != nil {
			fmt.Fprintf(o.Streams.ErrOut, "warning: could not open a browser (%v): open the URL above\n", err)
		}
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	// The page's event streams end with ctx; Shutdown waits for the rest.
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// pageURL is the URL of the page on addr, listened on as address (--address) asked, with the token; a server
// listening on every address is reached on loopback: IPv4's, unless address is IPv6's (::). Not addr's family:
// Go listens on 0.0.0.0 with a dual-stack socket, which says [::], and a host without IPv6 has no ::1.
func pageURL(addr *net.TCPAddr, address, token string) string {
	host := addr.IP
	if host.IsUnspecified() {
		host = net.IPv4(127, 0, 0, 1)
		if ip := net.ParseIP(address); ip != nil && ip.To4() == nil {
			host = net.IPv6loopback
		}
	}
	u := url.URL{Scheme: "http", Host: net.JoinHostPort(host.String(), strconv.Itoa(addr.Port)), Path: "/",
		RawQuery: url.Values{"token": {token}}.Encode()}
	return u.String()
}

// openBrowser opens u in the desktop's browser.
func openBrowser(u string) error {
	var cmd *exec.Cmd
	switch runtime.GOOS {
	case "darwin":
		cmd = exec.Command("open", u)
	case "windows":
		cmd = exec.Command("rundll32", "url.dll,FileProtocolHandler", u)
	default:
		cmd = exec.Command("xdg-open", u)
	}
	return cmd.Start()
}
