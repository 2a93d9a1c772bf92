package runtimes

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
)

var created = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// spec is a runtime with ml as its policy and one replicated job named job whose container named container
// has gpus GPUs.
func spec(ml *trainer.MLPolicy, job, container, gpus string) trainer.TrainingRuntimeSpec {
	s := trainer.TrainingRuntimeSpec{MLPolicy: ml}
	rj := jobsetv1alpha2.ReplicatedJob{Name: job}
	rj.Template.Spec.Template.Spec.Containers = []corev1.Container{{Name: container, Resources: corev1.ResourceRequirements{
		Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse(gpus)},
	}}}
	s.Template.Spec.ReplicatedJobs = []jobsetv1alpha2.ReplicatedJob{rj}
	return s
}

func meta(namespace, name, framework string) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Namespace: namespace, Name: name, CreationTimestamp: metav1.NewTime(created)}
	if framework != "" {
		m.Labels = map[string]string{trainer.FrameworkLabel: framework}
	}
	return m
}

// TestTable: the ClusterTrainingRuntimes first, then the TrainingRuntimes by namespace and name, with
// their framework label, policy, nodes and the GPUs of the trainer's node container.
func TestTable(t *testing.T) {
	torch := &trainer.MLPolicy{NumNodes: ptr.To[int32](2), MLPolicySource: trainer.MLPolicySource{Torch: &trainer.TorchMLPolicySource{}}}
	mpi := &trainer.MLPolicy{MLPolicySource: trainer.MLPolicySource{MPI: &trainer.MPIMLPolicySource{}}}
	cluster := []trainer.ClusterTrainingRuntime{
		{ObjectMeta: meta("", "torch-distributed", "torch"), Spec: spec(torch, trainer.Node, trainer.Node, "4")},
		{ObjectMeta: meta("", "deepspeed", "deepspeed"), Spec: spec(mpi, trainer.Node, trainer.Node, "0")},
	}
	namespaced := []trainer.TrainingRuntime{
		{ObjectMeta: meta("team-b", "plain", ""), Spec: spec(nil, trainer.Node, trainer.Node, "1")},
		{ObjectMeta: meta("team-a", "other-container", ""), Spec: spec(torch, trainer.Node, "sidecar", "8")},
		{ObjectMeta: meta("team-a", "launcher-only", ""), Spec: spec(mpi, trainer.Launcher, trainer.Node, "8")},
	}
	o := &RuntimesOptions{Clock: clocktesting.NewFakePassiveClock(created.Add(3 * 24 * time.Hour))}
	table := o.table(t.Context(), collect(cluster, namespaced))

	var columns []string
	for _, c := range table.ColumnDefinitions {
		columns = append(columns, c.Name)
	}
	if diff := cmp.Diff([]string{"Name", "Kind", "Framework", "Policy", "Nodes", "GPUs", "Age"}, columns); diff != "" {
		t.Errorf("columns (-want +got):\n%s", diff)
	}
	var rows [][]any
	for _, r := range table.Rows {
		rows = append(rows, r.Cells)
	}
	want := [][]any{
		{"deepspeed", "ClusterTrainingRuntime", "deepspeed", "mpi", "-", "-", "3d"},
		{"torch-distributed", "ClusterTrainingRuntime", "torch", "torch", "2", "4", "3d"},
		{"launcher-only", "TrainingRuntime", "-", "mpi", "-", "-", "3d"},
		{"other-container", "TrainingRuntime", "-", "torch", "2", "-", "3d"},
		{"plain", "TrainingRuntime", "-", "plainml", "-", "1", "3d"},
	}
	if diff := cmp.Diff(want, rows); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
	for i, r := range table.Rows {
		if gvk := r.Object.Object.GetObjectKind().GroupVersionKind(); gvk.Kind != rows[i][1] || gvk.GroupVersion() != trainer.GroupVersion {
			t.Errorf("row %d: object of kind %v, want %s %s (for -o)", i, gvk, trainer.GroupVersion, rows[i][1])
		}
	}
}

func TestPolicy(t *testing.T) {
	tests := []struct {
		policy *trainer.MLPolicy
		want   string
	}{
		{nil, "plainml"},
		{&trainer.MLPolicy{NumNodes: ptr.To[int32](3)}, "plainml"},
		{&trainer.MLPolicy{MLPolicySource: trainer.MLPolicySource{Torch: &trainer.TorchMLPolicySource{}}}, "torch"},
		{&trainer.MLPolicy{MLPolicySource: trainer.MLPolicySource{MPI: &trainer.MPIMLPolicySource{}}}, "mpi"},
		{&trainer.MLPolicy{MLPolicySource: trainer.MLPolicySource{JAX: &trainer.JAXMLPolicySource{}}}, "jax"},
		{&trainer.MLPolicy{MLPolicySource: trainer.MLPolicySource{XGBoost: &trainer.XGBoostMLPolicySource{}}}, "xgboost"},
		{&trainer.MLPolicy{MLPolicySource: trainer.MLPolicySource{Flux: &trainer.FluxMLPolicySource{}}}, "flux"},
	}
	for _, tt := range tests {
		if got := Policy(tt.policy); got != tt.want {
			t.Errorf("Policy(%+v) = %q, want %q", tt.policy, got, tt.want)
		}
	}
}

func TestListError(t *testing.T) {
	resource := "clustertrainingruntimes.trainer.kubeflow.org"
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "trainer.kubeflow.org", Resource: "clustertrainingruntimes"}, "",
		errors.New(`User "dev" cannot list resource`))
	tests := []struct {
		name          string
		err           error
		allNamespaces bool
		want          string
	}{
		{"forbidden in a namespace", forbidden, false,
			`you may not list clustertrainingruntimes.trainer.kubeflow.org in namespace "team": ` + forbidden.Status().Message},
		{"forbidden everywhere", forbidden, true,
			`you may not list clustertrainingruntimes.trainer.kubeflow.org in all namespaces: ` + forbidden.Status().Message},
		{"another error", errors.New("connection refused"), false,
			`cannot list clustertrainingruntimes.trainer.kubeflow.org in namespace "team": connection refused`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := listError(tt.err, resource, tt.allNamespaces, "team")
			if err.Error() != tt.want {
				t.Errorf("listError = %q, want %q", err, tt.want)
			}
			if !apierrors.IsForbidden(tt.err) && !errors.Is(err, tt.err) {
				t.Errorf("listError does not wrap %v", tt.err)
			}
		})
	}
}
