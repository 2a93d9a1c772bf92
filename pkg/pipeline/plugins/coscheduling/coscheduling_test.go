package coscheduling

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/api/meta/testrestmapper"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/pipelinetest"
)

func testScheme(t testing.TB, withPodGroup bool) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	adds := []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, trainer.AddToScheme}
	if withPodGroup {
		adds = append(adds, schedv1alpha1.AddToScheme)
	}
	for _, add := range adds {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// cluster is what a test case finds in the API server.
type cluster struct {
	offline bool
	objs    []client.Object
	// getErr fails every Get of a PodGroup.
	getErr error
}

func (c cluster) client(t testing.TB) client.Client {
	t.Helper()
	b := fake.NewClientBuilder().WithScheme(testScheme(t, true)).WithObjects(c.objs...)
	if c.getErr != nil {
		b = b.WithInterceptorFuncs(interceptor.Funcs{
			Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if _, ok := obj.(*schedv1alpha1.PodGroup); ok {
					return c.getErr
				}
				return cl.Get(ctx, key, obj, opts...)
			},
		})
	}
	return b.Build()
}

func (c cluster) plugin(t testing.TB) *CoScheduling {
	t.Helper()
	h := pipeline.Handle{Offline: c.offline}
	if !c.offline {
		h.Client = c.client(t)
	}
	p, err := New(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	return p.(*CoScheduling)
}

// gangRuntime is the runtime of spec §6.1: two initializers and 100 nodes,
// every pod requesting 1 CPU and 4Gi.
const gangRuntime = `
kind: ClusterTrainingRuntime
metadata: {name: gang}
spec:
  mlPolicy: {numNodes: 100, torch: {}}
  podGroupPolicy:
    coscheduling: {scheduleTimeoutSeconds: 100}
  template:
    spec:
      replicatedJobs:
      - name: dataset-initializer
        template:
          metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: dataset-initializer}}
          spec: {template: {spec: {containers: [{name: dataset-initializer, image: d:v1, resources: {requests: {cpu: "1", memory: 4Gi}}}]}}}
      - name: model-initializer
        template:
          metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: model-initializer}}
          spec: {template: {spec: {containers: [{name: model-initializer, image: m:v1, resources: {requests: {cpu: "1", memory: 4Gi}}}]}}}
      - name: node
        template:
          metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}
          spec: {template: {spec: {containers: [{name: node, image: pytorch:v1, resources: {requests: {cpu: "1", memory: 4Gi}}}]}}}
`

const plainRuntime = `
kind: ClusterTrainingRuntime
metadata: {name: gang}
spec:
  template:
    spec:
      replicatedJobs:
      - name: node
        template: {spec: {template: {spec: {containers: [{name: node, image: app:v1}]}}}}
`

func TestEnforcePodGroupPolicy(t *testing.T) {
	cases := map[string]struct {
		runtime string
		labels  map[string]string
		want    map[string]string
	}{
		"pods join the TrainJob's PodGroup": {
			runtime: gangRuntime,
			labels:  map[string]string{"team": "ml"},
			want:    map[string]string{"team": "ml", "scheduling.x-k8s.io/pod-group": "alpha"},
		},
		"runtime without coscheduling policy labels nothing": {
			runtime: plainRuntime,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tj := pipelinetest.TrainJob(t, `{metadata: {name: alpha}, spec: {runtimeRef: {name: gang}}}`)
			info := pipelinetest.Info(t, tj, pipelinetest.Runtime(t, tc.runtime))
			info.Scheduler.PodLabels = tc.labels
			if err := (cluster{offline: true}).plugin(t).EnforcePodGroupPolicy(info, tj); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, info.Scheduler.PodLabels); diff != "" {
				t.Errorf("pod labels (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBuild(t *testing.T) {
	const (
		runningTrainJob   = `{metadata: {name: alpha}, spec: {runtimeRef: {name: gang}}}`
		suspendedTrainJob = `{metadata: {name: alpha}, spec: {runtimeRef: {name: gang}, suspend: true}}`
		gangPodGroup      = `
apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata:
  name: alpha
  namespace: default
  ownerReferences:
  - {apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, name: alpha, uid: uid-0001, controller: true, blockOwnerDeletion: true}
spec:
  minMember: 102
  minResources: {cpu: "102", memory: 408Gi}
  scheduleTimeoutSeconds: 100
`
	)
	existing := &schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "alpha", Namespace: "default"}}

	cases := map[string]struct {
		runtime  string
		trainJob string
		cluster  cluster
		// before is what the plugins before CoScheduling did.
		before  func(*pipeline.RuntimeInfo)
		want    string // the PodGroup as YAML; "" for none
		wantErr bool
	}{
		"PodGroup gangs every pod, initializers included": {
			runtime:  gangRuntime,
			trainJob: runningTrainJob,
			want:     gangPodGroup,
		},
		"offline, the PodGroup is built": {
			runtime:  gangRuntime,
			trainJob: runningTrainJob,
			cluster:  cluster{offline: true},
			want:     gangPodGroup,
		},
		"counts set by the ML plugins decide the gang": {
			runtime:  gangRuntime,
			trainJob: runningTrainJob,
			before: func(info *pipeline.RuntimeInfo) {
				info.TrainerPodSet().Count = 4
			},
			want: `
apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata:
  name: alpha
  namespace: default
  ownerReferences:
  - {apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, name: alpha, uid: uid-0001, controller: true, blockOwnerDeletion: true}
spec:
  minMember: 6
  minResources: {cpu: "6", memory: 24Gi}
  scheduleTimeoutSeconds: 100
`,
		},
		"runtime without coscheduling policy builds nothing": {
			runtime:  plainRuntime,
			trainJob: runningTrainJob,
		},
		"existing PodGroup of a running TrainJob is left alone": {
			runtime:  gangRuntime,
			trainJob: runningTrainJob,
			cluster:  cluster{objs: []client.Object{existing}},
		},
		"existing PodGroup of a suspended TrainJob is rebuilt": {
			runtime:  gangRuntime,
			trainJob: suspendedTrainJob,
			cluster:  cluster{objs: []client.Object{existing}},
			want:     gangPodGroup,
		},
		"PodGroup that cannot be read is an error": {
			runtime:  gangRuntime,
			trainJob: runningTrainJob,
			cluster:  cluster{getErr: errors.New("connection refused")},
			wantErr:  true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tj := pipelinetest.TrainJob(t, tc.trainJob)
			info := pipelinetest.Info(t, tj, pipelinetest.Runtime(t, tc.runtime))
			if tc.before != nil {
				tc.before(info)
			}
			podSets := append([]pipeline.PodSet(nil), info.PodSets...)
			for k := range podSets {
				podSets[k].SinglePodRequests = podSets[k].SinglePodRequests.DeepCopy()
			}

			got, err := tc.cluster.plugin(t).Build(context.Background(), info, tj)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Build error = %v, want error %v", err, tc.wantErr)
			}
			var want []client.Object
			if tc.want != "" {
				want = []client.Object{pipelinetest.Decode[schedv1alpha1.PodGroup](t, tc.want)}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Build (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(podSets, info.PodSets, cmpopts.IgnoreFields(pipeline.PodSet{}, "Endpoints")); diff != "" {
				t.Errorf("Build changed the pod sets (-before +after):\n%s", diff)
			}
		})
	}
}

func TestReconcilerBuilders(t *testing.T) {
	cases := map[string]struct {
		handle pipeline.Handle
		want   int
	}{
		"PodGroups, LimitRanges and RuntimeClasses are watched": {
			handle: pipeline.Handle{Client: clientWithMapper(t, true)},
			want:   3,
		},
		"without the PodGroup CRD nothing is watched": {
			handle: pipeline.Handle{Client: clientWithMapper(t, false)},
		},
		"offline nothing is watched": {
			handle: pipeline.Handle{Offline: true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, err := New(context.Background(), tc.handle)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(p.(*CoScheduling).ReconcilerBuilders()); got != tc.want {
				t.Errorf("ReconcilerBuilders() has %d builders, want %d", got, tc.want)
			}
		})
	}
}

// clientWithMapper knows the REST mappings of the kinds in its scheme, as
// the API server knows those of the installed CRDs.
func clientWithMapper(t *testing.T, withPodGroup bool) client.Client {
	s := testScheme(t, withPodGroup)
	return fake.NewClientBuilder().WithScheme(s).WithRESTMapper(testrestmapper.TestOnlyStaticRESTMapper(s)).Build()
}
