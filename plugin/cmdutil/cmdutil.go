// Package cmdutil holds what every command of the kubectl plugin shares: the client factory built from
// kubectl's global flags, exit codes, colour, and reading a TrainJob by name with a clear error. A helper two
// commands need lives here, never in one command that the other imports.
package cmdutil

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/spf13/pflag"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/scheme"
)

// Exit codes of every command (documented in --help and the README).
const (
	ExitOK      = 0 // success, or the TrainJob is Complete
	ExitError   = 1 // any error
	ExitFailed  = 2 // the TrainJob Failed
	ExitTimeout = 3 // a wait timed out
	ExitNotNow  = 4 // fit: the TrainJob does not fit the cluster now, but would on its nodes emptied
	ExitNowhere = 5 // fit: the TrainJob does not fit the cluster's nodes even emptied
)

// ExitCodeError carries the exit code of a command that did not succeed.
type ExitCodeError struct {
	Code int
	Err  error
}

func (e *ExitCodeError) Error() string { return e.Err.Error() }
func (e *ExitCodeError) Unwrap() error { return e.Err }

// WithExitCode wraps err so the binary exits with code.
func WithExitCode(code int, err error) error { return &ExitCodeError{Code: code, Err: err} }

// ExitCode is the process exit code for a command's error.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var ec *ExitCodeError
	if errors.As(err, &ec) {
		return ec.Code
	}
	return ExitError
}

// Factory is what commands ask for clients, namespace, scheme and colour, as kubectl's cmdutil.Factory is: an
// interface, so that a command depends on what it asks for and a test hands it a factory of its own instead of
// presetting fields. It is a genericclioptions.RESTClientGetter, as kubectl's is.
type Factory interface {
	genericclioptions.RESTClientGetter
	// AddFlags adds kubectl's global flags (--kubeconfig, --context, -n, ...) and --color to flags.
	AddFlags(flags *pflag.FlagSet)
	// ValidateFlags rejects global flag values no command can use.
	ValidateFlags() error
	// RESTConfig is the client config, with a clear error when there is none.
	RESTConfig() (*rest.Config, error)
	// Namespace is the namespace of --namespace or the current context, and whether it was given explicitly.
	Namespace() (string, bool, error)
	// NamespaceFlag is the value of --namespace, "" when not given.
	NamespaceFlag() string
	// Scheme is the project's scheme (pkg/scheme).
	Scheme() *runtime.Scheme
	// Client is a controller-runtime client with the project's scheme.
	Client() (client.WithWatch, error)
	// Clientset is a client-go clientset (for pod logs and events).
	Clientset() (kubernetes.Interface, error)
	// UseColor tells whether to colour output written to out.
	UseColor(out io.Writer) bool
}

// ConfigFactory is the Factory of the binary: clients from kubectl's global flags.
type ConfigFactory struct {
	*genericclioptions.ConfigFlags
	// Color is the --color flag: auto, always or never.
	Color string

	schemeOnce sync.Once
	scheme     *runtime.Scheme
}

var _ Factory = (*ConfigFactory)(nil)

// NewFactory returns a factory with every kubectl global flag.
func NewFactory() *ConfigFactory {
	return NewFactoryFromFlags(genericclioptions.NewConfigFlags(true).WithDiscoveryQPS(50))
}

// NewFactoryFromFlags returns a factory of the given kubectl flags (tests wrap their transport).
func NewFactoryFromFlags(flags *genericclioptions.ConfigFlags) *ConfigFactory {
	return &ConfigFactory{ConfigFlags: flags, Color: "auto"}
}

// AddFlags adds kubectl's global flags and --color.
func (f *ConfigFactory) AddFlags(flags *pflag.FlagSet) {
	f.ConfigFlags.AddFlags(flags)
	flags.StringVar(&f.Color, "color", "auto", "Colour output: auto (on a terminal, unless NO_COLOR is set), always or never")
}

// ValidateFlags checks --color.
func (f *ConfigFactory) ValidateFlags() error {
	switch f.Color {
	case "auto", "always", "never":
		return nil
	}
	return fmt.Errorf("invalid --color %q: use auto, always or never", f.Color)
}

// NamespaceFlag is the value of --namespace.
func (f *ConfigFactory) NamespaceFlag() string { return ptr.Deref(f.ConfigFlags.Namespace, "") }

// RESTConfig is the client config, with a clear error when there is none.
func (f *ConfigFactory) RESTConfig() (*rest.Config, error) {
	if f.noCluster() {
		return nil, errors.New("no cluster to talk to: no kubeconfig found (set KUBECONFIG or pass --kubeconfig)")
	}
	cfg, err := f.ConfigFlags.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("no cluster to talk to: %w (set KUBECONFIG or pass --kubeconfig)", err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	return cfg, nil
}

// noCluster tells whether nothing names a cluster: no kubeconfig, no --server, not in a pod. client-go would
// then fall back to http://localhost:8080 and fail later with "connection refused".
func (f *ConfigFactory) noCluster() bool {
	if ptr.Deref(f.ConfigFlags.APIServer, "") != "" || os.Getenv("KUBERNETES_SERVICE_HOST") != "" {
		return false
	}
	raw, err := f.ConfigFlags.ToRawKubeConfigLoader().RawConfig()
	return err == nil && len(raw.Clusters) == 0
}

// Namespace is the namespace of --namespace or the current context, and
// whether it was given explicitly.
func (f *ConfigFactory) Namespace() (string, bool, error) {
	return f.ConfigFlags.ToRawKubeConfigLoader().Namespace()
}

// Scheme is the project's scheme (pkg/scheme), built once, when a command first needs it: building it costs
// milliseconds that a command which prints its help, or fails early, need not spend.
func (f *ConfigFactory) Scheme() *runtime.Scheme {
	f.schemeOnce.Do(func() { f.scheme = scheme.New() })
	return f.scheme
}

// Client is a controller-runtime client with the project's scheme. It maps the kinds the commands use
// without discovery (newRESTMapper).
func (f *ConfigFactory) Client() (client.WithWatch, error) {
	cfg, err := f.RESTConfig()
	if err != nil {
		return nil, err
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	mapper, err := newRESTMapper(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	return client.NewWithWatch(cfg, client.Options{Scheme: f.Scheme(), HTTPClient: httpClient, Mapper: mapper})
}

// Clientset is a client-go clientset (for pod logs and events).
func (f *ConfigFactory) Clientset() (kubernetes.Interface, error) {
	cfg, err := f.RESTConfig()
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// UseColor tells whether to colour output written to out: --color=always,
// or auto on a terminal without NO_COLOR and TERM=dumb.
func (f *ConfigFactory) UseColor(out io.Writer) bool {
	switch f.Color {
	case "always":
		return true
	case "never":
		return false
	}
	if os.Getenv("NO_COLOR") != "" {
		return false
	}
	return printers.AllowsColorOutput(out)
}

// Streams are the IO streams of a command.
type Streams = genericiooptions.IOStreams
