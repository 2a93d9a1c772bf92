package jobset

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/pipelinetest"
)

func testScheme(t testing.TB) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, jobsetv1alpha2.AddToScheme, trainer.AddToScheme} {
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
	// getErr fails every Get of a JobSet.
	getErr error
}

func (c cluster) plugin(t testing.TB) *JobSet {
	t.Helper()
	h := pipeline.OfflineHandle(pipeline.OperatorInfo{})
	if !c.offline {
		b := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(c.objs...)
		if c.getErr != nil {
			b = b.WithInterceptorFuncs(interceptor.Funcs{
				Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					if _, ok := obj.(*jobsetv1alpha2.JobSet); ok {
						return c.getErr
					}
					return cl.Get(ctx, key, obj, opts...)
				},
			})
		}
		cl := b.Build()
		h = pipeline.NewHandle(cl, cl.RESTMapper(), pipeline.OperatorInfo{})
	}
	p, err := New(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	return p.(*JobSet)
}

// torchRuntime has both initializers and a two-node trainer.
const torchRuntime = `
apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata:
  name: torch-with-initializers
spec:
  mlPolicy:
    numNodes: 2
    torch: {}
  template:
    metadata:
      labels:
        runtime-label: from-runtime
      annotations:
        runtime-annotation: from-runtime
    spec:
      replicatedJobs:
      - name: dataset-initializer
        template:
          metadata:
            labels:
              trainer.kubeflow.org/trainjob-ancestor-step: dataset-initializer
          spec:
            template:
              spec:
                containers:
                - name: dataset-initializer
                  image: dataset-initializer:v1
                  env:
                  - name: STORAGE_URI
                    value: hf://runtime/dataset
                  volumeMounts:
                  - name: initializer
                    mountPath: /workspace
      - name: model-initializer
        template:
          metadata:
            labels:
              trainer.kubeflow.org/trainjob-ancestor-step: model-initializer
          spec:
            template:
              spec:
                containers:
                - name: model-initializer
                  image: model-initializer:v1
                  volumeMounts:
                  - name: initializer
                    mountPath: /workspace
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
                  image: preflight:v1
                containers:
                - name: node
                  image: pytorch:v1
                  command: [torchrun, /workspace/train.py]
                  env:
                  - name: RUNTIME_ENV
                    value: from-runtime
                  volumeMounts:
                  - name: initializer
                    mountPath: /workspace
`

// deepspeedRuntime runs its MPI launcher as a node: the job named `node`
// carries no ancestor label.
const deepspeedRuntime = `
apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata:
  name: deepspeed-distributed
spec:
  mlPolicy:
    numNodes: 1
    mpi:
      runLauncherAsNode: true
  template:
    spec:
      replicatedJobs:
      - name: launcher
        template:
          metadata:
            labels:
              trainer.kubeflow.org/trainjob-ancestor-step: trainer
          spec:
            template:
              spec:
                containers:
                - name: node
                  image: deepspeed:v1
      - name: node
        replicas: 2
        template:
          spec:
            template:
              spec:
                containers:
                - name: node
                  image: deepspeed:v1
                  command: [/usr/sbin/sshd, -De]
`

