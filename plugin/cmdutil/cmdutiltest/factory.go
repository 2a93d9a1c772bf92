// Package cmdutiltest gives unit tests of the commands' pure logic a cmdutil.Factory without a cluster:
// kubectl's test factory (k8s.io/kubectl/pkg/cmd/testing), whose kubeconfig is a file of its own and whose
// clients reach no API server, with the namespace a test sets. A test that needs an API server runs against
// the local cluster (test/cluster) with the factory the binary uses.
package cmdutiltest

import (
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	kscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest/fake"
	cmdtesting "k8s.io/kubectl/pkg/cmd/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/scheme"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
)

// Factory is kubectl's TestFactory as a cmdutil.Factory.
type Factory struct {
	*cmdtesting.TestFactory
	scheme *runtime.Scheme
}

var _ cmdutil.Factory = (*Factory)(nil)

// errNoAPIServer is what every request of a client of the factory fails with.
var errNoAPIServer = errors.New("a unit test has no API server: test against the local cluster (test/cluster)")

// NewFactory returns a factory whose namespace is namespace; it is cleaned up with t.
func NewFactory(t testing.TB, namespace string) *Factory {
	tf := cmdtesting.NewTestFactory().WithNamespace(namespace)
	t.Cleanup(tf.Cleanup)
	tf.ClientConfigVal = cmdtesting.DefaultClientConfig()
	tf.Client = &fake.RESTClient{
		NegotiatedSerializer: kscheme.Codecs.WithoutConversion(),
		Client:               fake.CreateHTTPClient(func(*http.Request) (*http.Response, error) { return nil, errNoAPIServer }),
	}
	return &Factory{TestFactory: tf, scheme: scheme.New()}
}

// AddFlags adds no flags: a test sets what it needs on the factory.
func (f *Factory) AddFlags(*pflag.FlagSet) {}

// ValidateFlags accepts the factory as it is.
func (f *Factory) ValidateFlags() error { return nil }

// Namespace is the test's namespace, given explicitly.
func (f *Factory) Namespace() (string, bool, error) { return f.ToRawKubeConfigLoader().Namespace() }

// NamespaceFlag is the test's namespace.
func (f *Factory) NamespaceFlag() string {
	ns, _, _ := f.Namespace()
	return ns
}

// Scheme is the project's scheme.
func (f *Factory) Scheme() *runtime.Scheme { return f.scheme }

// Client is a controller-runtime client whose every request fails with errNoAPIServer.
func (f *Factory) Client() (client.WithWatch, error) {
	cfg, err := f.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	httpClient := fake.CreateHTTPClient(func(*http.Request) (*http.Response, error) { return nil, errNoAPIServer })
	return client.NewWithWatch(cfg, client.Options{Scheme: f.scheme, HTTPClient: httpClient, Mapper: meta.NewDefaultRESTMapper(nil)})
}

// UseColor is false: test output is compared as text.
func (f *Factory) UseColor(io.Writer) bool { return false }
