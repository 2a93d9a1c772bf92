package torch

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/pipelinetest"
)

// trainerRuntime is a runtime whose only replicated job is `node`, the
// trainer step, with mlPolicy and the job's one container given in YAML flow
// style.
func trainerRuntime(t testing.TB, mlPolicy, container string) *pipeline.Runtime {
	t.Helper()
	return pipelinetest.TrainerRuntime{Name: "torch-distributed", MLPolicy: mlPolicy, Pod: `{containers: [` + container + `]}`}.Runtime(t)
}

// torchRuntime is torch-distributed with mlPolicy.numNodes 2 and the `node`
// container's resources given in YAML flow style.
func torchRuntime(t testing.TB, resources string) *pipeline.Runtime {
	t.Helper()
	return trainerRuntime(t, `{numNodes: 2, torch: {}}`, `{name: node, image: pytorch/pytorch, resources: `+resources+`}`)
}

// trainerResult is what the plugin settles on the trainer step.
type trainerResult struct {
	Count   int32
	Env     []corev1.EnvVar
	Ports   []corev1.ContainerPort
	Command []string
	Args    []string
}

func trainerResultOf(t testing.TB, info *pipeline.RuntimeInfo) trainerResult {
	t.Helper()
	ps := info.TrainerPodSet()
	if ps == nil {
		t.Fatal("no trainer pod set")
	}
	r := trainerResult{Count: ps.Count}
	if c := ps.Container("node"); c != nil {
		r.Env, r.Ports, r.Command, r.Args = c.Env, c.Ports, c.Command, c.Args
	}
	return r
}

func env(name, value string) corev1.EnvVar { return corev1.EnvVar{Name: name, Value: value} }

func nodeRank() corev1.EnvVar {
	return corev1.EnvVar{Name: "PET_NODE_RANK", ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['batch.kubernetes.io/job-completion-index']"},
	}}
}

// torchrunEnv are the five PET_* variables of TrainJob "alpha".
func torchrunEnv(nodes, nproc string) []corev1.EnvVar {
	return []corev1.EnvVar{
		env("PET_NNODES", nodes),
		env("PET_NPROC_PER_NODE", nproc),
		nodeRank(),
		env("PET_MASTER_ADDR", "alpha-node-0-0.alpha"),
		env("PET_MASTER_PORT", "29500"),
	}
}

var trainerPort = []corev1.ContainerPort{{ContainerPort: 29500, Protocol: corev1.ProtocolTCP}}