func TestPreBuildSync(t *testing.T) {
	cases := map[string]struct {
		runtime  string
		trainJob string
		// counts overrides pod set counts, as an ML plugin would.
		counts         map[string]int32
		wantEndpoints  map[string][]string
		wantCompletion map[string]int32
	}{
		"endpoints use the TrainJob name as subdomain, counts become parallelism and completions": {
			runtime: torchRuntime,
			trainJob: `
metadata: {name: alpha}
spec: {runtimeRef: {name: torch-with-initializers}}`,
			wantEndpoints: map[string][]string{
				"dataset-initializer": {"alpha-dataset-initializer-0-0.alpha"},
				"model-initializer":   {"alpha-model-initializer-0-0.alpha"},
				"node":                {"alpha-node-0-0.alpha", "alpha-node-0-1.alpha"},
			},
			wantCompletion: map[string]int32{"dataset-initializer": 1, "model-initializer": 1, "node": 2},
		},
		"endpoints use the template's network subdomain": {
			runtime: `
kind: ClusterTrainingRuntime
metadata: {name: plain}
spec:
  template:
    spec:
      network: {subdomain: kubeflow.org}
      replicatedJobs:
      - name: node
        template:
          spec:
            parallelism: 3
            template:
              spec:
                containers: [{name: node, image: app:v1}]`,
			trainJob: `
metadata: {name: alpha}
spec: {runtimeRef: {name: plain}}`,
			wantEndpoints:  map[string][]string{"node": {"alpha-node-0-0.kubeflow.org", "alpha-node-0-1.kubeflow.org", "alpha-node-0-2.kubeflow.org"}},
			wantCompletion: map[string]int32{"node": 3},
		},
		"endpoints cover every replica of a replicated job": {
			runtime: deepspeedRuntime,
			trainJob: `
metadata: {name: ds}
spec: {runtimeRef: {name: deepspeed-distributed}}`,
			counts: map[string]int32{"node": 2},
			wantEndpoints: map[string][]string{
				"launcher": {"ds-launcher-0-0.ds"},
				"node":     {"ds-node-0-0.ds", "ds-node-0-1.ds", "ds-node-1-0.ds", "ds-node-1-1.ds"},
			},
			wantCompletion: map[string]int32{"launcher": 1, "node": 2},
		},
		"counts changed by ML plugins reach parallelism and completions": {
			runtime: torchRuntime,
			trainJob: `
metadata: {name: alpha}
spec: {runtimeRef: {name: torch-with-initializers}}`,
			counts: map[string]int32{"node": 64},
			wantEndpoints: map[string][]string{
				"dataset-initializer": {"alpha-dataset-initializer-0-0.alpha"},
				"model-initializer":   {"alpha-model-initializer-0-0.alpha"},
				"node":                endpointNames("alpha-node-0-", 64, ".alpha"),
			},
			wantCompletion: map[string]int32{"dataset-initializer": 1, "model-initializer": 1, "node": 64},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tj := pipelinetest.TrainJob(t, tc.trainJob)
			info := pipelinetest.Info(t, tj, pipelinetest.Runtime(t, tc.runtime))
			for k := range info.PodSets {
				if n, ok := tc.counts[info.PodSets[k].Name]; ok {
					info.PodSets[k].Count = n
				}
			}
			if err := (cluster{offline: true}).plugin(t).PreBuildSync(info, tj); err != nil {
				t.Fatal(err)
			}
			gotEndpoints := map[string][]string{}
			gotParallelism, gotCompletions := map[string]int32{}, map[string]int32{}
			for k, ps := range info.PodSets {
				gotEndpoints[ps.Name] = slices.Collect(ps.Endpoints)
				spec := info.Template.ReplicatedJobs[k].Template.Spec
				gotParallelism[ps.Name], gotCompletions[ps.Name] = *spec.Parallelism, *spec.Completions
			}
			if diff := cmp.Diff(tc.wantEndpoints, gotEndpoints); diff != "" {
				t.Errorf("endpoints (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantCompletion, gotParallelism); diff != "" {
				t.Errorf("parallelism (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantCompletion, gotCompletions); diff != "" {
				t.Errorf("completions (-want +got):\n%s", diff)
			}
		})
	}
}

func endpointNames(prefix string, n int, suffix string) []string {
	var out []string
	for i := range n {
		out = append(out, prefix+strconv.Itoa(i)+suffix)
	}
	return out
}

func TestEndpointsAreLazy(t *testing.T) {
	seq := pipeline.Endpoints("alpha", "node", 1, 1_000_000, "alpha")
	var got []string
	for e := range seq {
		got = append(got, e)
		if len(got) == 2 {
			break
		}
	}
	if diff := cmp.Diff([]string{"alpha-node-0-0.alpha", "alpha-node-0-1.alpha"}, got); diff != "" {
		t.Errorf("first endpoints (-want +got):\n%s", diff)
	}
}

// setNodeContainer edits the trainer's `node` container as an ML plugin would.
func setNodeContainer(edit func(c *corev1.Container)) func(*pipeline.RuntimeInfo) {
	return func(info *pipeline.RuntimeInfo) {
		edit(info.TrainerPodSet().Container(trainer.Node))
	}
}

func TestBuild(t *testing.T) {
	const suspendedTrainJob = `
metadata: {name: alpha}
spec:
  runtimeRef: {name: torch-with-initializers}
  suspend: true`
	runningJobSet := &jobsetv1alpha2.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: "alpha", Namespace: "default", OwnerReferences: pipelinetest.ControlledBy("alpha")},
		Spec:       jobsetv1alpha2.JobSetSpec{Suspend: new(false)},
	}
	suspendedJobSet := &jobsetv1alpha2.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: "alpha", Namespace: "default", OwnerReferences: pipelinetest.ControlledBy("alpha")},
		Spec:       jobsetv1alpha2.JobSetSpec{Suspend: new(true)},
	}

	cases := map[string]struct {
		runtime  string
		trainJob string
		cluster  cluster
		// before is what the plugins before the JobSet builder did.
		before  func(*pipeline.RuntimeInfo)
		want    string // the JobSet as YAML; "" for none
		wantErr bool
	}{
		"initializers and trainer get the TrainJob's settings, pods the scheduler's labels": {
			runtime: torchRuntime,
			trainJob: `
metadata: {name: alpha}
spec:
  runtimeRef: {name: torch-with-initializers}
  suspend: true
  initializer:
    dataset:
      storageUri: hf://tatsu-lab/alpaca
      env: [{name: DATASET_ENV, value: d}]
      secretRef: {name: hf-secret}
    model:
      storageUri: hf://meta-llama/Llama-3.2-1B
  trainer:
    image: pytorch:v2
    command: [python3, train.py]
    args: [--epochs, "3"]
    env: [{name: TRAIN_JOB, value: "yes"}]
  runtimePatches:
  - manager: example.io/team
    trainingRuntimeSpec:
      template:
        metadata:
          labels: {team: ml}`,
			cluster: cluster{offline: true},
			before: func(info *pipeline.RuntimeInfo) {
				info.Scheduler.PodLabels = map[string]string{"scheduling.x-k8s.io/pod-group": "alpha"}
			},
			want: `
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: alpha
  namespace: default
  labels: {runtime-label: from-runtime, team: ml}
  annotations: {runtime-annotation: from-runtime}
  ownerReferences:
  - {apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, name: alpha, uid: uid-0001, controller: true, blockOwnerDeletion: true}
spec:
  suspend: true
  successPolicy: {operator: All}
  startupPolicy: {startupPolicyOrder: AnyOrder}
  network: {enableDNSHostnames: true, publishNotReadyAddresses: true}
  replicatedJobs:
  - name: dataset-initializer
    groupName: default
    replicas: 1
    template:
      metadata:
        labels:
          trainer.kubeflow.org/trainjob-ancestor-step: dataset-initializer
      spec:
        parallelism: 1
        completions: 1
        completionMode: Indexed
        template:
          metadata:
            labels: {scheduling.x-k8s.io/pod-group: alpha}
          spec:
            restartPolicy: OnFailure
            containers:
            - name: dataset-initializer
              image: dataset-initializer:v1
              env:
              - {name: STORAGE_URI, value: hf://tatsu-lab/alpaca}
              - {name: DATASET_ENV, value: d}
              envFrom:
              - secretRef: {name: hf-secret}
              volumeMounts:
              - {name: initializer, mountPath: /workspace}
  - name: model-initializer
    groupName: default
    replicas: 1
    template:
      metadata:
        labels:
          trainer.kubeflow.org/trainjob-ancestor-step: model-initializer
      spec:
        parallelism: 1
        completions: 1
        completionMode: Indexed
        template:
          metadata:
            labels: {scheduling.x-k8s.io/pod-group: alpha}
          spec:
            restartPolicy: OnFailure
            containers:
            - name: model-initializer
              image: model-initializer:v1
              env:
              - {name: STORAGE_URI, value: hf://meta-llama/Llama-3.2-1B}
              volumeMounts:
              - {name: initializer, mountPath: /workspace}
  - name: node
    groupName: default
    replicas: 1
    template:
      metadata:
        labels:
          trainer.kubeflow.org/trainjob-ancestor-step: trainer
      spec:
        parallelism: 2
        completions: 2
        completionMode: Indexed
        template:
          metadata:
            labels: {scheduling.x-k8s.io/pod-group: alpha}
          spec:
            restartPolicy: OnFailure
            initContainers:
            - {name: preflight, image: preflight:v1}
            containers:
            - name: node
              image: pytorch:v2
              command: [python3, train.py]
              args: [--epochs, "3"]
              env:
              - {name: RUNTIME_ENV, value: from-runtime}
              - {name: TRAIN_JOB, value: "yes"}
              volumeMounts:
              - {name: initializer, mountPath: /workspace}
`,
		},
		"trainer env keeps the order the ML plugin gave it; scheduler annotations reach every pod": {
			runtime: torchDistributed,
			trainJob: `
metadata: {name: alpha}
spec:
  runtimeRef: {name: torch-distributed}
  trainer:
    env: [{name: TRAIN_JOB, value: "yes"}, {name: RUNTIME_ENV, value: from-trainjob}]`,
			cluster: cluster{offline: true},
			before: func(info *pipeline.RuntimeInfo) {
				setNodeContainer(func(c *corev1.Container) {
					c.Env = []corev1.EnvVar{{Name: "RUNTIME_ENV", Value: "from-runtime"}}
					pipeline.UpsertEnv(c, corev1.EnvVar{Name: "TRAIN_JOB", Value: "yes"}, corev1.EnvVar{Name: "RUNTIME_ENV", Value: "from-trainjob"})
					pipeline.UpsertEnv(c, corev1.EnvVar{Name: "PET_NNODES", Value: "1"})
				})(info)
				info.Scheduler.PodAnnotations = map[string]string{"scheduling.k8s.io/group-name": "alpha"}
			},
			want: `
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: alpha
  namespace: default
  ownerReferences:
  - {apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, name: alpha, uid: uid-0001, controller: true, blockOwnerDeletion: true}
spec:
  suspend: false
  successPolicy: {operator: All}
  startupPolicy: {startupPolicyOrder: AnyOrder}
  network: {enableDNSHostnames: true, publishNotReadyAddresses: true}
  replicatedJobs:
  - name: node
    groupName: default
    replicas: 1
    template:
      metadata:
        labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}
      spec:
        parallelism: 1
        completions: 1
        completionMode: Indexed
        template:
          metadata:
            annotations: {scheduling.k8s.io/group-name: alpha}
          spec:
            restartPolicy: OnFailure
            initContainers:
            - {name: preflight, image: preflight:v1}
            containers:
            - name: node
              image: pytorch:v1
              env:
              - {name: RUNTIME_ENV, value: from-trainjob}
              - {name: TRAIN_JOB, value: "yes"}
              - {name: PET_NNODES, value: "1"}
            - {name: sidecar, image: proxy:v1}
`,
		},
		"entrypoint settled by the Torch plugin (torchtune) is kept": {
			runtime: torchDistributed,
			trainJob: `
metadata: {name: tune}
spec:
  runtimeRef: {name: torch-distributed}
  trainer:
    command: [tune, run]
    args: [batch_size=4]`,
			cluster: cluster{offline: true},
			before: func(info *pipeline.RuntimeInfo) {
				setNodeContainer(func(c *corev1.Container) {
					c.Command = []string{"tune", "run", "full_finetune_single_device", "--config", "llama3_2/1B_full_single_device"}
					c.Args = []string{"batch_size=4"}
				})(info)
				info.TrainerPodSet().EntrypointSetBy = "Torch"
			},
			want: `
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: tune
  namespace: default
  ownerReferences:
  - {apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, name: tune, uid: uid-0001, controller: true, blockOwnerDeletion: true}
spec:
  suspend: false
  successPolicy: {operator: All}
  startupPolicy: {startupPolicyOrder: AnyOrder}
  network: {enableDNSHostnames: true, publishNotReadyAddresses: true}
  replicatedJobs:
  - name: node
    groupName: default
    replicas: 1
    template:
      metadata:
        labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}
      spec:
        parallelism: 1
        completions: 1
        completionMode: Indexed
        template:
          spec:
            restartPolicy: OnFailure
            initContainers:
            - {name: preflight, image: preflight:v1}
            containers:
            - name: node
              image: pytorch:v1
              command: [tune, run, full_finetune_single_device, --config, llama3_2/1B_full_single_device]
              args: [batch_size=4]
            - {name: sidecar, image: proxy:v1}
`,
		},
		"MPI launcher as node: trainer env also reaches the job named node, whose replicas stay": {
			runtime: deepspeedRuntime,
			trainJob: `
metadata: {name: ds}
spec:
  runtimeRef: {name: deepspeed-distributed}
  trainer:
    image: deepspeed:v2
    env: [{name: TRAIN_JOB, value: "yes"}]`,
			cluster: cluster{offline: true},
			want: `
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: ds
  namespace: default
  ownerReferences:
  - {apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, name: ds, uid: uid-0001, controller: true, blockOwnerDeletion: true}
spec:
  suspend: false
  successPolicy: {operator: All}
  startupPolicy: {startupPolicyOrder: AnyOrder}
  network: {enableDNSHostnames: true, publishNotReadyAddresses: true}
  replicatedJobs:
  - name: launcher
    groupName: default
    replicas: 1
    template:
      metadata:
        labels:
          trainer.kubeflow.org/trainjob-ancestor-step: trainer
      spec:
        parallelism: 1
        completions: 1
        completionMode: Indexed
        template:
          spec:
            restartPolicy: OnFailure
            containers:
            - name: node
              image: deepspeed:v2
              env:
              - {name: TRAIN_JOB, value: "yes"}
  - name: node
    groupName: default
    replicas: 2
    template:
      spec:
        parallelism: 1
        completions: 1
        completionMode: Indexed
        template:
          spec:
            restartPolicy: OnFailure
            containers:
            - name: node
              image: deepspeed:v1
              command: [/usr/sbin/sshd, -De]
              env:
              - {name: TRAIN_JOB, value: "yes"}
`,
		},
		"running JobSet is left alone": {
			runtime: torchRuntime,
			trainJob: `
metadata: {name: alpha}
spec: {runtimeRef: {name: torch-with-initializers}}`,
			cluster: cluster{objs: []client.Object{runningJobSet}},
		},
		"suspended JobSet of a resumed TrainJob is rebuilt": {
			runtime: torchRuntime,
			trainJob: `
metadata: {name: alpha}
spec: {runtimeRef: {name: torch-with-initializers}}`,
			cluster: cluster{objs: []client.Object{suspendedJobSet}},
			want:    "rebuilt",
		},
		"running JobSet of a suspended TrainJob is rebuilt": {
			runtime:  torchRuntime,
			trainJob: suspendedTrainJob,
			cluster:  cluster{objs: []client.Object{runningJobSet}},
			want:     "rebuilt",
		},
		"JobSet that cannot be read is an error": {
			runtime:  torchRuntime,
			trainJob: suspendedTrainJob,
			cluster:  cluster{getErr: errors.New("connection refused")},
			wantErr:  true,
		},
		"template with fewer replicated jobs than pod sets is an error": {
			runtime:  torchRuntime,
			trainJob: suspendedTrainJob,
			cluster:  cluster{offline: true},
			before: func(info *pipeline.RuntimeInfo) {
				info.Template.ReplicatedJobs = info.Template.ReplicatedJobs[:2]
			},
			wantErr: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tj := pipelinetest.TrainJob(t, tc.trainJob)
			info := pipelinetest.Info(t, tj, pipelinetest.Runtime(t, tc.runtime))
			p := tc.cluster.plugin(t)
			if err := p.PreBuildSync(info, tj); err != nil {
				t.Fatal(err)
			}
			if tc.before != nil {
				tc.before(info)
			}

			got, err := p.Build(context.Background(), info, tj)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Build error = %v, want error %v", err, tc.wantErr)
			}
			if js, ok := firstJobSet(got); ok && js.Spec.ReplicatedJobs != nil && &js.Spec.ReplicatedJobs[0] != &info.Template.ReplicatedJobs[0] {
				t.Errorf("Build copied the template; the JobSet must be the template it completed")
			}
			switch tc.want {
			case "":
				if len(got) != 0 {
					t.Errorf("Build returned %d objects, want none", len(got))
				}
			case "rebuilt":
				if len(got) != 1 || got[0].GetName() != tj.Name {
					t.Errorf("Build returned %v, want the JobSet %s", got, tj.Name)
				}
			default:
				want := []client.Object{pipelinetest.Decode[jobsetv1alpha2.JobSet](t, tc.want)}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("Build (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func firstJobSet(objs []client.Object) (*jobsetv1alpha2.JobSet, bool) {
	if len(objs) == 0 {
		return nil, false
	}
	js, ok := objs[0].(*jobsetv1alpha2.JobSet)
	return js, ok
}

func TestStatus(t *testing.T) {
	transition := metav1.Date(2026, 8, 21, 10, 0, 0, 0, time.UTC)
	jobSet := func(conds []metav1.Condition, jobs ...jobsetv1alpha2.ReplicatedJobStatus) *jobsetv1alpha2.JobSet {
		return &jobsetv1alpha2.JobSet{
			ObjectMeta: metav1.ObjectMeta{Name: "alpha", Namespace: "default", OwnerReferences: pipelinetest.ControlledBy("alpha")},
			Status:     jobsetv1alpha2.JobSetStatus{Conditions: conds, ReplicatedJobsStatus: jobs},
		}
	}
	suspended := metav1.Condition{Type: trainer.TrainJobSuspended, Status: metav1.ConditionFalse, Reason: trainer.TrainJobResumedReason, Message: trainer.TrainJobResumedMessage, LastTransitionTime: transition}
	complete := metav1.Condition{Type: trainer.TrainJobComplete, Status: metav1.ConditionTrue, Reason: "AllJobsCompleted", Message: "jobset completed successfully", LastTransitionTime: transition}

	cases := map[string]struct {
		status  trainer.TrainJobStatus
		cluster cluster
		want    *trainer.TrainJobStatus
		wantErr bool
	}{
		"completed JobSet completes the TrainJob and its jobs status is copied": {
			status: trainer.TrainJobStatus{
				Conditions: []metav1.Condition{suspended},
				JobsStatus: []trainer.JobStatus{{Name: "stale"}},
			},
			cluster: cluster{objs: []client.Object{jobSet(
				[]metav1.Condition{{Type: "Completed", Status: metav1.ConditionTrue, Reason: "AllJobsCompleted", Message: "jobset completed successfully", LastTransitionTime: transition}},
				jobsetv1alpha2.ReplicatedJobStatus{Name: "node", Succeeded: 2},
			)}},
			want: &trainer.TrainJobStatus{
				Conditions: []metav1.Condition{suspended, complete},
				JobsStatus: []trainer.JobStatus{{Name: "node", Ready: new(int32(0)), Succeeded: new(int32(2)), Failed: new(int32(0)), Active: new(int32(0)), Suspended: new(int32(0))}},
			},
		},
		"failed JobSet fails the TrainJob": {
			cluster: cluster{objs: []client.Object{jobSet(
				[]metav1.Condition{{Type: "Failed", Status: metav1.ConditionTrue, Reason: "FailedJobs", Message: "jobset failed due to one or more job failures", LastTransitionTime: transition}},
				jobsetv1alpha2.ReplicatedJobStatus{Name: "node", Failed: 1, Active: 1},
			)}},
			want: &trainer.TrainJobStatus{
				Conditions: []metav1.Condition{{Type: trainer.TrainJobFailed, Status: metav1.ConditionTrue, Reason: "FailedJobs", Message: "jobset failed due to one or more job failures", LastTransitionTime: transition}},
				JobsStatus: []trainer.JobStatus{{Name: "node", Ready: new(int32(0)), Succeeded: new(int32(0)), Failed: new(int32(1)), Active: new(int32(1)), Suspended: new(int32(0))}},
			},
		},
		"JobSet conditions that are not True are not copied": {
			cluster: cluster{objs: []client.Object{jobSet(
				[]metav1.Condition{{Type: "Completed", Status: metav1.ConditionFalse, Reason: "Running", LastTransitionTime: transition}},
				jobsetv1alpha2.ReplicatedJobStatus{Name: "node", Active: 2, Ready: 2},
			)}},
			want: &trainer.TrainJobStatus{
				JobsStatus: []trainer.JobStatus{{Name: "node", Ready: new(int32(2)), Succeeded: new(int32(0)), Failed: new(int32(0)), Active: new(int32(2)), Suspended: new(int32(0))}},
			},
		},
		"a completed JobSet of the same name the TrainJob does not control is not its JobSet": {
			cluster: cluster{objs: []client.Object{&jobsetv1alpha2.JobSet{
				ObjectMeta: metav1.ObjectMeta{Name: "alpha", Namespace: "default"},
				Status: jobsetv1alpha2.JobSetStatus{Conditions: []metav1.Condition{{Type: string(jobsetv1alpha2.JobSetCompleted), Status: metav1.ConditionTrue,
					Reason: "AllJobsCompleted", LastTransitionTime: transition}}},
			}}},
			wantErr: true,
		},
		"JobSet not reported on yet: its replicated jobs have not started, in the JobSet controller's order": {
			cluster: cluster{objs: []client.Object{&jobsetv1alpha2.JobSet{
				ObjectMeta: metav1.ObjectMeta{Name: "alpha", Namespace: "default", OwnerReferences: pipelinetest.ControlledBy("alpha")},
				Spec: jobsetv1alpha2.JobSetSpec{ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{
					{Name: trainer.DatasetInitializerName}, {Name: trainer.Node}, {Name: trainer.ModelInitializerName},
				}},
			}}},
			want: &trainer.TrainJobStatus{
				JobsStatus: []trainer.JobStatus{
					{Name: trainer.Node, Ready: new(int32(0)), Succeeded: new(int32(0)), Failed: new(int32(0)), Active: new(int32(0)), Suspended: new(int32(0))},
					{Name: trainer.ModelInitializerName, Ready: new(int32(0)), Succeeded: new(int32(0)), Failed: new(int32(0)), Active: new(int32(0)), Suspended: new(int32(0))},
					{Name: trainer.DatasetInitializerName, Ready: new(int32(0)), Succeeded: new(int32(0)), Failed: new(int32(0)), Active: new(int32(0)), Suspended: new(int32(0))},
				},
			},
		},
		"deleted JobSet of a finished TrainJob leaves the status as it is": {
			status: trainer.TrainJobStatus{
				Conditions: []metav1.Condition{complete},
				JobsStatus: []trainer.JobStatus{{Name: "node", Succeeded: new(int32(2))}},
			},
			want: &trainer.TrainJobStatus{
				Conditions: []metav1.Condition{complete},
				JobsStatus: []trainer.JobStatus{{Name: "node", Succeeded: new(int32(2))}},
			},
		},
		"missing JobSet of a running TrainJob is an error": {
			status:  trainer.TrainJobStatus{Conditions: []metav1.Condition{suspended}},
			wantErr: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "alpha", Namespace: "default", UID: "uid-0001"}, Status: tc.status}
			orig := tj.DeepCopy()
			got, err := tc.cluster.plugin(t).Status(context.Background(), tj)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Status error = %v, want error %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Status (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(orig, tj); diff != "" {
				t.Errorf("Status changed the TrainJob (-before +after):\n%s", diff)
			}
		})
	}
}

