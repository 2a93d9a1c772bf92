package operator_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/scheme"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/integration/operator/internal/optest"
)

// Prefixes of the messages of the webhooks' denials (HTTP 403).
const (
	deniedTrainJob               = `admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request: `
	deniedTrainingRuntime        = `admission webhook "validator.trainingruntime.trainer.kubeflow.org" denied the request: `
	deniedClusterTrainingRuntime = `admission webhook "validator.clustertrainingruntime.trainer.kubeflow.org" denied the request: `
)

// admission is the outcome of a create or update: allowed (code 0), or
// refused with an HTTP code and message.
type admission struct {
	code    int32
	message string
}

var allowed = admission{}

// Parts of the API server's own messages.
const (
	uncheckedRules = `<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation`
	notSubdomain   = `a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`
)

// invalidTrainJob is a schema (CRD, CEL) refusal of TrainJob name.
func invalidTrainJob(name, detail string) admission {
	return admission{422, fmt.Sprintf(`TrainJob.trainer.kubeflow.org %q is invalid: %s`, name, detail)}
}

func checkAdmission(t *testing.T, err error, want admission) {
	t.Helper()
	if want == allowed {
		if err != nil {
			t.Fatalf("refused: %v", err)
		}
		return
	}
	wantStatus(t, err, want.code, want.message)
}

// warnings records the API server's warnings.
type warnings struct {
	mu  sync.Mutex
	all []string
}

func (w *warnings) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.all = append(w.all, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.all
	w.all = nil
	return out
}

// warningClient is an administrator's client that records warnings.
func warningClient(t testing.TB) (client.Client, *warnings) {
	t.Helper()
	w := &warnings{}
	cfg := rest.CopyConfig(env.Cluster.Config)
	cfg.WarningHandlerWithContext = w
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	return c, w
}

