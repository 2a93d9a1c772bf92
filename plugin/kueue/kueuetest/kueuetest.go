// Package kueuetest answers a kueue.Client's requests as an API server with Kueue does, for the unit tests of
// the commands that read or set Workloads. Tests against a real API server and Kueue live in test/e2e/kueue.
package kueuetest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	fakerest "k8s.io/client-go/rest/fake"

	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/kueue"
)

// API is Kueue's API as a client sees it.
type API struct {
	// Versions are the versions of kueue.x-k8s.io served, the preferred one first; none: Kueue is not installed.
	Versions []string
	// Workloads are the Workloads there are.
	Workloads []kueue.Workload
	// LocalQueues are the LocalQueues there are.
	LocalQueues []kueue.LocalQueue
	// MultiKueueClusters are the MultiKueueClusters there are, by name, as the API serves them (JSON objects).
	MultiKueueClusters map[string]any
	// Secrets are the Secrets of Kueue's namespace (kueue.Namespace).
	Secrets []corev1.Secret
	// Forbidden are the paths the user may not GET.
	Forbidden []string

	mu sync.Mutex
	// requests are "METHOD PATH" of every request, and the body of patches after a blank.
	requests []string
}

// Requests returns the requests received so far: "METHOD PATH", and a patch's body after a blank.
func (a *API) Requests() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.requests...)
}

// Client is a kueue.Client whose requests a answers.
func (a *API) Client() *kueue.Client {
	return kueue.NewClientFor(&fakerest.RESTClient{
		NegotiatedSerializer: clientgoscheme.Codecs.WithoutConversion(),
		Client:               fakerest.CreateHTTPClient(a.serve),
	})
}

func (a *API) serve(r *http.Request) (*http.Response, error) {
	line := r.Method + " " + r.URL.Path
	if r.Body != nil {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		if len(body) > 0 {
			line += " " + string(body)
		}
	}
	a.mu.Lock()
	a.requests = append(a.requests, line)
	a.mu.Unlock()

	if r.Method == http.MethodGet && slices.Contains(a.Forbidden, r.URL.Path) {
		return respond(http.StatusForbidden, metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
			Status: metav1.StatusFailure, Reason: metav1.StatusReasonForbidden, Code: http.StatusForbidden, Message: "forbidden: " + r.URL.Path})
	}
	if name, ok := strings.CutPrefix(r.URL.Path, path.Join("/api/v1/namespaces", kueue.Namespace, "secrets")+"/"); ok && r.Method == http.MethodGet {
		for _, s := range a.Secrets {
			if s.Name == name {
				return respond(http.StatusOK, s)
			}
		}
	}

	if r.URL.Path == "/apis/"+kueue.Group && r.Method == http.MethodGet && len(a.Versions) > 0 {
		group := metav1.APIGroup{Name: kueue.Group}
		for _, v := range a.Versions {
			group.Versions = append(group.Versions, metav1.GroupVersionForDiscovery{GroupVersion: kueue.Group + "/" + v, Version: v})
		}
		group.PreferredVersion = group.Versions[0]
		return respond(http.StatusOK, group)
	}
	for _, v := range a.Versions {
		prefix := path.Join("/apis", kueue.Group, v)
		rest, ok := strings.CutPrefix(r.URL.Path, prefix+"/")
		if !ok {
			continue
		}
		parts := strings.Split(rest, "/")
		switch {
		case r.Method == http.MethodGet && len(parts) == 2 && parts[0] == "multikueueclusters":
			if mc, ok := a.MultiKueueClusters[parts[1]]; ok {
				return respond(http.StatusOK, mc)
			}
		case r.Method == http.MethodGet && len(parts) == 4 && parts[0] == "namespaces" && parts[2] == "localqueues":
			for _, lq := range a.LocalQueues {
				if lq.Namespace == parts[1] && lq.Name == parts[3] {
					return respond(http.StatusOK, lq)
				}
			}
		case r.Method == http.MethodGet && len(parts) == 1 && parts[0] == "workloads":
			return respond(http.StatusOK, kueue.WorkloadList{Items: a.Workloads})
		case r.Method == http.MethodGet && len(parts) == 3 && parts[0] == "namespaces" && parts[2] == "workloads":
			var list kueue.WorkloadList
			for _, wl := range a.Workloads {
				if wl.Namespace == parts[1] {
					list.Items = append(list.Items, wl)
				}
			}
			return respond(http.StatusOK, list)
		case r.Method == http.MethodPatch && len(parts) == 4 && parts[0] == "namespaces" && parts[2] == "workloads":
			for _, wl := range a.Workloads {
				if wl.Namespace == parts[1] && wl.Name == parts[3] {
					return respond(http.StatusOK, wl)
				}
			}
		}
	}
	return respond(http.StatusNotFound, metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status: metav1.StatusFailure, Reason: metav1.StatusReasonNotFound, Code: http.StatusNotFound, Message: "the server could not find the requested resource"})
}

func respond(code int, v any) (*http.Response, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return &http.Response{StatusCode: code, Header: http.Header{"Content-Type": []string{"application/json"}},
		Body: io.NopCloser(bytes.NewReader(body))}, nil
}
