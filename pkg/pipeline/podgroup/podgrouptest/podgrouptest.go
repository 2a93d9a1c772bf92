// Package podgrouptest is the test scaffolding of the gang-scheduling
// plugins (CoScheduling, Volcano): a fake API server with or without the
// PodGroup CRD, and the check of their watches. Only tests import it.
package podgrouptest

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/api/meta/testrestmapper"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/pipelinetest"
)

// AddToScheme adds a scheduler's PodGroup types to a scheme.
type AddToScheme func(*runtime.Scheme) error

// Scheme has the Kubernetes and Trainer types and, unless addPodGroup is
// nil, the PodGroup's.
func Scheme(t testing.TB, addPodGroup AddToScheme) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	adds := []AddToScheme{clientgoscheme.AddToScheme, trainer.AddToScheme}
	if addPodGroup != nil {
		adds = append(adds, addPodGroup)
	}
	for _, add := range adds {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// Cluster is what a test case finds in the API server, or offline in the
// input files.
type Cluster struct {
	Offline bool
	Objs    []client.Object
	// GetErr fails every Get.
	GetErr error
}

// Gang is a gang-scheduling plugin under test: its factory, and what adds
// its PodGroup's types to a scheme.
type Gang struct {
	New         pipeline.Factory
	AddToScheme AddToScheme
	// APIVersion is the PodGroup's.
	APIVersion string
}

// Plugin builds the plugin, handing it a reader of c (offline, the offline
// handle's, of c's objects) whose scheme has the PodGroup's types.
func (g Gang) Plugin(t testing.TB, c Cluster) pipeline.Plugin {
	t.Helper()
	h := pipeline.OfflineHandle(pipeline.OperatorInfo{}, c.Objs...)
	if !c.Offline {
		b := fake.NewClientBuilder().WithScheme(Scheme(t, g.AddToScheme)).WithObjects(c.Objs...)
		if c.GetErr != nil {
			b = b.WithInterceptorFuncs(interceptor.Funcs{
				Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
					return c.GetErr
				},
			})
		}
		c := b.Build()
		h = pipeline.NewHandle(c, c.RESTMapper(), pipeline.OperatorInfo{})
	}
	p, err := g.New(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// CheckReconcilerBuilders checks that the plugin watches its PodGroups,
// LimitRanges and RuntimeClasses where the PodGroup CRD is installed, and
// nothing without it or offline.
func (g Gang) CheckReconcilerBuilders(t *testing.T) {
	// withMapper knows the REST mappings of the kinds in its scheme, as the
	// API server knows those of the installed CRDs.
	withMapper := func(add AddToScheme) pipeline.Handle {
		s := Scheme(t, add)
		c := fake.NewClientBuilder().WithScheme(s).WithRESTMapper(testrestmapper.TestOnlyStaticRESTMapper(s)).Build()
		return pipeline.NewHandle(c, c.RESTMapper(), pipeline.OperatorInfo{})
	}
	cases := map[string]struct {
		handle pipeline.Handle
		want   int
	}{
		"PodGroups, LimitRanges and RuntimeClasses are watched": {handle: withMapper(g.AddToScheme), want: 3},
		"without the PodGroup CRD nothing is watched":           {handle: withMapper(nil)},
		"offline nothing is watched":                            {handle: pipeline.OfflineHandle(pipeline.OperatorInfo{})},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, err := g.New(context.Background(), tc.handle)
			if err != nil {
				t.Fatal(err)
			}
			w, ok := p.(pipeline.WatchExtensionPlugin)
			if !ok {
				t.Fatalf("%s is not a WatchExtensionPlugin", p.Name())
			}
			if got := len(w.ReconcilerBuilders()); got != tc.want {
				t.Errorf("ReconcilerBuilders() has %d builders, want %d", got, tc.want)
			}
		})
	}
}

// TrainJobs of the Build cases, named alpha, with a runtime named gang.
const (
	RunningTrainJob   = `{metadata: {name: alpha}, spec: {runtimeRef: {name: gang}}}`
	SuspendedTrainJob = `{metadata: {name: alpha}, spec: {runtimeRef: {name: gang}, suspend: true}}`
)

