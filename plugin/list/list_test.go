package list

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cliprinters "k8s.io/cli-runtime/pkg/printers"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/dryrun"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/scheme"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/stage"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/kueue"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/kueue/kueuetest"
)

var created = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// runtimeSpec is a runtime of nodes nodes whose trainer container asks for gpus GPUs.
func runtimeSpec(nodes int32, gpus string) trainer.TrainingRuntimeSpec {
	spec := trainer.TrainingRuntimeSpec{MLPolicy: &trainer.MLPolicy{NumNodes: ptr.To(nodes)}}
	rj := jobsetv1alpha2.ReplicatedJob{Name: trainer.Node}
	rj.Template.Labels = map[string]string{trainer.AncestorLabel: trainer.AncestorTrainer}
	rj.Template.Spec.Template.Spec.Containers = []corev1.Container{{Name: trainer.Node, Resources: corev1.ResourceRequirements{
		Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse(gpus), corev1.ResourceCPU: resource.MustParse("8")},
	}}}
	spec.Template.Spec.ReplicatedJobs = []jobsetv1alpha2.ReplicatedJob{rj}
	return spec
}

// runtimeReader is a reader holding a ClusterTrainingRuntime "cluster" (2 nodes of 4 GPUs) and a TrainingRuntime
// "team/local" (3 nodes of 1 GPU).
func runtimeReader() client.Reader {
	return fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(
		&trainer.ClusterTrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}, Spec: runtimeSpec(2, "4")},
		&trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "local"}, Spec: runtimeSpec(3, "1")},
	).Build()
}

// trainJob is a TrainJob of namespace team on a runtime, edited by edit.
func trainJob(name, kind, runtime string, edit func(*trainer.TrainJob)) trainer.TrainJob {
	tj := trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name, CreationTimestamp: metav1.NewTime(created)}}
	tj.Spec.RuntimeRef = trainer.RuntimeRef{Name: runtime, Kind: ptr.To(kind)}
	if edit != nil {
		edit(&tj)
	}
	return tj
}

func gpusPerNode(n string) *corev1.ResourceRequirements {
	return &corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse(n)}}
}

// TestNodesAndGPUs: the NODES and GPUS cells take what the TrainJob says, and what its runtime says for
// the rest; GPUS is nodes × GPUs per node.
func TestNodesAndGPUs(t *testing.T) {
	tests := []struct {
		name            string
		tj              trainer.TrainJob
		nodes, gpuCells string
	}{
		{
			name:  "all from the ClusterTrainingRuntime",
			tj:    trainJob("a", trainer.ClusterTrainingRuntimeKind, "cluster", nil),
			nodes: "2", gpuCells: "8",
		},
		{
			name:  "all from the TrainingRuntime of the namespace",
			tj:    trainJob("a", trainer.TrainingRuntimeKind, "local", nil),
			nodes: "3", gpuCells: "3",
		},
		{
			name: "nodes from the TrainJob, GPUs per node from the runtime",
			tj: trainJob("a", trainer.ClusterTrainingRuntimeKind, "cluster", func(tj *trainer.TrainJob) {
				tj.Spec.Trainer = &trainer.Trainer{NumNodes: ptr.To[int32](5)}
			}),
			nodes: "5", gpuCells: "20",
		},
		{
			name: "resources from the TrainJob, nodes from the runtime",
			tj: trainJob("a", trainer.ClusterTrainingRuntimeKind, "cluster", func(tj *trainer.TrainJob) {
				tj.Spec.Trainer = &trainer.Trainer{ResourcesPerNode: gpusPerNode("2")}
			}),
			nodes: "2", gpuCells: "4",
		},
		{
			name: "the TrainJob's resources without a GPU keep the runtime's, as the pipeline merges them",
			tj: trainJob("a", trainer.ClusterTrainingRuntimeKind, "cluster", func(tj *trainer.TrainJob) {
				tj.Spec.Trainer = &trainer.Trainer{NumNodes: ptr.To[int32](2),
					ResourcesPerNode: &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}}}
			}),
			nodes: "2", gpuCells: "8",
		},
		{
			name:  "a runtime that cannot be read: unknown",
			tj:    trainJob("a", trainer.ClusterTrainingRuntimeKind, "gone", nil),
			nodes: "-", gpuCells: "-",
		},
		{
			name: "a runtime that cannot be read: nodes times the GPUs of resourcesPerNode",
			tj: trainJob("a", trainer.ClusterTrainingRuntimeKind, "gone", func(tj *trainer.TrainJob) {
				tj.Spec.Trainer = &trainer.Trainer{NumNodes: ptr.To[int32](4), ResourcesPerNode: gpusPerNode("8")}
			}),
			nodes: "4", gpuCells: "32",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defaults := inTreeRuntimeDefaults(t)
			nodes, gpus := defaults.of(context.Background(), &tt.tj)
			if diff := cmp.Diff([]string{tt.nodes, tt.gpuCells}, []string{nodes, gpus}); diff != "" {
				t.Errorf("NODES, GPUS (-want +got):\n%s", diff)
			}
		})
	}
}