// TestTrainJobCreateValidation: what the schema (422) and the webhook
// (403) refuse when a TrainJob is created.
func TestTrainJobCreateValidation(t *testing.T) {
	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	createTrainingRuntime(t, ns, "torch", torchSpec())
	createTrainingRuntime(t, ns, "plain", runtimeSpec(&trainer.MLPolicy{NumNodes: ptr.To[int32](1)},
		replicatedJob(trainer.Node, trainer.AncestorTrainer, trainer.Node)))
	withInitializer := createClusterTrainingRuntime(t, "with-initializer", runtimeSpec(
		&trainer.MLPolicy{NumNodes: ptr.To[int32](1), MLPolicySource: trainer.MLPolicySource{Torch: &trainer.TorchMLPolicySource{}}},
		initializerJob(trainer.DatasetInitializerName), replicatedJob(trainer.Node, trainer.AncestorTrainer, trainer.Node)), nil)

	mib := strings.Repeat("x", 1<<20)
	cases := []struct {
		name string
		doc  string
		want admission
	}{
		{name: "namespaced runtime", doc: `
metadata: {name: ok}
spec: {runtimeRef: {name: torch, kind: TrainingRuntime}}`, want: allowed},
		{name: "missing runtime", doc: `
metadata: {name: missing}
spec: {runtimeRef: {name: missing, kind: TrainingRuntime}}`, want: admission{403, deniedTrainJob +
			`spec.runtimeRef: Invalid value: "missing": trainingruntimes.trainer.kubeflow.org "missing" not found: specified trainingRuntime must be created before the TrainJob is created`}},
		{name: "missing cluster runtime", doc: `
metadata: {name: missing-cluster}
spec: {runtimeRef: {name: missing}}`, want: admission{403, deniedTrainJob +
			`spec.runtimeRef: Invalid value: "missing": clustertrainingruntimes.trainer.kubeflow.org "missing" not found: specified clusterTrainingRuntime must be created before the TrainJob is created`}},
		{name: "unsupported runtime kind", doc: `
metadata: {name: unsupported}
spec: {runtimeRef: {name: torch, apiGroup: example.com, kind: Runtime}}`, want: admission{403, deniedTrainJob + `unsupported runtime: Runtime.example.com`}},
		{name: "negative numNodes", doc: `
metadata: {name: nodes-negative}
spec: {runtimeRef: {name: torch, kind: TrainingRuntime}, trainer: {numNodes: -1}}`,
			want: invalidTrainJob("nodes-negative", `spec.trainer.numNodes: Invalid value: -1: spec.trainer.numNodes in body should be greater than or equal to 0`)},
		{name: "zero numNodes", doc: `
metadata: {name: nodes-zero}
spec: {runtimeRef: {name: torch, kind: TrainingRuntime}, trainer: {numNodes: 0}}`, want: allowed},
		{name: "negative numProcPerNode", doc: `
metadata: {name: nproc-negative}
spec: {runtimeRef: {name: torch, kind: TrainingRuntime}, trainer: {numProcPerNode: -1}}`,
			want: invalidTrainJob("nproc-negative", `spec.trainer.numProcPerNode: Invalid value: -1: numProcPerNode must be greater than or equal to 1`)},
		{name: "zero numProcPerNode", doc: `
metadata: {name: nproc-zero}
spec: {runtimeRef: {name: torch, kind: TrainingRuntime}, trainer: {numProcPerNode: 0}}`,
			want: invalidTrainJob("nproc-zero", `spec.trainer.numProcPerNode: Invalid value: 0: numProcPerNode must be greater than or equal to 1`)},
		{name: "positive numProcPerNode", doc: `
metadata: {name: nproc-positive}
spec: {runtimeRef: {name: torch, kind: TrainingRuntime}, trainer: {numProcPerNode: 4}}`, want: allowed},
		{name: "model initializer without its job", doc: `
metadata: {name: model-init}
spec: {runtimeRef: {name: plain, kind: TrainingRuntime}, initializer: {model: {storageUri: "hf://model"}}}`, want: admission{403, deniedTrainJob +
			`spec.runtimeRef: Invalid value: {"name":"plain","apiGroup":"trainer.kubeflow.org","kind":"TrainingRuntime"}: must have model-initializer job when trainJob is configured with input modelConfig`}},
		{name: "dataset initializer without its job", doc: `
metadata: {name: dataset-init}
spec: {runtimeRef: {name: plain, kind: TrainingRuntime}, initializer: {dataset: {storageUri: "hf://dataset"}}}`, want: admission{403, deniedTrainJob +
			`spec.runtimeRef: Invalid value: {"name":"plain","apiGroup":"trainer.kubeflow.org","kind":"TrainingRuntime"}: must have dataset-initializer job when trainJob is configured with input datasetConfig`}},
		{name: "dataset initializer with a cluster runtime that has it", doc: `
metadata: {name: dataset-ok}
spec: {runtimeRef: {name: ` + withInitializer.Name + `}, initializer: {dataset: {storageUri: "hf://dataset"}}}`, want: allowed},
		{name: "torch trainer", doc: `
metadata: {name: torch-trainer}
spec:
  runtimeRef: {name: torch, kind: TrainingRuntime}
  trainer: {image: trainer, command: [torchrun, train.py], numNodes: 2, env: [{name: LR, value: "0.1"}]}`, want: allowed},
		{name: "reserved env", doc: `
metadata: {name: reserved-env}
spec:
  runtimeRef: {name: torch, kind: TrainingRuntime}
  trainer: {env: [{name: PET_NNODES, value: "2"}]}`, want: admission{403, deniedTrainJob +
			`spec.trainer.env: Invalid value: [{"name":"PET_NNODES","value":"2"}]: must not have reserved envs, invalid envs configured: [PET_NNODES]`}},
		{name: "runtimePatch of a job the runtime lacks", doc: `
metadata: {name: patch-unknown-job}
spec:
  runtimeRef: {name: torch, kind: TrainingRuntime}
  runtimePatches:
    - manager: test.io/manager
      trainingRuntimeSpec: {template: {spec: {replicatedJobs: [{name: launcher, template: {spec: {template: {spec: {nodeSelector: {a: b}}}}}}]}}}`,
			want: admission{403, deniedTrainJob +
				`spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].name: Invalid value: "launcher": must not have replicated job that doesn't exist in the runtime job template`}},
		{name: "runtimePatch of the trainer's env", doc: `
metadata: {name: patch-node-env}
spec:
  runtimeRef: {name: torch, kind: TrainingRuntime}
  runtimePatches:
    - manager: test.io/manager
      trainingRuntimeSpec: {template: {spec: {replicatedJobs: [{name: node, template: {spec: {template: {spec: {containers: [{name: node, env: [{name: A, value: b}]}]}}}}}]}}}`,
			want: admission{403, deniedTrainJob +
				`spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].template.spec.template.spec.containers[0].env: Forbidden: must not have envs for the dataset-initializer, model-initializer, node containers`}},
		// KEP-2782: a pod spec patch claims devices through DRA, each claim from a ResourceClaim or a template.
		{name: "runtimePatch of the trainer's resourceClaims", doc: `
metadata: {name: patch-claims}
spec:
  runtimeRef: {name: torch, kind: TrainingRuntime}
  runtimePatches:
    - manager: test.io/manager
      trainingRuntimeSpec: {template: {spec: {replicatedJobs: [{name: node, template: {spec: {template: {spec: {resourceClaims: [{name: gpu, resourceClaimTemplateName: gpu-8}]}}}}}]}}}`,
			want: allowed},
		{name: "runtimePatch claim from a claim and a template", doc: `
metadata: {name: patch-claim-both}
spec:
  runtimeRef: {name: torch, kind: TrainingRuntime}
  runtimePatches:
    - manager: test.io/manager
      trainingRuntimeSpec: {template: {spec: {replicatedJobs: [{name: node, template: {spec: {template: {spec: {resourceClaims: [{name: gpu, resourceClaimName: gpu, resourceClaimTemplateName: gpu-8}]}}}}}]}}}`,
			want: invalidTrainJob("patch-claim-both", `spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].template.spec.template.spec.resourceClaims: Invalid value: each claim must set only one of resourceClaimName or resourceClaimTemplateName`)},
		{name: "runtimePatch claim from nothing", doc: `
metadata: {name: patch-claim-none}
spec:
  runtimeRef: {name: torch, kind: TrainingRuntime}
  runtimePatches:
    - manager: test.io/manager
      trainingRuntimeSpec: {template: {spec: {replicatedJobs: [{name: node, template: {spec: {template: {spec: {resourceClaims: [{name: gpu}]}}}}}]}}}`,
			want: invalidTrainJob("patch-claim-none", `spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].template.spec.template.spec.resourceClaims: Invalid value: each claim must set either resourceClaimName or resourceClaimTemplateName`)},
		{name: "storageUri without scheme", doc: `
metadata: {name: uri-invalid}
spec: {runtimeRef: {name: ` + withInitializer.Name + `}, initializer: {dataset: {storageUri: "invalid"}}}`,
			want: invalidTrainJob("uri-invalid", `spec.initializer.dataset.storageUri: Invalid value: "invalid": storageUri may be empty, or it must be a valid URI (scheme://...)`)},
		{name: "storageUri without path", doc: `
metadata: {name: uri-no-path}
spec: {runtimeRef: {name: ` + withInitializer.Name + `}, initializer: {dataset: {storageUri: "hf://"}}}`,
			want: invalidTrainJob("uri-no-path", `spec.initializer.dataset.storageUri: Invalid value: "hf://": storageUri may be empty, or it must be a valid URI (scheme://...)`)},
		{name: "empty storageUri", doc: `
metadata: {name: uri-empty}
spec: {runtimeRef: {name: ` + withInitializer.Name + `}, initializer: {dataset: {storageUri: ""}}}`, want: allowed},
		{name: "valid storageUri", doc: `
metadata: {name: uri-valid}
spec: {runtimeRef: {name: ` + withInitializer.Name + `}, initializer: {dataset: {storageUri: "s3://bucket/data"}}}`, want: allowed},
		{name: "command item of 1 MiB", doc: `
metadata: {name: command-mib}
spec: {runtimeRef: {name: torch, kind: TrainingRuntime}, trainer: {command: [` + mib + `]}}`, want: allowed},
		{name: "command item over 1 MiB", doc: `
metadata: {name: command-over}
spec: {runtimeRef: {name: torch, kind: TrainingRuntime}, trainer: {command: [` + mib + `x]}}`,
			want: invalidTrainJob("command-over", `[spec.trainer.command[0]: Too long: may not be more than 1048576 bytes, `+uncheckedRules+`]`)},
		{name: "args item over 1 MiB", doc: `
metadata: {name: args-over}
spec: {runtimeRef: {name: torch, kind: TrainingRuntime}, trainer: {args: [` + mib + `x]}}`,
			want: invalidTrainJob("args-over", `[spec.trainer.args[0]: Too long: may not be more than 1048576 bytes, `+uncheckedRules+`]`)},
		// JobSet names the last pod <name>-node-0-0-<5 random characters>, and
		// refuses a JobSet whose pod names would pass 63 characters.
		{name: "name of 48 characters", doc: `
metadata: {name: ` + strings.Repeat("a", 48) + `}
spec: {runtimeRef: {name: torch, kind: TrainingRuntime}}`, want: allowed},
		{name: "name of 49 characters", doc: `
metadata: {name: ` + strings.Repeat("b", 49) + `}
spec: {runtimeRef: {name: torch, kind: TrainingRuntime}}`, want: admission{403, deniedTrainJob +
			`metadata.name: Invalid value: "` + strings.Repeat("b", 49) + `": must be no more than 48 characters with runtime "torch", and is 49: the longest name JobSet derives from it, pod "` +
			strings.Repeat("b", 49) + `-node-0-0-abcde", must be no more than 63 characters; shorten the name by 1`}},
		{name: "name of 48 characters and 11 nodes", doc: `
metadata: {name: ` + strings.Repeat("c", 48) + `}
spec: {runtimeRef: {name: torch, kind: TrainingRuntime}, trainer: {numNodes: 11}}`, want: admission{403, deniedTrainJob +
			`metadata.name: Invalid value: "` + strings.Repeat("c", 48) + `": must be no more than 47 characters with runtime "torch", and is 48: the longest name JobSet derives from it, pod "` +
			strings.Repeat("c", 48) + `-node-0-10-abcde", must be no more than 63 characters; shorten the name by 1`}},
		{name: "name of 64 characters", doc: `
metadata: {name: ` + strings.Repeat("a", 64) + `}
spec: {runtimeRef: {name: torch, kind: TrainingRuntime}}`,
			want: invalidTrainJob(strings.Repeat("a", 64), `<nil>: Invalid value: metadata.name must be no more than 63 characters`)},
		{name: "name with a leading digit", doc: `
metadata: {name: 1alpha}
spec: {runtimeRef: {name: torch, kind: TrainingRuntime}}`,
			want: invalidTrainJob("1alpha", `<nil>: Invalid value: metadata.name must match RFC 1035 DNS label format`)},
		{name: "name with a trailing hyphen", doc: `
metadata: {name: alpha-}
spec: {runtimeRef: {name: torch, kind: TrainingRuntime}}`,
			want: invalidTrainJob("alpha-", `[metadata.name: Invalid value: "alpha-": `+notSubdomain+`, <nil>: Invalid value: metadata.name must match RFC 1035 DNS label format]`)},
		{name: "upper-case name", doc: `
metadata: {name: Alpha}
spec: {runtimeRef: {name: torch, kind: TrainingRuntime}}`,
			want: invalidTrainJob("Alpha", `[metadata.name: Invalid value: "Alpha": `+notSubdomain+`, <nil>: Invalid value: metadata.name must match RFC 1035 DNS label format]`)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkAdmission(t, env.Client.Create(t.Context(), trainJobYAML(t, ns, tc.doc)), tc.want)
		})
	}
}