// BuildCase is a case of a PodGroup plugin's Build.
type BuildCase struct {
	Runtime  string // the runtime as YAML
	TrainJob string // the TrainJob as YAML
	Cluster  Cluster
	// Before is what the plugins before the PodGroup's did.
	Before func(*pipeline.RuntimeInfo)
	// Want is the spec, as YAML, of the PodGroup alpha that the TrainJob
	// alpha owns; "" for no PodGroup.
	Want    string
	WantErr bool
}

// CheckBuild runs the Build cases of a gang-scheduling plugin, whose PodGroup's Go
// type is PG, and the cases every such plugin passes: gangRuntime builds
// gangPodGroup (offline too, and again for a suspended TrainJob whose
// PodGroup exists, or one it does not control holds its name), while a
// running TrainJob's existing PodGroup is left alone, one that cannot be
// read is an error, and plainRuntime, without the
// plugin's policy, builds nothing. Build never changes the pod sets.
// gangPodGroup and each case's Want are the spec of a PodGroup.
func CheckBuild[PG any, P interface {
	*PG
	client.Object
}](t *testing.T, g Gang, gangRuntime, plainRuntime, gangPodGroup string, cases map[string]BuildCase) {
	existing := P(new(PG))
	existing.SetName("alpha")
	existing.SetNamespace("default")
	existing.SetOwnerReferences(pipelinetest.ControlledBy("alpha"))
	theirs := P(new(PG))
	theirs.SetName("alpha")
	theirs.SetNamespace("default")
	common := map[string]BuildCase{
		"offline, the PodGroup is built": {
			Runtime: gangRuntime, TrainJob: RunningTrainJob, Cluster: Cluster{Offline: true}, Want: gangPodGroup,
		},
		"runtime without the policy builds nothing": {
			Runtime: plainRuntime, TrainJob: RunningTrainJob,
		},
		"existing PodGroup of a running TrainJob is left alone": {
			Runtime: gangRuntime, TrainJob: RunningTrainJob, Cluster: Cluster{Objs: []client.Object{existing}},
		},
		"a PodGroup of the TrainJob's name it does not control is not its own: built, for the applier to refuse": {
			Runtime: gangRuntime, TrainJob: RunningTrainJob, Cluster: Cluster{Objs: []client.Object{theirs}}, Want: gangPodGroup,
		},
		"existing PodGroup of a suspended TrainJob is rebuilt": {
			Runtime: gangRuntime, TrainJob: SuspendedTrainJob, Cluster: Cluster{Objs: []client.Object{existing}}, Want: gangPodGroup,
		},
		"PodGroup that cannot be read is an error": {
			Runtime: gangRuntime, TrainJob: RunningTrainJob, Cluster: Cluster{GetErr: errors.New("connection refused")}, WantErr: true,
		},
	}
	for name, tc := range common {
		if _, ok := cases[name]; ok {
			t.Fatalf("case %q is one of the common cases", name)
		}
		cases[name] = tc
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tj := pipelinetest.TrainJob(t, tc.TrainJob)
			info := pipelinetest.Info(t, tj, pipelinetest.Runtime(t, tc.Runtime))
			if tc.Before != nil {
				tc.Before(info)
			}
			podSets := append([]pipeline.PodSet(nil), info.PodSets...)
			for k := range podSets {
				podSets[k].SinglePodRequests = podSets[k].SinglePodRequests.DeepCopy()
			}

			plugin, ok := g.Plugin(t, tc.Cluster).(pipeline.ComponentBuilderPlugin)
			if !ok {
				t.Fatal("the plugin is not a ComponentBuilderPlugin")
			}
			got, err := plugin.Build(context.Background(), info, tj)
			if (err != nil) != tc.WantErr {
				t.Fatalf("Build error = %v, want error %v", err, tc.WantErr)
			}
			var want []client.Object
			if tc.Want != "" {
				want = []client.Object{P(pipelinetest.Decode[PG](t, g.podGroup(tc.Want)))}
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

// podGroup is the PodGroup alpha, owned by the TrainJob alpha, with spec.
func (g Gang) podGroup(spec string) string {
	return `
apiVersion: ` + g.APIVersion + `
kind: PodGroup
metadata:
  name: alpha
  namespace: default
  ownerReferences:
  - {apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, name: alpha, uid: uid-0001, controller: true, blockOwnerDeletion: true}
spec: ` + spec
}