func TestSetDefaults(t *testing.T) {
	for name, tc := range map[string]struct{ spec, want string }{
		"what is left out gets JobSet's defaults": {
			spec: `
replicatedJobs:
- {name: node, template: {spec: {template: {spec: {containers: [{name: node}]}}}}}
failurePolicy:
  rules: [{action: FailJobSet}, {name: mine, action: RestartJobSet}]
volumeClaimPolicies:
- templates: [{metadata: {name: data}}]`,
			want: `
successPolicy: {operator: All}
startupPolicy: {startupPolicyOrder: AnyOrder}
network: {enableDNSHostnames: true, publishNotReadyAddresses: true}
replicatedJobs:
- name: node
  groupName: default
  template: {spec: {completionMode: Indexed, template: {spec: {restartPolicy: OnFailure, containers: [{name: node}]}}}}
failurePolicy:
  restartStrategy: Recreate
  rules: [{name: failurePolicyRule0, action: FailJobSet}, {name: mine, action: RestartJobSet}]
volumeClaimPolicies:
- templates: [{metadata: {name: data}}]
  retentionPolicy: {whenDeleted: Delete}`,
		},
		"what is set is kept": {
			spec: `
successPolicy: {operator: Any, targetReplicatedJobs: [launcher]}
startupPolicy: {startupPolicyOrder: InOrder}
network: {enableDNSHostnames: false, publishNotReadyAddresses: false, subdomain: train}
replicatedJobs:
- name: launcher
  groupName: mpi
  template: {spec: {completionMode: NonIndexed, template: {spec: {restartPolicy: Never}}}}
failurePolicy: {restartStrategy: BlockingRecreate, maxRestarts: 3}
volumeClaimPolicies:
- templates: [{metadata: {name: data}}]
  retentionPolicy: {whenDeleted: Retain}`,
		},
	} {
		t.Run(name, func(t *testing.T) {
			spec := pipelinetest.Decode[jobsetv1alpha2.JobSetSpec](t, tc.spec)
			want := tc.want
			if want == "" {
				want = tc.spec
			}
			setDefaults(spec)
			if diff := cmp.Diff(pipelinetest.Decode[jobsetv1alpha2.JobSetSpec](t, want), spec); diff != "" {
				t.Errorf("setDefaults (-want +got):\n%s", diff)
			}
		})
	}
}