// TestTrainJobDefaults: the schema's defaults, the managedBy and manager
// rules, and the time the defaulter stamps on every runtimePatch.
func TestTrainJobDefaults(t *testing.T) {
	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	createTrainingRuntime(t, ns, "torch", torchSpec())
	cluster := createClusterTrainingRuntime(t, "default", torchSpec(), nil)

	before := metav1.Now().Rfc3339Copy()
	tj := trainJobYAML(t, ns, `
metadata: {name: defaults}
spec:
  runtimeRef: {name: `+cluster.Name+`}
  runtimePatches:
    - manager: kueue.x-k8s.io/manager
      trainingRuntimeSpec: {template: {spec: {replicatedJobs: [{name: node, template: {spec: {template: {spec: {nodeSelector: {a: b}}}}}}]}}}
    - manager: example.com/scheduler
      trainingRuntimeSpec: {template: {spec: {replicatedJobs: [{name: node, template: {spec: {template: {spec: {tolerations: [{key: gpu, operator: Exists}]}}}}}]}}}
`)
	create(t, tj)
	got := map[string]any{
		"suspend":   tj.Spec.Suspend,
		"managedBy": tj.Spec.ManagedBy,
		"apiGroup":  tj.Spec.RuntimeRef.APIGroup,
		"kind":      tj.Spec.RuntimeRef.Kind,
	}
	want := map[string]any{
		"suspend":   ptr.To(false),
		"managedBy": ptr.To(trainer.TrainJobControllerManager),
		"apiGroup":  ptr.To(trainer.GroupVersion.Group),
		"kind":      ptr.To(trainer.ClusterTrainingRuntimeKind),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	for _, p := range tj.Spec.RuntimePatches {
		if p.Time == nil || p.Time.Before(&before) || p.Time.After(time.Now().Add(time.Minute)) {
			t.Errorf("patch of %s: time %v, want the time of the create (after %v)", p.Manager, p.Time, before)
		}
	}
	// The defaulter sets the times alone: the rest stays as the user wrote it (a typed client would send the
	// quantity as the Go types spell it).
	written := &unstructured.Unstructured{}
	decode(t, `
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: as-written}
spec:
  runtimeRef: {name: `+cluster.Name+`}
  trainer: {resourcesPerNode: {requests: {cpu: 1000m}}}
  runtimePatches: [{manager: kueue.x-k8s.io/manager}]`, &written.Object)
	written.SetNamespace(ns)
	create(t, written)
	if cpu, _, _ := unstructured.NestedString(written.Object, "spec", "trainer", "resourcesPerNode", "requests", "cpu"); cpu != "1000m" {
		t.Errorf("spec.trainer.resourcesPerNode.requests.cpu = %q after the defaulter, want 1000m as created", cpu)
	}
	if patches, _, _ := unstructured.NestedSlice(written.Object, "spec", "runtimePatches"); len(patches) != 1 || patches[0].(map[string]any)["time"] == nil {
		t.Errorf("runtimePatches %v, want one with a time", patches)
	}

	cases := []struct {
		name string
		doc  string
		want admission
	}{
		{name: "managed by MultiKueue", doc: `
metadata: {name: multikueue}
spec: {runtimeRef: {name: torch, kind: TrainingRuntime}, managedBy: kueue.x-k8s.io/multikueue}`, want: allowed},
		{name: "managed by the trainer", doc: `
metadata: {name: trainer}
spec: {runtimeRef: {name: torch, kind: TrainingRuntime}, managedBy: trainer.kubeflow.org/trainjob-controller}`, want: allowed},
		{name: "managed by another controller", doc: `
metadata: {name: other}
spec: {runtimeRef: {name: torch, kind: TrainingRuntime}, managedBy: example.com/controller}`,
			want: invalidTrainJob("other", `spec.managedBy: Invalid value: "example.com/controller": ManagedBy must be trainer.kubeflow.org/trainjob-controller or kueue.x-k8s.io/multikueue if set`)},
		{name: "manager with a path", doc: `
metadata: {name: manager-path}
spec: {runtimeRef: {name: torch, kind: TrainingRuntime}, runtimePatches: [{manager: kueue.k8s.io/manager}]}`, want: allowed},
		{name: "manager without a path", doc: `
metadata: {name: manager-no-path}
spec: {runtimeRef: {name: torch, kind: TrainingRuntime}, runtimePatches: [{manager: kueue.k8s.io/}]}`, want: admission{403, deniedTrainJob +
			`spec.runtimePatches[0].manager: Invalid value: "kueue.k8s.io/": must be a domain-prefixed path (such as "acme.io/foo")`}},
		{name: "zero terminationGracePeriodSeconds", doc: terminationGracePeriod("tgps-zero", 0), want: allowed},
		{name: "positive terminationGracePeriodSeconds", doc: terminationGracePeriod("tgps-positive", 30), want: allowed},
		{name: "negative terminationGracePeriodSeconds", doc: terminationGracePeriod("tgps-negative", -1),
			want: invalidTrainJob("tgps-negative", `spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].template.spec.template.spec.terminationGracePeriodSeconds: Invalid value: -1: spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].template.spec.template.spec.terminationGracePeriodSeconds in body should be greater than or equal to 0`)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkAdmission(t, env.Client.Create(t.Context(), trainJobYAML(t, ns, tc.doc)), tc.want)
		})
	}
}

