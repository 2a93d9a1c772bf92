// Package cmdutil holds what every command of the kubectl plugin shares: the client factory built from
// kubectl's global flags (kubectl's own cmdutil.Factory, with what these commands ask for besides), the one
// place that prints a command's error and chooses its exit code, colour, the one watcher, the ranks of a
// replicated job, and reading a TrainJob by name with a clear error. A helper two commands need lives here,
// never in one command that the other imports.
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
	"k8s.io/client-go/rest"
	kcmdutil "k8s.io/kubectl/pkg/cmd/util"
	"k8s.io/kubectl/pkg/util/term"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/scheme"
)

// Factory is what commands ask for clients, namespace, scheme and colour. It is kubectl's cmdutil.Factory
// (k8s.io/kubectl/pkg/cmd/util) with what the commands of this plugin ask for besides, so that a command
// depends on what it asks for, and a unit test of pure logic hands it kubectl's test factory (cmdutiltest)
// instead of presetting fields. Every client it makes — kubectl's clientset, REST and dynamic clients, and
// the controller-runtime client — comes from its one REST config (ToRESTConfig).
type Factory interface {
	kcmdutil.Factory
	// AddFlags adds kubectl's global flags (--kubeconfig, --context, -n, ...) and --color to flags.
	AddFlags(flags *pflag.FlagSet)
	// ValidateFlags rejects global flag values no command can use.
	ValidateFlags() error
	// Namespace is the namespace of --namespace or the current context, and whether it was given explicitly.
	Namespace() (string, bool, error)
	// NamespaceFlag is the value of --namespace, "" when not given.
	NamespaceFlag() string
	// Scheme is the project's scheme (pkg/scheme).
	Scheme() *runtime.Scheme
	// Client is a controller-runtime client with the project's scheme.
	Client() (client.WithWatch, error)
	// UseColor tells whether to colour output written to out.
	UseColor(out io.Writer) bool
}

// ConfigFactory is the Factory of the binary: clients from kubectl's global flags.
type ConfigFactory struct {
	kcmdutil.Factory
	// ConfigFlags are kubectl's global flags (tests wrap their transport with WrapConfigFn).
	ConfigFlags *genericclioptions.ConfigFlags
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
	return &ConfigFactory{Factory: kcmdutil.NewFactory(clusterConfig{flags}), ConfigFlags: flags, Color: "auto"}
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

// Namespace is the namespace of --namespace or the current context, and
// whether it was given explicitly.
func (f *ConfigFactory) Namespace() (string, bool, error) {
	return f.ToRawKubeConfigLoader().Namespace()
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
	cfg, err := f.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	return ClientFor(cfg, f.Scheme())
}

// ClientFor is a controller-runtime client of cfg with scheme, which maps the kinds the commands use without
// discovery, as Factory.Client's does: for a cluster other than the factory's (a MultiKueue worker).
func ClientFor(cfg *rest.Config, scheme *runtime.Scheme) (client.WithWatch, error) {
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	mapper, err := newRESTMapper(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	return client.NewWithWatch(cfg, client.Options{Scheme: scheme, HTTPClient: httpClient, Mapper: mapper})
}

// UseColor tells whether to colour output written to out: --color=always, or auto on a terminal without
// NO_COLOR and TERM=dumb (kubectl's util/term).
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
	return term.AllowsColorOutput(out)
}

// clusterConfig is kubectl's flags as the REST client getter of kubectl's factory, so that every client the
// factory makes has the REST config of ToRESTConfig.
type clusterConfig struct {
	*genericclioptions.ConfigFlags
}

// ToRESTConfig is the client config, with a clear error when there is none, and the rate limits of a
// command that reads a TrainJob's pods, Jobs and Events at once.
func (c clusterConfig) ToRESTConfig() (*rest.Config, error) {
	if c.noCluster() {
		return nil, errors.New("no cluster to talk to: no kubeconfig found (set KUBECONFIG or pass --kubeconfig)")
	}
	cfg, err := c.ConfigFlags.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("no cluster to talk to: %w (set KUBECONFIG or pass --kubeconfig)", err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	return cfg, nil
}

// noCluster tells whether nothing names a cluster: no kubeconfig, no --server, not in a pod. client-go would
// then fall back to http://localhost:8080 and fail later with "connection refused".
func (c clusterConfig) noCluster() bool {
	if ptr.Deref(c.ConfigFlags.APIServer, "") != "" || os.Getenv("KUBERNETES_SERVICE_HOST") != "" {
		return false
	}
	raw, err := c.ConfigFlags.ToRawKubeConfigLoader().RawConfig()
	return err == nil && len(raw.Clusters) == 0
}

// Streams are the IO streams of a command.
type Streams = genericiooptions.IOStreams
