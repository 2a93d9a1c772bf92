package operator

import (
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/rest"
)

// namedCollections maps the path of a collection (".../validatingwebhookconfigurations",
// ".../namespaces/NS/secrets") to the one name read from it.
type namedCollections map[string]string

// listedByName returns a copy of cfg that selects, in each list and watch
// of a collection of names, only the named object. The certificate cache
// (certCache) lists and watches the webhook configurations and the Secret;
// RBAC grants a list or watch restricted by resourceNames only to a request
// that selects that name (fieldSelector=metadata.name=NAME), so that is what
// this configuration adds to such requests; the operator then needs no
// right on anyone else's webhook configurations or Secrets.
func listedByName(cfg *rest.Config, names namedCollections) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return nameSelector{next: rt, names: names}
	})
	return cfg
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