// TestDefaulterOnlyForRuntimePatches: the API server calls the defaulter
// only for a TrainJob with runtimePatches (its matchConditions), the only
// thing it stamps; every other TrainJob is admitted without the round trip.
func TestDefaulterOnlyForRuntimePatches(t *testing.T) {
	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	createTrainingRuntime(t, ns, "torch", torchSpec())
	calls := func() float64 {
		t.Helper()
		families, err := scrape(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		m, err := sample(families, "controller_runtime_webhook_requests_total",
			map[string]string{"code": "200", "webhook": "/mutate-trainer-kubeflow-org-v1alpha1-trainjob"})
		if err != nil {
			return 0 // not called yet
		}
		return m.GetCounter().GetValue()
	}

	before := calls()
	create(t, trainJobYAML(t, ns, `
metadata: {name: plain}
spec: {runtimeRef: {name: torch, kind: TrainingRuntime}, suspend: true}`))
	if got := calls(); got != before {
		t.Errorf("creating a TrainJob without runtimePatches called the defaulter %v times, want none", got-before)
	}
	patched := trainJobYAML(t, ns, `
metadata: {name: patched}
spec:
  runtimeRef: {name: torch, kind: TrainingRuntime}
  suspend: true
  runtimePatches: [{manager: kueue.x-k8s.io/manager}]`)
	create(t, patched)
	if got := calls(); got != before+1 {
		t.Errorf("creating a TrainJob with runtimePatches called the defaulter %v times, want once", got-before)
	}
	if p := patched.Spec.RuntimePatches[0]; p.Time == nil {
		t.Errorf("the runtimePatch has no time: %+v", p)
	}
}

func terminationGracePeriod(name string, seconds int) string {
	return fmt.Sprintf(`
metadata: {name: %s}
spec:
  runtimeRef: {name: torch, kind: TrainingRuntime}
  runtimePatches:
    - manager: test.io/manager
      trainingRuntimeSpec: {template: {spec: {replicatedJobs: [{name: node, template: {spec: {template: {spec: {terminationGracePeriodSeconds: %d}}}}}]}}}
`, name, seconds)
}

// TestTrainJobUpdateValidation: what may change after creation.
func TestTrainJobUpdateValidation(t *testing.T) {
	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	createTrainingRuntime(t, ns, "torch", torchSpec())
	createTrainingRuntime(t, ns, "other", torchSpec())
	long := metav1.NewTime(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC))

	newJob := func(t *testing.T, name string, suspend bool) *trainer.TrainJob {
		tj := trainJobYAML(t, ns, fmt.Sprintf(`
metadata: {name: %s}
spec:
  runtimeRef: {name: torch, kind: TrainingRuntime}
  suspend: %t
  managedBy: trainer.kubeflow.org/trainjob-controller
  trainer: {image: trainer:v1}
  initializer: {}
  runtimePatches:
    - manager: kueue.x-k8s.io/manager
      time: "2020-01-01T00:00:00Z"
      trainingRuntimeSpec: {template: {spec: {replicatedJobs: [{name: node, template: {spec: {template: {spec: {nodeSelector: {a: b}, terminationGracePeriodSeconds: 30}}}}}]}}}
    - manager: example.com/scheduler
      time: "2020-01-01T00:00:00Z"
      trainingRuntimeSpec: {template: {spec: {replicatedJobs: [{name: node, template: {spec: {template: {spec: {tolerations: [{key: gpu, operator: Exists}]}}}}}]}}}
`, name, suspend))
		create(t, tj)
		return tj
	}
	update := func(t *testing.T, tj *trainer.TrainJob, edit func(*trainer.TrainJob)) error {
		t.Helper()
		return updateTrainJob(t, tj, edit)
	}
	podSpec := func(tj *trainer.TrainJob, k int) *trainer.PodSpecPatch {
		return tj.Spec.RuntimePatches[k].TrainingRuntimeSpec.Template.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec
	}

	t.Run("immutable fields", func(t *testing.T) {
		tj := newJob(t, "immutable", true)
		for _, tc := range []struct {
			field string
			edit  func(*trainer.TrainJob)
		}{
			{"spec.managedBy", func(tj *trainer.TrainJob) { tj.Spec.ManagedBy = ptr.To(trainer.MultiKueueController) }},
			{"spec.runtimeRef", func(tj *trainer.TrainJob) { tj.Spec.RuntimeRef.Name = "other" }},
			{"spec.initializer", func(tj *trainer.TrainJob) {
				tj.Spec.Initializer = &trainer.Initializer{Model: &trainer.ModelInitializer{StorageUri: ptr.To("hf://model")}}
			}},
			{"spec.trainer", func(tj *trainer.TrainJob) { tj.Spec.Trainer.Image = ptr.To("trainer:v2") }},
			{"spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].template.spec.template.spec.terminationGracePeriodSeconds",
				func(tj *trainer.TrainJob) { podSpec(tj, 0).TerminationGracePeriodSeconds = ptr.To[int64](60) }},
		} {
			t.Run(tc.field, func(t *testing.T) {
				value := ""
				switch {
				case strings.HasSuffix(tc.field, "Seconds"):
					value = "60: "
				case tc.field == "spec.managedBy":
					value = `"kueue.x-k8s.io/multikueue": `
				}
				checkAdmission(t, update(t, tj, tc.edit), invalidTrainJob("immutable", tc.field+": Invalid value: "+value+"field is immutable"))
			})
		}
	})

	t.Run("runtimePatches while suspended", func(t *testing.T) {
		tj := newJob(t, "suspended", true)
		before := metav1.Now().Rfc3339Copy()
		checkAdmission(t, update(t, tj, func(tj *trainer.TrainJob) { podSpec(tj, 0).NodeSelector = map[string]string{"a": "c"} }), allowed)
		changed, unchanged := tj.Spec.RuntimePatches[0].Time, tj.Spec.RuntimePatches[1].Time
		if changed == nil || changed.Before(&before) {
			t.Errorf("the changed patch has time %v, want the time of the update (after %v)", changed, before)
		}
		if unchanged == nil || !unchanged.Equal(&long) {
			t.Errorf("the unchanged patch has time %v, want its old time %v", unchanged, long)
		}
	})

	t.Run("runtimePatches while running", func(t *testing.T) {
		tj := newJob(t, "running", false)
		checkAdmission(t, update(t, tj, func(tj *trainer.TrainJob) { podSpec(tj, 0).NodeSelector = map[string]string{"a": "c"} }),
			admission{403, deniedTrainJob + `spec.runtimePatches: Forbidden: RuntimePatches can only be modified when the TrainJob is suspended before or after the update`})
	})

	t.Run("runtimePatches while a suspended JobSet still runs pods", func(t *testing.T) {
		tj := newJob(t, "active", true)
		jobSetOf(t, tj)
		cluster.SetJobSetStatus(t, env.Client, key(tj), optest.Timeout, func(s *jobsetv1alpha2.JobSetStatus) {
			s.ReplicatedJobsStatus = []jobsetv1alpha2.ReplicatedJobStatus{{Name: trainer.Node, Active: 1}}
		})
		checkAdmission(t, update(t, tj, func(tj *trainer.TrainJob) { podSpec(tj, 0).NodeSelector = map[string]string{"a": "c"} }),
			admission{403, deniedTrainJob + `spec.runtimePatches: Forbidden: RuntimePatches cannot be modified when the JobSet's ReplicatedJob node is still active`})
	})
}

