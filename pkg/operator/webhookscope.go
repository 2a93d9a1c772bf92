package operator

import (
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// byName is a manager whose configuration lists and watches some resources
// by name only: certificate rotation (cert-controller) informs itself of
// the webhook configurations and its Secret through a cache of its own that
// lists all of them, and takes no field selector. RBAC grants a list or
// watch restricted by resourceNames only to a request that selects that
// name (fieldSelector=metadata.name=NAME), so that is what this manager's
// configuration adds to such requests; the operator then needs no right on
// anyone else's webhook configurations or Secrets.
type byName struct {
	manager.Manager
	config *rest.Config
}

// GetConfig is the manager's configuration with the field selectors.
func (m byName) GetConfig() *rest.Config { return m.config }

// namedCollections maps the path of a collection (".../validatingwebhookconfigurations",
// ".../namespaces/NS/secrets") to the one name read from it.
type namedCollections map[string]string

// listedByName returns mgr with a configuration that selects, in each list
// and watch of a collection of names, only the named object.
func listedByName(mgr manager.Manager, names namedCollections) manager.Manager {
	cfg := rest.CopyConfig(mgr.GetConfig())
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return nameSelector{next: rt, names: names}
	})
	return byName{Manager: mgr, config: cfg}
}

type nameSelector struct {
	next  http.RoundTripper
	names namedCollections
}

func (s nameSelector) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet {
		return s.next.RoundTrip(req)
	}
	for collection, name := range s.names {
		if !strings.HasSuffix(req.URL.Path, collection) {
			continue
		}
		q := req.URL.Query()
		if q.Get("fieldSelector") == "" {
			req = req.Clone(req.Context())
			q.Set("fieldSelector", fields.OneTermEqualSelector("metadata.name", name).String())
			req.URL.RawQuery = q.Encode()
		}
		break
	}
	return s.next.RoundTrip(req)
}