func condition(typ, reason string, at time.Time) metav1.Condition {
	return metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: reason, LastTransitionTime: metav1.NewTime(at)}
}

// TestTable: the columns and cells of `list`: PROGRESS only when a TrainJob reports progress (or -w, where
// one may start to), REASON the reason of the condition behind the stage, DURATION until the end.
func TestTable(t *testing.T) {
	now := created.Add(2 * time.Hour)
	complete := trainJob("done", trainer.ClusterTrainingRuntimeKind, "cluster", func(tj *trainer.TrainJob) {
		tj.Status.Conditions = []metav1.Condition{condition(trainer.TrainJobComplete, "AllJobsCompleted", created.Add(90*time.Minute))}
	})
	training := trainJob("run", trainer.TrainingRuntimeKind, "local", func(tj *trainer.TrainJob) {
		tj.Status.JobsStatus = []trainer.JobStatus{{Name: trainer.Node, Ready: ptr.To[int32](3)}}
		tj.Status.TrainerStatus = &trainer.TrainerStatus{ProgressPercentage: ptr.To[int32](40), EstimatedRemainingSeconds: ptr.To[int32](600)}
	})
	names := func(cols []metav1.TableColumnDefinition) []string {
		var out []string
		for _, c := range cols {
			out = append(out, c.Name)
		}
		return out
	}
	inQueue := func(name string, suspend bool) trainer.TrainJob {
		return trainJob(name, trainer.ClusterTrainingRuntimeKind, "cluster", func(tj *trainer.TrainJob) {
			tj.UID = types.UID("uid-" + name)
			tj.Labels = map[string]string{kueue.QueueLabel: "gpu"}
			tj.Spec.Suspend = ptr.To(suspend)
		})
	}
	workload := func(owner string, active bool, conds ...metav1.Condition) *kueue.Workload {
		wl := &kueue.Workload{Spec: kueue.WorkloadSpec{Active: ptr.To(active)}}
		wl.Status.Conditions = conds
		wl.OwnerReferences = []metav1.OwnerReference{{Kind: trainer.TrainJobKind, Name: owner, UID: types.UID("uid-" + owner), Controller: ptr.To(true)}}
		return wl
	}
	noQuota := metav1.Condition{Type: kueue.ConditionQuotaReserved, Status: metav1.ConditionFalse, Reason: "Pending",
		Message: "couldn't assign flavors to pod set node: insufficient unused quota for nvidia.com/gpu in flavor gpu-node, 16 more needed"}
	admitted := metav1.Condition{Type: kueue.ConditionAdmitted, Status: metav1.ConditionTrue, Reason: "Admitted"}
	running := inQueue("running", false)
	running.Status.JobsStatus = []trainer.JobStatus{{Name: trainer.Node, Ready: ptr.To[int32](1), Active: ptr.To[int32](1)}}
	kueueSays := &queues{workloads: map[types.UID]*kueue.Workload{
		"uid-waiting": workload("waiting", true, noQuota),
		"uid-stopped": workload("stopped", false, noQuota),
		"uid-running": workload("running", true, admitted),
	}}
	tests := []struct {
		name    string
		watch   bool
		wide    bool
		queues  *queues
		items   []trainer.TrainJob
		columns []string
		rows    [][]any
	}{
		{
			name:    "no progress reported: no PROGRESS column",
			items:   []trainer.TrainJob{complete},
			columns: []string{"Name", "Stage", "Runtime", "Nodes", "GPUs", "Age", "Queue", "ETA", "Duration", "Reason"},
			rows:    [][]any{{"done", "Complete", "cluster", "2", "8", "120m", "-", "-", "90m", "AllJobsCompleted"}},
		},
		{
			name:    "-w: PROGRESS and ETA, which may come",
			watch:   true,
			items:   []trainer.TrainJob{complete},
			columns: []string{"Name", "Stage", "Runtime", "Nodes", "GPUs", "Progress", "ETA", "Age", "Queue", "Duration", "Reason"},
			rows:    [][]any{{"done", "Complete", "cluster", "2", "8", "-", "-", "120m", "-", "90m", "AllJobsCompleted"}},
		},
		{
			name:    "one TrainJob reports progress: PROGRESS and ETA for all",
			items:   []trainer.TrainJob{complete, training},
			columns: []string{"Name", "Stage", "Runtime", "Nodes", "GPUs", "Progress", "ETA", "Age", "Queue", "Duration", "Reason"},
			rows: [][]any{
				{"done", "Complete", "cluster", "2", "8", "-", "-", "120m", "-", "90m", "AllJobsCompleted"},
				{"run", "Training", "trainingruntime/local", "3", "3", "40%", "10m", "120m", "-", "120m", "-"},
			},
		},
		{
			name:    "-o wide: ETA among the time columns",
			wide:    true,
			items:   []trainer.TrainJob{complete, training},
			columns: []string{"Name", "Stage", "Runtime", "Nodes", "GPUs", "Progress", "Age", "Queue", "ETA", "Duration", "Reason"},
			rows: [][]any{
				{"done", "Complete", "cluster", "2", "8", "-", "120m", "-", "-", "90m", "AllJobsCompleted"},
				{"run", "Training", "trainingruntime/local", "3", "3", "40%", "120m", "-", "10m", "120m", "-"},
			},
		},
		{
			name:   "in a Kueue LocalQueue: Queued with why, stopped, running, no Workload yet",
			queues: kueueSays,
			items:  []trainer.TrainJob{inQueue("waiting", true), inQueue("stopped", true), running, inQueue("new", true)},
			rows: [][]any{
				{"waiting", "Queued", "cluster", "2", "8", "120m", "gpu", "-", "120m", "insufficient unused quota for nvidia.com/gpu in flavor gpu-node, 16 more needed"},
				{"stopped", "Suspended", "cluster", "2", "8", "120m", "gpu", "-", "120m", "-"},
				{"running", "Training", "cluster", "2", "8", "120m", "gpu", "-", "120m", "-"},
				{"new", "Queued", "cluster", "2", "8", "120m", "gpu", "-", "120m", "-"},
			},
		},
		{
			name:  "in a Kueue LocalQueue, Workloads unknown (Kueue not installed): the TrainJob's own stage",
			items: []trainer.TrainJob{inQueue("waiting", true)},
			rows:  [][]any{{"waiting", "Suspended", "cluster", "2", "8", "120m", "gpu", "-", "120m", "-"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := &ListOptions{Clock: clocktesting.NewFakePassiveClock(now), Watch: tt.watch, wide: tt.wide}
			defaults := inTreeRuntimeDefaults(t)
			table := o.table(context.Background(), defaults, tt.queues, tt.items)
			if diff := cmp.Diff(tt.columns, names(table.ColumnDefinitions)); tt.columns != nil && diff != "" {
				t.Errorf("columns (-want +got):\n%s", diff)
			}
			var rows [][]any
			for _, r := range table.Rows {
				rows = append(rows, r.Cells)
			}
			if diff := cmp.Diff(tt.rows, rows); diff != "" {
				t.Errorf("rows (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		o       ListOptions
		wantErr string
	}{
		{"defaults", ListOptions{}, ""},
		{"selectors", ListOptions{LabelSelector: "team in (a,b)", FieldSelector: "metadata.name=x", ChunkSize: 10}, ""},
		{"bad label selector", ListOptions{LabelSelector: "a in"}, `invalid label selector "a in"`},
		{"bad field selector", ListOptions{FieldSelector: "a"}, `invalid field selector "a"`},
		{"negative chunk size", ListOptions{ChunkSize: -1}, "--chunk-size must be 0 or more, not -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.o.Validate()
			got := ""
			if err != nil {
				got = err.Error()
			}
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.HasPrefix(got, tt.wantErr)) {
				t.Errorf("Validate() = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// TestReadQueues: list reads Kueue's Workloads (discovery, then one LIST) only when some TrainJob is in a
// LocalQueue and the table or --stage needs its stage; without Kueue it says what the TrainJobs say.
func TestReadQueues(t *testing.T) {
	queued := trainJob("waiting", trainer.ClusterTrainingRuntimeKind, "cluster", func(tj *trainer.TrainJob) {
		tj.UID = "uid-waiting"
		tj.Labels = map[string]string{kueue.QueueLabel: "gpu"}
		tj.Spec.Suspend = ptr.To(true)
	})
	plain := trainJob("plain", trainer.ClusterTrainingRuntimeKind, "cluster", nil)
	wl := kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "trainjob-waiting-1a2b3",
		OwnerReferences: []metav1.OwnerReference{{Kind: trainer.TrainJobKind, Name: "waiting", UID: "uid-waiting", Controller: ptr.To(true)}}}}
	discovery, workloads := "GET /apis/kueue.x-k8s.io", "GET /apis/kueue.x-k8s.io/v1beta2/namespaces/team/workloads"
	for _, tc := range []struct {
		name      string
		items     []trainer.TrainJob
		namesOnly bool
		stages    []string
		versions  []string
		requests  []string
		stage     stage.Stage
	}{
		{name: "no TrainJob in a LocalQueue", items: []trainer.TrainJob{plain}, versions: []string{"v1beta2"}},
		{name: "the table", items: []trainer.TrainJob{plain, queued}, versions: []string{"v1beta2"},
			requests: []string{discovery, workloads}, stage: stage.Queued},
		{name: "names only", items: []trainer.TrainJob{queued}, namesOnly: true, versions: []string{"v1beta2"}},
		{name: "names only, by stage", items: []trainer.TrainJob{queued}, namesOnly: true, stages: []string{"Queued"}, versions: []string{"v1beta2"},
			requests: []string{discovery, workloads}, stage: stage.Queued},
		{name: "Kueue not installed", items: []trainer.TrainJob{queued}, requests: []string{discovery}, stage: stage.Suspended},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := &kueuetest.API{Versions: tc.versions, Workloads: []kueue.Workload{wl}}
			o := &ListOptions{Namespace: "team", Kueue: api.Client(), Stages: tc.stages}
			o.stages = map[stage.Stage]bool{}
			for _, s := range tc.stages {
				st, _ := stage.ParseOf(stage.WithQueued, s)
				o.stages[st] = true
			}
			if tc.namesOnly {
				o.printer = &cliprinters.NamePrinter{}
			}
			q, err := o.readQueues(context.Background(), tc.items)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.requests, api.Requests()); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
			if tc.stage != "" {
				if got := q.stageOf(&queued); got != tc.stage {
					t.Errorf("stage of the queued TrainJob %s, want %s", got, tc.stage)
				}
			}
		})
	}
}

// inTreeRuntimeDefaults reads the runtimes of runtimeReader and sizes TrainJobs with the in-tree pipeline.
func inTreeRuntimeDefaults(t testing.TB) *runtimeDefaults {
	t.Helper()
	fw, err := (&cmdutil.Pipeline{}).Framework(t.Context(), &dryrun.Inputs{})
	if err != nil {
		t.Fatal(err)
	}
	return newRuntimeDefaults(runtimeReader(), fw)
}