// TestRuntimeValidation: the schema checks runtimes' policies (422); the
// webhooks check the replicated jobs of TrainJob steps (403), skipping
// runtimes labelled webhook-validation: disabled.
func TestRuntimeValidation(t *testing.T) {
	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	c, warned := warningClient(t)
	createRuntime := func(t *testing.T, name, doc string) error {
		rt := decode(t, doc, &trainer.TrainingRuntime{})
		rt.Namespace, rt.Name = ns, name
		return c.Create(t.Context(), rt)
	}
	// stepJob is a runtime template of one replicated job running step
	// (ancestor label) in a container.
	stepJob := func(step string, replicas int, container string) string {
		return fmt.Sprintf(`
  template:
    spec:
      replicatedJobs:
        - name: %[1]s
          replicas: %[2]d
          template:
            metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: %[1]s}}
            spec: {template: {spec: {containers: [{name: %[3]s, image: %[3]s}]}}}`, step, replicas, container)
	}
	job := stepJob(trainer.AncestorTrainer, 1, trainer.Node)
	// namedJob is one more replicated job of stepJob's template, of no step.
	namedJob := func(name string) string {
		return fmt.Sprintf(`
        - name: %[1]s
          template: {spec: {template: {spec: {containers: [{name: worker, image: worker}]}}}}`, name)
	}

	policies := map[string]string{"torch": "torch: {}", "mpi": "mpi: {}", "jax": "jax: {}", "flux": "flux: {}", "xgboost": "xgboost: {}"}
	for _, combination := range [][]string{
		{"mpi", "torch"}, {"jax", "torch"}, {"torch", "flux"}, {"mpi", "flux"}, {"jax", "flux"}, {"jax", "mpi"}, {"torch", "mpi", "jax", "flux"},
	} {
		name := strings.Join(combination, "-")
		t.Run("policies "+name, func(t *testing.T) {
			var sources []string
			for _, p := range combination {
				sources = append(sources, policies[p])
			}
			err := createRuntime(t, name, "spec:\n  mlPolicy: {"+strings.Join(sources, ", ")+"}"+job)
			checkAdmission(t, err, admission{422, fmt.Sprintf(`TrainingRuntime.trainer.kubeflow.org %q is invalid: spec.mlPolicy: Invalid value: Only one of the policy can be configured`, name)})
		})
	}
	for _, tc := range []struct {
		name, doc string
		want      admission
	}{
		{"valid", "spec:\n  mlPolicy: {numNodes: 2, torch: {}}" + job, allowed},
		{"mpi implementation", "spec:\n  mlPolicy: {mpi: {mpiImplementation: Intel}}" + job, admission{422,
			`TrainingRuntime.trainer.kubeflow.org "mpi-implementation" is invalid: [spec.mlPolicy.mpi.mpiImplementation: Unsupported value: "Intel": supported values: "OpenMPI", "", ` + uncheckedRules + `]`}},
		{"mpi numprocpernode", "spec:\n  mlPolicy: {mpi: {numProcPerNode: 0}}" + job, admission{422,
			`TrainingRuntime.trainer.kubeflow.org "mpi-numprocpernode" is invalid: spec.mlPolicy.mpi.numProcPerNode: Invalid value: 0: NumProcPerNode in mpiPolicy must be >= 1`}},
		{"flux numprocpernode", "spec:\n  mlPolicy: {flux: {numProcPerNode: 0}}" + job, admission{422,
			`TrainingRuntime.trainer.kubeflow.org "flux-numprocpernode" is invalid: spec.mlPolicy.flux.numProcPerNode: Invalid value: 0: NumProcPerNode in fluxPolicy must be >= 1`}},
		{"trainer replicas", "spec:" + stepJob(trainer.AncestorTrainer, 2, trainer.Node),
			admission{403, deniedTrainingRuntime + `spec.template.spec.replicatedJobs[0].replicas: Invalid value: 2: always must be 1`}},
		{"initializer container", "spec:" + stepJob(trainer.AncestorDatasetInitializer, 1, "fetch"),
			admission{403, deniedTrainingRuntime + `spec.template.spec.replicatedJobs[0].template.spec.template.spec.containers: Invalid value: ["fetch"]: must contain the required container for the ancestor: dataset-initializer`}},
		{"replicated job name of 20 characters", "spec:" + stepJob(trainer.AncestorTrainer, 1, trainer.Node) + namedJob("workers-of-twenty-ch"), allowed},
		{"replicated job name of 21 characters", "spec:" + stepJob(trainer.AncestorTrainer, 1, trainer.Node) + namedJob("workers-of-twenty-one"),
			admission{403, deniedTrainingRuntime + `spec.template.spec.replicatedJobs[1].name: Invalid value: "workers-of-twenty-one": must be no more than 20 characters, and is 21: ` +
				`JobSet names the Jobs and pods of a TrainJob <trainjob>-<replicated job>-<index>-<index>-<5 random characters>, within 63 characters; shorten it by 1`}},
		{"validation disabled", "metadata: {labels: {trainer.kubeflow.org/webhook-validation: disabled}}\nspec:" + stepJob(trainer.AncestorTrainer, 2, trainer.Node), allowed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkAdmission(t, createRuntime(t, strings.ReplaceAll(tc.name, " ", "-"), tc.doc), tc.want)
		})
	}

	t.Run("MPI defaults", func(t *testing.T) {
		rt := decode(t, "spec:\n  mlPolicy: {mpi: {}}"+job, &trainer.TrainingRuntime{})
		rt.Namespace, rt.Name = ns, "mpi-defaults"
		create(t, rt)
		want := &trainer.MPIMLPolicySource{NumProcPerNode: ptr.To[int32](1), MPIImplementation: ptr.To(trainer.MPIImplementationOpenMPI),
			SSHAuthMountPath: ptr.To("/root/.ssh"), RunLauncherAsNode: ptr.To(false)}
		if diff := cmp.Diff(want, rt.Spec.MLPolicy.MPI); diff != "" {
			t.Errorf("MPI defaults (-want +got):\n%s", diff)
		}
	})

	t.Run("TrainingRuntime updates are not validated", func(t *testing.T) {
		rt := &trainer.TrainingRuntime{}
		if err := c.Get(t.Context(), nsName(ns, "valid"), rt); err != nil {
			t.Fatal(err)
		}
		rt.Spec.Template.Spec.ReplicatedJobs[0].Replicas = 2
		checkAdmission(t, c.Update(t.Context(), rt), allowed)
	})

	t.Run("ClusterTrainingRuntime", func(t *testing.T) {
		warned.take()
		ctr := createClusterTrainingRuntimeWith(t, c, "deprecated", torchSpec(), map[string]string{trainer.SupportLabel: trainer.SupportDeprecated})
		wantWarnings := []string{fmt.Sprintf(`ClusterTrainingRuntime %q is deprecated and will be removed in a future release of Kubeflow Trainer. See runtime deprecation policy: %s`, ctr.Name, trainer.DeprecationPolicyURL)}
		if diff := cmp.Diff(wantWarnings, warned.take()); diff != "" {
			t.Errorf("create warnings (-want +got):\n%s", diff)
		}

		tj := newTrainJob(ns, "uses-deprecated", trainer.ClusterTrainingRuntimeKind, ctr.Name)
		if err := c.Create(t.Context(), tj); err != nil {
			t.Fatal(err)
		}
		wantWarnings = []string{fmt.Sprintf(`Referenced ClusterTrainingRuntime %q is deprecated and will be removed in a future release of Kubeflow Trainer. See runtime deprecation policy: %s`, ctr.Name, trainer.DeprecationPolicyURL)}
		if diff := cmp.Diff(wantWarnings, warned.take()); diff != "" {
			t.Errorf("TrainJob create warnings (-want +got):\n%s", diff)
		}

		ctr.Spec.Template.Spec.ReplicatedJobs[0].Replicas = 2
		checkAdmission(t, c.Update(t.Context(), ctr), admission{403, deniedClusterTrainingRuntime +
			`spec.template.spec.replicatedJobs[0].replicas: Invalid value: 2: always must be 1`})
	})
}

// createClusterTrainingRuntimeWith is createClusterTrainingRuntime through c.
func createClusterTrainingRuntimeWith(t *testing.T, c client.Client, prefix string, spec trainer.TrainingRuntimeSpec, labels map[string]string) *trainer.ClusterTrainingRuntime {
	t.Helper()
	rt := &trainer.ClusterTrainingRuntime{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-", Labels: labels}, Spec: spec}
	if err := c.Create(t.Context(), rt); err != nil {
		t.Fatalf("create ClusterTrainingRuntime: %v", err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), rt) })
	return rt
}
