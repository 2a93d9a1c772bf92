package cli

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/kueue"
)

// requestLog records the API requests a command makes, through a round-tripper on its REST config: the
// method, the path and the query, with continue tokens as <continue>.
type requestLog struct {
	mu       sync.Mutex
	requests []string
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// factory is a factory as main makes it, whose clients' requests go through l.
func (l *requestLog) factory() *cmdutil.ConfigFactory { return factorySeeing(l.add) }

// factorySeeing is a factory as main makes it that calls see with each request its clients send, before
// sending it.
func factorySeeing(see func(*http.Request)) *cmdutil.ConfigFactory {
	f := cmdutil.NewFactory()
	f.ConfigFlags.WrapConfigFn = func(cfg *rest.Config) *rest.Config {
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
				see(r)
				return rt.RoundTrip(r)
			})
		})
		return cfg
	}
	return f
}

func (l *requestLog) add(r *http.Request) {
	q := r.URL.Query()
	if q.Has("continue") {
		q.Set("continue", "<continue>")
	}
	line := r.Method + " " + r.URL.Path
	if len(q) > 0 {
		line += "?" + strings.ReplaceAll(q.Encode(), url.QueryEscape("<continue>"), "<continue>")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.requests = append(l.requests, line)
}

func (l *requestLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.requests
	l.requests = nil
	return r
}

// TestRequests counts the API requests of the commands issue 8 measures: `status` makes at most five (the
// TrainJob, its JobSet, its Jobs, its pods, the namespace's Events, read at once: the JobSet is what tells
// its pods from pods that only carry its labels), one more when a container failed,
// `list` one LIST per page and one GET per
// runtime its table needs (none for other formats, none for TrainJobs that give their nodes and resources),
// and neither reads discovery. For a TrainJob in a Kueue LocalQueue both ask whether Kueue's API is served
// (one discovery request for its group); here it is not, and they ask nothing more (test/e2e/kueue runs them
// with Kueue).
func TestRequests(t *testing.T) {
	c := sharedCluster(t)
	log := &requestLog{}

	t.Run("status", func(t *testing.T) {
		f := fixtureOn(t, c)
		tj := trainingTrainJob(f, "llama")
		res := RunWith(t, log.factory(), []plugin.CommandAdder{statusCmd(tj.CreationTimestamp.Add(10*time.Minute), false)}, withArgs(kubeArgs(c, f.ns), "status", "llama")...)
		got := log.take()
		if res.Code != 0 {
			t.Fatal(res)
		}
		want := statusRequests(f.ns, "llama")
		if len(got) > 5 {
			t.Errorf("status made %d API requests, want at most 5:\n%s", len(got), strings.Join(got, "\n"))
		}
		// They are made at once: their order is not the code's.
		if diff := cmp.Diff(want, got, cmpSorted); diff != "" {
			t.Errorf("status requests (-want +got):\n%s", diff)
		}
	})

	// A container failed: one request more, the end of that container's log (which no kubelet serves here:
	// status says why), and one to three for its node's GPUs; the JobSet, read anyway, gives its failure policy.
	t.Run("status of a Failed TrainJob", func(t *testing.T) {
		f := fixtureOn(t, c)
		failedTrainJob(f, "oom")
		res := RunWith(t, log.factory(), []plugin.CommandAdder{statusCmd(time.Now(), false)}, withArgs(kubeArgs(c, f.ns), "status", "oom")...)
		got := log.take()
		if res.Code != 0 {
			t.Fatal(res)
		}
		want := append(statusRequests(f.ns, "oom"),
			"GET /api/v1/namespaces/"+f.ns+"/pods/oom-node-0-0-x00/log?container=node&limitBytes=65536&tailLines=20",
			// Whether the GPUs of the failed container's node are sick (plugin/gpuhealth): this cluster has no
			// such node, so its ResourceSlices and the DeviceTaintRules are not read.
			"GET /api/v1/nodes/gpu-node-2")
		if diff := cmp.Diff(want, got, cmpSorted); diff != "" {
			t.Errorf("status requests (-want +got):\n%s", diff)
		}
		if !strings.Contains(res.Stdout, "First failure:") {
			t.Errorf("status does not show the first failure:\n%s", res.Stdout)
		}
	})

	t.Run("status of a TrainJob in a Kueue LocalQueue, without Kueue", func(t *testing.T) {
		f := fixtureOn(t, c)
		f.trainJob("queued", 1, false, func(tj *trainer.TrainJob) { tj.Labels[kueue.QueueLabel] = "gpu" })
		res := RunWith(t, log.factory(), []plugin.CommandAdder{statusCmd(time.Now(), false)}, withArgs(kubeArgs(c, f.ns), "status", "queued")...)
		got := log.take()
		if res.Code != 0 {
			t.Fatal(res)
		}
		want := append(statusRequests(f.ns, "queued"), "GET /apis/kueue.x-k8s.io")
		if diff := cmp.Diff(want, got, cmpSorted); diff != "" {
			t.Errorf("status requests (-want +got):\n%s", diff)
		}
		if !strings.Contains(res.Stdout, "Kueue is not installed") {
			t.Errorf("status does not say Kueue is not installed:\n%s", res.Stdout)
		}
	})

	t.Run("list", func(t *testing.T) {
		f := fixtureOn(t, c)
		// 6 TrainJobs here: 4 of runtime torch-distributed (not installed), one of torch-small, one of gone. Each
		// runtime is read once: it sizes the pods whose GPUs GPUS counts.
		listFixture(t, f)
		trainJobs := "GET /apis/trainer.kubeflow.org/v1alpha1/namespaces/" + f.ns + "/trainjobs"
		runtimes := []string{
			"GET /apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes/torch-distributed",
			"GET /apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes/torch-small",
			"GET /apis/trainer.kubeflow.org/v1alpha1/namespaces/" + f.ns + "/trainingruntimes/gone",
		}
		for _, tc := range []struct {
			name string
			args []string
			want []string
		}{
			{"one page of the default 500", []string{"list"}, append([]string{trainJobs + "?limit=500"}, runtimes...)},
			{"pages of 2", []string{"list", "--chunk-size", "2"}, append([]string{
				trainJobs + "?limit=2", trainJobs + "?continue=<continue>&limit=2", trainJobs + "?continue=<continue>&limit=2"}, runtimes...)},
			{"no paging", []string{"list", "--chunk-size", "0"}, append([]string{trainJobs}, runtimes...)},
			{"names need no runtime", []string{"list", "-o", "name"}, []string{trainJobs + "?limit=500"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				res := RunWith(t, log.factory(), []plugin.CommandAdder{listCmd(time.Now())}, withArgs(kubeArgs(c, f.ns), tc.args...)...)
				got := log.take()
				if res.Code != 0 {
					t.Fatal(res)
				}
				// The runtimes are read while the next page is: the order is the pages' only.
				if diff := cmp.Diff(tc.want, got, cmpSorted); diff != "" {
					t.Errorf("list requests (-want +got):\n%s", diff)
				}
			})
		}
	})

	// Every kind the commands read is mapped to its resource without discovery, and the mapping is the
	// API server's: the request finds the resource.
	t.Run("no discovery", func(t *testing.T) {
		f := fixtureOn(t, c)
		factory := log.factory()
		factory.ConfigFlags.KubeConfig = &c.KubeconfigPath
		cl, err := factory.Client()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range []client.ObjectList{&trainer.TrainJobList{}, &trainer.TrainingRuntimeList{}, &trainer.ClusterTrainingRuntimeList{},
			&jobsetv1alpha2.JobSetList{}, &batchv1.JobList{}, &corev1.PodList{}, &corev1.EventList{}, &corev1.ConfigMapList{},
			&corev1.NodeList{}, &corev1.NamespaceList{}} {
			if err := cl.List(t.Context(), l, client.InNamespace(f.ns)); err != nil {
				t.Errorf("list %T: %v", l, err)
			}
		}
		got := log.take()
		for _, r := range got {
			if isDiscovery(strings.Fields(r)[1]) {
				t.Errorf("a discovery request: %s", r)
			}
		}
		if len(got) != 10 {
			t.Errorf("%d requests for 10 lists:\n%s", len(got), strings.Join(got, "\n"))
		}
	})
}

// statusRequests are the five requests `status NAME` makes in namespace ns: the TrainJob, its JobSet, the Jobs
// and pods of its JobSet, and the namespace's Events.
func statusRequests(ns, name string) []string {
	children := "labelSelector=" + url.QueryEscape(jobsetv1alpha2.JobSetNameKey+"="+name)
	return []string{
		"GET /apis/trainer.kubeflow.org/v1alpha1/namespaces/" + ns + "/trainjobs/" + name,
		"GET /apis/jobset.x-k8s.io/v1alpha2/namespaces/" + ns + "/jobsets/" + name,
		"GET /apis/batch/v1/namespaces/" + ns + "/jobs?" + children,
		"GET /api/v1/namespaces/" + ns + "/pods?" + children,
		"GET /api/v1/namespaces/" + ns + "/events",
	}
}

// isDiscovery tells whether path is one of discovery's: /api, /api/v1, /apis, /apis/GROUP, /apis/GROUP/VERSION.
func isDiscovery(path string) bool {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch parts[0] {
	case "api":
		return len(parts) <= 2
	case "apis":
		return len(parts) <= 3
	}
	return false
}

// cmpSorted compares string slices as sets.
var cmpSorted = cmp.Transformer("sorted", func(in []string) []string {
	out := append([]string(nil), in...)
	slices.Sort(out)
	return out
})