func concat[T any](parts ...[]T) []T {
	var out []T
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func enforce(t testing.TB, rt *pipeline.Runtime, tj *trainer.TrainJob) (*pipeline.RuntimeInfo, error) {
	t.Helper()
	info := pipelinetest.Info(t, tj, rt)
	p, err := New(context.Background(), pipeline.OfflineHandle(pipeline.OperatorInfo{}))
	if err != nil {
		t.Fatal(err)
	}
	before := tj.DeepCopy()
	err = p.(pipeline.EnforceMLPolicyPlugin).EnforceMLPolicy(info, tj)
	if diff := cmp.Diff(before, tj); diff != "" {
		t.Errorf("EnforceMLPolicy changed the TrainJob (-before +after):\n%s", diff)
	}
	return info, err
}

func TestEnforceMLPolicy(t *testing.T) {
	cases := []struct {
		name    string
		runtime *pipeline.Runtime
		trainer string
		want    trainerResult
	}{
		{
			name:    "torchrun: TrainJob env first, then the five PET_* variables, and port 29500",
			runtime: torchRuntime(t, "{}"),
			trainer: `{numNodes: 100, env: [{name: TRAIN_JOB, value: "1"}]}`,
			want: trainerResult{
				Count: 100,
				Env:   concat([]corev1.EnvVar{env("TRAIN_JOB", "1")}, torchrunEnv("100", "1")),
				Ports: trainerPort,
			},
		},
		{
			name: "runtime env keeps its place; TrainJob env replaces the same name and appends new ones",
			runtime: trainerRuntime(t, `{numNodes: 2, torch: {}}`,
				`{name: node, image: pytorch/pytorch, env: [{name: A, value: runtime}, {name: B, value: runtime}]}`),
			trainer: `{env: [{name: B, value: job}, {name: C, value: job}]}`,
			want: trainerResult{
				Count: 2,
				Env:   concat([]corev1.EnvVar{env("A", "runtime"), env("B", "job"), env("C", "job")}, torchrunEnv("2", "1")),
				Ports: trainerPort,
			},
		},
		{
			name:    "numNodes unset: the runtime's mlPolicy.numNodes",
			runtime: torchRuntime(t, "{}"),
			trainer: `{image: custom}`,
			want:    trainerResult{Count: 2, Env: torchrunEnv("2", "1"), Ports: trainerPort},
		},
		{
			name:    "numNodes 0 is kept, as JobSet allows zero replicas",
			runtime: torchRuntime(t, "{}"),
			trainer: `{numNodes: 0}`,
			want:    trainerResult{Count: 0, Env: torchrunEnv("0", "1"), Ports: trainerPort},
		},
		{
			name:    "no spec.trainer: the runtime's count, and no env or port (as upstream)",
			runtime: torchRuntime(t, "{}"),
			want:    trainerResult{Count: 2},
		},
		{
			name:    "runtime without mlPolicy.torch: nothing changes",
			runtime: trainerRuntime(t, `{numNodes: 2}`, `{name: node, image: busybox}`),
			trainer: `{numNodes: 5, env: [{name: A, value: "1"}]}`,
			want:    trainerResult{Count: 2},
		},
		{
			name: "a port the runtime declares stays beside 29500",
			runtime: trainerRuntime(t, `{torch: {}}`,
				`{name: node, image: pytorch/pytorch, ports: [{name: metrics, containerPort: 8080}]}`),
			trainer: `{numNodes: 3}`,
			want: trainerResult{
				Count: 3,
				Env:   torchrunEnv("3", "1"),
				Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 8080}, {ContainerPort: 29500, Protocol: corev1.ProtocolTCP}},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			info, err := enforce(t, tc.runtime, pipelinetest.TrainJobOn(t, "torch-distributed", tc.trainer))
			if err != nil {
				t.Fatalf("EnforceMLPolicy: %v", err)
			}
			if diff := cmp.Diff(tc.want, trainerResultOf(t, info)); diff != "" {
				t.Errorf("trainer (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEnforceMLPolicyTrainerStepWithoutNodeContainer(t *testing.T) {
	rt := trainerRuntime(t, `{torch: {}}`, `{name: trainer, image: pytorch/pytorch}`)
	info, err := enforce(t, rt, pipelinetest.TrainJobOn(t, "odd", `{numNodes: 4, env: [{name: A, value: "1"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	ps := info.TrainerPodSet()
	if ps.Count != 4 {
		t.Errorf("count = %d, want 4", ps.Count)
	}
	if c := ps.Template.Spec.Containers[0]; c.Env != nil || c.Ports != nil {
		t.Errorf("container %q changed: env %v, ports %v", c.Name, c.Env, c.Ports)
	}
}

// The master is the first pod of the trainer job, whatever its name, under
// the JobSet's subdomain; upstream writes alpha-node-0-0.alpha regardless.
func TestMasterAddrIsTheFirstTrainerPod(t *testing.T) {
	rt := pipelinetest.TrainerRuntime{
		Name: "torch-distributed", MLPolicy: "{torch: {}}", Network: "{subdomain: workers}", Job: "trainer",
		Pod: "{containers: [{name: node, image: pytorch/pytorch}]}",
	}.Runtime(t)
	info, err := enforce(t, rt, pipelinetest.TrainJobOn(t, "torch-distributed", `{numNodes: 2}`))
	if err != nil {
		t.Fatal(err)
	}
	want := concat(torchrunEnv("2", "1")[:3], []corev1.EnvVar{env("PET_MASTER_ADDR", "alpha-trainer-0-0.workers"), env("PET_MASTER_PORT", "29500")})
	if diff := cmp.Diff(want, trainerResultOf(t, info).Env); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
}

// The CPU rounding and GPU rules of spec §2.6, on the resources of the
// trainer's `node` container after resourcesPerNode is merged in.
func TestNumProcPerNode(t *testing.T) {
	cases := []struct {
		name             string
		runtimeResources string
		trainer          string
		want             string
	}{
		{name: "no resources anywhere: 1", runtimeResources: "{}", trainer: "{}", want: "1"},
		{name: "CPU request 4: 4", runtimeResources: "{}", trainer: `{resourcesPerNode: {requests: {cpu: "4"}}}`, want: "4"},
		{name: "CPU request 2.5: rounded up to 3", runtimeResources: "{}", trainer: `{resourcesPerNode: {requests: {cpu: "2.5"}}}`, want: "3"},
		{name: "CPU request 2500m: rounded up to 3", runtimeResources: "{}", trainer: `{resourcesPerNode: {requests: {cpu: 2500m}}}`, want: "3"},
		{name: "CPU request 0.7: at least 1", runtimeResources: "{}", trainer: `{resourcesPerNode: {requests: {cpu: "0.7"}}}`, want: "1"},
		{name: "CPU request 3.7: rounded up to 4", runtimeResources: "{}", trainer: `{resourcesPerNode: {requests: {cpu: "3.7"}}}`, want: "4"},
		{name: "CPU limit only: the limit", runtimeResources: "{}", trainer: `{resourcesPerNode: {limits: {cpu: "6"}}}`, want: "6"},
		{name: "CPU request zero: the limit", runtimeResources: "{}", trainer: `{resourcesPerNode: {requests: {cpu: "0"}, limits: {cpu: "5"}}}`, want: "5"},
		{name: "CPU request and limit: the request", runtimeResources: "{}", trainer: `{resourcesPerNode: {requests: {cpu: "2"}, limits: {cpu: "8"}}}`, want: "2"},
		{name: "runtime CPU, TrainJob sets only memory: the runtime CPU", runtimeResources: `{requests: {cpu: "8"}}`, trainer: `{resourcesPerNode: {requests: {memory: 4Gi}}}`, want: "8"},
		{name: "runtime CPU and no resourcesPerNode: the runtime CPU", runtimeResources: `{requests: {cpu: "8"}}`, trainer: "{}", want: "8"},
		{name: "TrainJob CPU replaces the runtime CPU", runtimeResources: `{requests: {cpu: "8"}}`, trainer: `{resourcesPerNode: {requests: {cpu: "2"}}}`, want: "2"},
		{name: "GPU limit in the TrainJob: auto", runtimeResources: "{}", trainer: `{resourcesPerNode: {limits: {nvidia.com/gpu: "4"}}}`, want: "auto"},
		{name: "GPU request in the runtime: auto", runtimeResources: `{requests: {nvidia.com/gpu: "2"}, limits: {nvidia.com/gpu: "2"}}`, trainer: "{}", want: "auto"},
		{name: "any resource named gpu counts: auto", runtimeResources: "{}", trainer: `{resourcesPerNode: {limits: {amd.com/gpu: "1", cpu: "4"}}}`, want: "auto"},
		{
			name:             "GPU only in the runtime, TrainJob sets only CPU: auto (upstream's defect gave 16)",
			runtimeResources: `{limits: {nvidia.com/gpu: "8"}}`,
			trainer:          `{resourcesPerNode: {requests: {cpu: "16"}, limits: {cpu: "16"}}}`,
			want:             "auto",
		},
		{name: "a GPU resource of 0: the CPU count", runtimeResources: `{limits: {nvidia.com/gpu: "0", cpu: "3"}}`, trainer: "{}", want: "3"},
		{name: "explicit numProcPerNode with GPUs is kept", runtimeResources: `{limits: {nvidia.com/gpu: "8"}}`, trainer: `{numProcPerNode: 4}`, want: "4"},
		{name: "explicit numProcPerNode on CPU is kept", runtimeResources: "{}", trainer: `{numProcPerNode: 2, resourcesPerNode: {requests: {cpu: "16"}}}`, want: "2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			info, err := enforce(t, torchRuntime(t, tc.runtimeResources), pipelinetest.TrainJobOn(t, "torch-distributed", tc.trainer))
			if err != nil {
				t.Fatal(err)
			}
			var got string
			for _, e := range trainerResultOf(t, info).Env {
				if e.Name == "PET_NPROC_PER_NODE" {
					got = e.Value
				}
			}
			if got != tc.want {
				t.Errorf("PET_NPROC_PER_NODE = %q, want %q", got, tc.want)
			}
		})
	}
}

// envInjectionRuntime has, in job `node`, the trainer container, an init
// container `preflight` and a sidecar `metrics`; and a job `aux` with a
// container `watcher` and an init container `setup`.
func envInjectionRuntime(t testing.TB, targets string) *pipeline.Runtime {
	t.Helper()
	return pipelinetest.Runtime(t, fmt.Sprintf(`
apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata:
  name: torch-with-checks
spec:
  mlPolicy:
    numNodes: 2
    torch:
      envInjection:
        targets: %s
  template:
    spec:
      replicatedJobs:
      - name: aux
        template:
          spec:
            template:
              spec:
                initContainers:
                - name: setup
                  image: busybox
                containers:
                - name: watcher
                  image: busybox
      - name: node
        template:
          metadata:
            labels:
              trainer.kubeflow.org/trainjob-ancestor-step: trainer
          spec:
            template:
              spec:
                initContainers:
                - name: preflight
                  image: busybox
                  env:
                  - {name: CHECK, value: nccl}
                  - {name: PET_NNODES, value: "7"}
                containers:
                - name: node
                  image: pytorch/pytorch
                  resources: {limits: {nvidia.com/gpu: "8"}}
                - name: metrics
                  image: exporter
`, targets))
}

func TestEnvInjection(t *testing.T) {
	type targetEnv struct{ Job, Container string }
	cases := []struct {
		name        string
		targets     string
		runtimeRef  string
		trainer     string
		wantTargets map[targetEnv][]corev1.EnvVar
		wantNodeEnv []corev1.EnvVar
		wantErr     string
	}{
		{
			name:       "init container gets all five, replacing a PET_* it had in place",
			targets:    `[{jobName: node, containerNames: [preflight]}]`,
			runtimeRef: "torch-with-checks",
			trainer:    `{numNodes: 4}`,
			wantTargets: map[targetEnv][]corev1.EnvVar{
				{"node", "preflight"}: {env("CHECK", "nccl"), env("PET_NNODES", "4"), env("PET_NPROC_PER_NODE", "auto"), nodeRank(),
					env("PET_MASTER_ADDR", "alpha-node-0-0.alpha"), env("PET_MASTER_PORT", "29500")},
				{"node", "metrics"}: nil,
			},
			wantNodeEnv: torchrunEnv("4", "auto"),
		},
		{
			name:       "sidecar container",
			targets:    `[{jobName: node, containerNames: [metrics]}]`,
			runtimeRef: "torch-with-checks",
			trainer:    `{numNodes: 4}`,
			wantTargets: map[targetEnv][]corev1.EnvVar{
				{"node", "metrics"}:   torchrunEnv("4", "auto"),
				{"node", "preflight"}: {env("CHECK", "nccl"), env("PET_NNODES", "7")},
			},
			wantNodeEnv: torchrunEnv("4", "auto"),
		},
		{
			name:       "several containers of one job and several jobs",
			targets:    `[{jobName: node, containerNames: [preflight, metrics]}, {jobName: aux, containerNames: [watcher, setup]}]`,
			runtimeRef: "torch-with-checks",
			trainer:    `{numNodes: 3, numProcPerNode: 2}`,
			wantTargets: map[targetEnv][]corev1.EnvVar{
				{"node", "preflight"}: concat([]corev1.EnvVar{env("CHECK", "nccl")}, torchrunEnv("3", "2")),
				{"node", "metrics"}:   torchrunEnv("3", "2"),
				{"aux", "watcher"}:    torchrunEnv("3", "2"),
				{"aux", "setup"}:      torchrunEnv("3", "2"),
			},
			wantNodeEnv: torchrunEnv("3", "2"),
		},
		{
			name:       "torchtune: targets still get the master address, the trainer does not",
			targets:    `[{jobName: node, containerNames: [metrics]}]`,
			runtimeRef: "torchtune-llama3.2-1b",
			trainer:    `{command: [tune, run]}`,
			wantTargets: map[targetEnv][]corev1.EnvVar{
				{"node", "metrics"}: torchrunEnv("2", "auto"),
			},
			wantNodeEnv: torchrunEnv("2", "auto")[:3],
		},
		{
			name:       "no spec.trainer: targets get PET_* all the same, the trainer nothing",
			targets:    `[{jobName: aux, containerNames: [watcher]}]`,
			runtimeRef: "torch-with-checks",
			wantTargets: map[targetEnv][]corev1.EnvVar{
				{"aux", "watcher"}: torchrunEnv("2", "auto"),
			},
		},
		{
			name:       "missing job",
			targets:    `[{jobName: node, containerNames: [metrics]}, {jobName: launcher, containerNames: [check]}]`,
			runtimeRef: "torch-with-checks",
			trainer:    `{numNodes: 4}`,
			wantErr:    `envInjection target podSet "launcher" container "check" not found in runtime template`,
		},
		{
			name:       "missing container",
			targets:    `[{jobName: aux, containerNames: [watcher, sidecar]}]`,
			runtimeRef: "torch-with-checks",
			trainer:    `{numNodes: 4}`,
			wantErr:    `envInjection target podSet "aux" container "sidecar" not found in runtime template`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			info, err := enforce(t, envInjectionRuntime(t, tc.targets), pipelinetest.TrainJobOn(t, tc.runtimeRef, tc.trainer))
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				// Nothing was changed before the error.
				untouched := pipelinetest.Info(t, pipelinetest.TrainJobOn(t, tc.runtimeRef, tc.trainer), envInjectionRuntime(t, tc.targets))
				if diff := cmp.Diff(untouched.Template, info.Template); diff != "" {
					t.Errorf("template changed before the error (-before +after):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatalf("EnforceMLPolicy: %v", err)
			}
			for target, want := range tc.wantTargets {
				c := info.PodSet(target.Job).AnyContainer(target.Container)
				if diff := cmp.Diff(want, c.Env); diff != "" {
					t.Errorf("%s/%s env (-want +got):\n%s", target.Job, target.Container, diff)
				}
			}
			if diff := cmp.Diff(tc.wantNodeEnv, info.TrainerPodSet().Container("node").Env); diff != "" {
				t.Errorf("node env (-want +got):\n%s", diff)
			}
		})
	}
}

var quantityEqual = cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })

func validate(t testing.TB, rt *pipeline.Runtime, tj *trainer.TrainJob) field.ErrorList {
	t.Helper()
	p, err := New(context.Background(), pipeline.OfflineHandle(pipeline.OperatorInfo{}))
	if err != nil {
		t.Fatal(err)
	}
	warnings, errs := p.(pipeline.CustomValidationPlugin).Validate(context.Background(), pipelinetest.Info(t, tj, rt), nil, tj)
	if warnings != nil {
		t.Errorf("warnings = %v, want none", warnings)
	}
	return errs
}

func TestValidate(t *testing.T) {
	reservedTrainer := `{env: [{name: PET_NODE_RANK, value: "0"}, {name: FOO, value: bar}, {name: PET_MASTER_ADDR, value: x}]}`
	reservedEnv := []corev1.EnvVar{env("PET_NODE_RANK", "0"), env("FOO", "bar"), env("PET_MASTER_ADDR", "x")}
	cases := []struct {
		name    string
		runtime *pipeline.Runtime
		tj      *trainer.TrainJob
		want    field.ErrorList
	}{
		{
			name:    "torchrun TrainJob with its own env is valid",
			runtime: torchRuntime(t, "{}"),
			tj:      pipelinetest.TrainJobOn(t, "torch-distributed", `{numNodes: 2, env: [{name: NCCL_DEBUG, value: INFO}]}`),
		},
		{
			name:    "reserved envs are listed sorted",
			runtime: torchRuntime(t, "{}"),
			tj:      pipelinetest.TrainJobOn(t, "torch-distributed", reservedTrainer),
			want: field.ErrorList{field.Invalid(field.NewPath("spec", "trainer", "env"), reservedEnv,
				"must not have reserved envs, invalid envs configured: [PET_MASTER_ADDR PET_NODE_RANK]")},
		},
		{
			name:    "reserved envs are refused for torchtune too",
			runtime: torchtuneRuntime(t, `{}`),
			tj:      pipelinetest.TrainJobOn(t, "torchtune-llama3.2-1b", `{command: [tune, run], env: [{name: PET_NNODES, value: "2"}]}`),
			want: field.ErrorList{field.Invalid(field.NewPath("spec", "trainer", "env"), []corev1.EnvVar{env("PET_NNODES", "2")},
				"must not have reserved envs, invalid envs configured: [PET_NNODES]")},
		},
		{
			name:    "runtime without mlPolicy.torch: nothing is checked",
			runtime: trainerRuntime(t, `{}`, `{name: node, image: busybox}`),
			tj:      pipelinetest.TrainJobOn(t, "plain", reservedTrainer),
		},
		{
			name:    "envInjection into an init container and a sidecar is valid",
			runtime: envInjectionRuntime(t, `[{jobName: node, containerNames: [preflight, metrics]}, {jobName: aux, containerNames: [setup]}]`),
			tj:      pipelinetest.TrainJobOn(t, "torch-with-checks", `{numNodes: 2}`),
		},
		{
			name:    "envInjection: missing job and missing container, each reported",
			runtime: envInjectionRuntime(t, `[{jobName: launcher, containerNames: [check]}, {jobName: aux, containerNames: [watcher, sidecar]}]`),
			tj:      pipelinetest.TrainJobOn(t, "torch-with-checks", `{numNodes: 2}`),
			want: field.ErrorList{
				field.Invalid(field.NewPath("spec", "runtimeRef"), "torch-with-checks",
					`envInjection target podSet "launcher" container "check" not found in runtime template`),
				field.Invalid(field.NewPath("spec", "runtimeRef"), "torch-with-checks",
					`envInjection target podSet "aux" container "sidecar" not found in runtime template`),
			},
		},
		{
			name:    "envInjection is checked without spec.trainer",
			runtime: envInjectionRuntime(t, `[{jobName: node, containerNames: [sidecar]}]`),
			tj:      pipelinetest.TrainJobOn(t, "torch-with-checks", ""),
			want: field.ErrorList{field.Invalid(field.NewPath("spec", "runtimeRef"), "torch-with-checks",
				`envInjection target podSet "node" container "sidecar" not found in runtime template`)},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, validate(t, tc.runtime, tc.tj), quantityEqual); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

// Running the policy twice gives what running it once gives, so a retried
// build or a second look by describe-pipeline cannot drift.
func TestEnforceMLPolicyIsIdempotent(t *testing.T) {
	cases := []struct {
		name string
		rt   *pipeline.Runtime
		tj   *trainer.TrainJob
	}{
		{"torchrun", trainerRuntime(t, `{torch: {envInjection: {targets: []}}}`, `{name: node, image: pytorch/pytorch}`), pipelinetest.TrainJobOn(t, "torch-distributed", `{numNodes: 3, env: [{name: A, value: "1"}]}`)},
		{"torchtune", torchtuneRuntime(t, "{}"), pipelinetest.TrainJobOn(t, "torchtune-llama3.2-1b", `{command: [tune, run], args: ["model.lora_attn_modules=[q_proj]"]}`)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			info, err := enforce(t, tc.rt, tc.tj)
			if err != nil {
				t.Fatal(err)
			}
			once := info.Template.DeepCopy()
			if err := (&Torch{}).EnforceMLPolicy(info, tc.tj); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(once, info.Template, quantityEqual); diff != "" {
				t.Errorf("second run changed the template (-once +twice):\n%s", diff)
			}
		})
	}
}

// BenchmarkEnforceMLPolicy measures the policy on 64 nodes of 8 GPUs; the
// whole build's budget is 300 allocations.
func BenchmarkEnforceMLPolicy(b *testing.B) {
	cases := []struct {
		name string
		rt   *pipeline.Runtime
		tj   *trainer.TrainJob
	}{
		{
			name: "torchrun with envInjection",
			rt:   envInjectionRuntime(b, `[{jobName: node, containerNames: [preflight]}]`),
			tj: pipelinetest.TrainJobOn(b, "torch-with-checks",
				`{numNodes: 64, env: [{name: NCCL_DEBUG, value: INFO}, {name: TRAIN_JOB, value: "1"}], resourcesPerNode: {limits: {nvidia.com/gpu: "8"}}}`),
		},
		{
			name: "torchtune",
			rt:   torchtuneRuntime(b, `{limits: {nvidia.com/gpu: "8"}}`),
			tj:   pipelinetest.TrainJobOn(b, "torchtune-llama3.3-70b", `{numNodes: 64, command: [tune, run], args: [epochs=1]}`),
		},
	}
	p := &Torch{}
	for _, bc := range cases {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				info, err := pipeline.NewRuntimeInfo(bc.tj, bc.rt)
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if err := p.EnforceMLPolicy(info, bc.tj); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The validation message lists reserved envs in this order.
func TestReservedEnvsAreSorted(t *testing.T) {
	if !slices.IsSorted(reservedEnvs[:]) {
		t.Errorf("reservedEnvs %v are not sorted", reservedEnvs)
	}
}

func TestName(t *testing.T) {
	p, err := New(context.Background(), pipeline.OfflineHandle(pipeline.OperatorInfo{}))
	if err != nil || p.Name() != "Torch" {
		t.Errorf("New() = %v, %v; want the Torch plugin", p, err)
	}
}