// TestStatusOfTheCachedJobSet: the plugin reports the same status from a JobSet as the operator's cache keeps it
// (TrimForCache) as from the whole JobSet, before and after the JobSet controller reports on it; the cache keeps
// whether it is suspended and who manages it, and the pod templates go.
func TestStatusOfTheCachedJobSet(t *testing.T) {
	whole := func(status jobsetv1alpha2.JobSetStatus) *jobsetv1alpha2.JobSet {
		template := jobsetv1alpha2.ReplicatedJob{Replicas: 1}
		template.Template.Spec.Template.Spec.Containers = []corev1.Container{{Name: trainer.Node, Image: "pytorch"}}
		js := &jobsetv1alpha2.JobSet{
			ObjectMeta: metav1.ObjectMeta{Name: "alpha", Namespace: "default", OwnerReferences: pipelinetest.ControlledBy("alpha")},
			Spec:       jobsetv1alpha2.JobSetSpec{Suspend: new(true), ManagedBy: new("trainer.kubeflow.org/trainjob-controller")},
			Status:     status,
		}
		for _, name := range []string{trainer.DatasetInitializerName, trainer.Node} {
			rj := *template.DeepCopy()
			rj.Name = name
			js.Spec.ReplicatedJobs = append(js.Spec.ReplicatedJobs, rj)
		}
		return js
	}
	for name, status := range map[string]jobsetv1alpha2.JobSetStatus{
		"not reported on yet": {},
		"reported on": {ReplicatedJobsStatus: []jobsetv1alpha2.ReplicatedJobStatus{
			{Name: trainer.Node, Suspended: 1}, {Name: trainer.DatasetInitializerName, Suspended: 1},
		}},
	} {
		t.Run(name, func(t *testing.T) {
			js := whole(status)
			cached := js.DeepCopy()
			(&JobSet{}).TrimForCache(cached)
			if !equality.Semantic.DeepEqual(cached.Spec.Suspend, js.Spec.Suspend) || !equality.Semantic.DeepEqual(cached.Spec.ManagedBy, js.Spec.ManagedBy) {
				t.Errorf("the cached JobSet has suspend %v and managedBy %v, want %v and %v",
					cached.Spec.Suspend, cached.Spec.ManagedBy, *js.Spec.Suspend, *js.Spec.ManagedBy)
			}
			for _, rj := range cached.Spec.ReplicatedJobs {
				if len(rj.Template.Spec.Template.Spec.Containers) > 0 {
					t.Errorf("the cached JobSet keeps the pod template of %s", rj.Name)
				}
			}
			tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "alpha", Namespace: "default", UID: "uid-0001"}}
			want, err := cluster{objs: []client.Object{js}}.plugin(t).Status(context.Background(), tj)
			if err != nil {
				t.Fatal(err)
			}
			got, err := cluster{objs: []client.Object{cached}}.plugin(t).Status(context.Background(), tj)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Status of the cached JobSet (-of the whole one +of the cached one):\n%s", diff)
			}
		})
	}
}
