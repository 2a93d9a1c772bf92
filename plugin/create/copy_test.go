package create

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
)

// entry is a managedFields entry of the TrainJob itself (subresource "" unless given).
func entry(manager string, op metav1.ManagedFieldsOperationType, fields string, subresource ...string) metav1.ManagedFieldsEntry {
	e := metav1.ManagedFieldsEntry{Manager: manager, Operation: op, APIVersion: "trainer.kubeflow.org/v1alpha1",
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}}
	if len(subresource) > 0 {
		e.Subresource = subresource[0]
	}
	return e
}

// live is a TrainJob as the API server holds it after its creator, Kueue, an editor and the controller
// wrote to it.
func live(managed ...metav1.ManagedFieldsEntry) *trainer.TrainJob {
	return &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{
			Name: "llama", Namespace: "team-a", UID: "u1", ResourceVersion: "7", Generation: 3,
			Labels: map[string]string{"team": "nlp", "kueue.x-k8s.io/queue-name": "gpu"},
			Annotations: map[string]string{
				"owner": "alice", corev1.LastAppliedConfigAnnotation: `{"kind":"TrainJob"}`,
				RerunOfAnnotation: "llama-0", "edited-by": "bob",
			},
			ManagedFields: managed,
		},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{Name: "torch-distributed", APIGroup: ptr.To("trainer.kubeflow.org"), Kind: ptr.To("ClusterTrainingRuntime")},
			Suspend:    ptr.To(false),
			ManagedBy:  ptr.To(trainer.TrainJobControllerManager),
			Trainer: &trainer.Trainer{
				Image:    ptr.To("ghcr.io/example/llama-ft:1.0"),
				Command:  []string{"torchrun", "train.py"},
				NumNodes: ptr.To[int32](4),
				Env:      []corev1.EnvVar{{Name: "NCCL_DEBUG", Value: "INFO"}, {Name: "EPOCHS", Value: "3"}},
				ResourcesPerNode: &corev1.ResourceRequirements{
					Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8"), corev1.ResourceCPU: resource.MustParse("16")},
					Limits:   corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8"), corev1.ResourceCPU: resource.MustParse("16")},
				},
			},
			RuntimePatches: []trainer.RuntimePatch{{Manager: "kueue.x-k8s.io/manager", Time: &metav1.Time{}}},
		},
		Status: trainer.TrainJobStatus{Conditions: []metav1.Condition{{Type: trainer.TrainJobComplete, Status: metav1.ConditionTrue}}},
	}
}

// creatorFields are what `kubectl trainjob create` sent, with the CRD's defaults the API server recorded as
// the creator's (suspend, managedBy, the runtimeRef's apiGroup and kind).
const creatorFields = `{"f:metadata":{"f:annotations":{".":{},"f:owner":{},"f:kubectl.kubernetes.io/last-applied-configuration":{}},
 "f:labels":{".":{},"f:team":{},"f:kueue.x-k8s.io/queue-name":{}}},
 "f:spec":{".":{},"f:managedBy":{},"f:suspend":{},"f:runtimeRef":{".":{},"f:apiGroup":{},"f:kind":{},"f:name":{}},
  "f:trainer":{".":{},"f:image":{},"f:command":{},"f:numNodes":{},
   "f:env":{".":{},"k:{\"name\":\"NCCL_DEBUG\"}":{".":{},"f:name":{},"f:value":{}},"k:{\"name\":\"EPOCHS\"}":{".":{},"f:name":{},"f:value":{}}},
   "f:resourcesPerNode":{".":{},"f:limits":{".":{},"f:cpu":{},"f:nvidia.com/gpu":{}},"f:requests":{".":{},"f:cpu":{},"f:nvidia.com/gpu":{}}}}}}`

// TestAsWritten: the copy holds what the creator wrote and all labels, and nothing another manager wrote,
// what the API server keeps, the status, kubectl apply's annotation or an earlier rerun-of.
func TestAsWritten(t *testing.T) {
	src := live(
		entry("kubectl-trainjob", metav1.ManagedFieldsOperationUpdate, creatorFields),
		entry("kueue", metav1.ManagedFieldsOperationUpdate, `{"f:spec":{"f:runtimePatches":{".":{},"k:{\"manager\":\"kueue.x-k8s.io/manager\"}":{".":{},"f:manager":{}}}}}`),
		entry("kubectl-edit", metav1.ManagedFieldsOperationUpdate, `{"f:metadata":{"f:annotations":{"f:edited-by":{}}}}`),
		entry("trainjob-controller", metav1.ManagedFieldsOperationUpdate, `{"f:status":{"f:conditions":{}}}`, "status"),
	)
	got, err := asWritten(src)
	if err != nil {
		t.Fatal(err)
	}
	want := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Labels: src.Labels, Annotations: map[string]string{"owner": "alice"}},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: src.Spec.RuntimeRef, Suspend: ptr.To(false), ManagedBy: src.Spec.ManagedBy, Trainer: src.Spec.Trainer,
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("asWritten (-want +got):\n%s", diff)
	}
	got.Labels["team"] = "vision"
	if src.Labels["team"] != "nlp" {
		t.Error("the copy's labels are the original's map")
	}
}

// TestAsWrittenOnlyTheCreatorsChanges: a field the creator wrote and another manager changed since is the
// other's, and left out; several appliers of the same file are all the creator.
func TestAsWrittenOnlyTheCreatorsChanges(t *testing.T) {
	src := live(
		entry("kubectl", metav1.ManagedFieldsOperationApply, `{"f:spec":{"f:runtimeRef":{"f:name":{}},"f:trainer":{"f:image":{}}}}`),
		entry("kubectl-2", metav1.ManagedFieldsOperationApply, `{"f:spec":{"f:runtimeRef":{"f:name":{}},"f:trainer":{"f:numNodes":{}}}}`),
		entry("kueue", metav1.ManagedFieldsOperationUpdate, `{"f:spec":{"f:suspend":{}}}`),
	)
	got, err := asWritten(src)
	if err != nil {
		t.Fatal(err)
	}
	want := trainer.TrainJobSpec{
		RuntimeRef: trainer.RuntimeRef{Name: "torch-distributed"},
		Trainer:    &trainer.Trainer{Image: src.Spec.Trainer.Image, NumNodes: src.Spec.Trainer.NumNodes},
	}
	if diff := cmp.Diff(want, got.Spec); diff != "" {
		t.Errorf("spec (-want +got):\n%s", diff)
	}
	if got.Annotations != nil {
		t.Errorf("annotations = %v, want none: the appliers wrote none", got.Annotations)
	}
}

// TestAsWrittenWithoutCreator: a TrainJob whose managers own no spec.runtimeRef cannot be copied as written,
// and the error says how to copy it by hand.
func TestAsWrittenWithoutCreator(t *testing.T) {
	for _, tc := range []struct {
		name    string
		managed []metav1.ManagedFieldsEntry
	}{
		{"no managedFields", nil},
		{"only the status", []metav1.ManagedFieldsEntry{entry("c", metav1.ManagedFieldsOperationUpdate, `{"f:spec":{"f:runtimeRef":{}}}`, "status")}},
		{"no runtimeRef", []metav1.ManagedFieldsEntry{entry("kueue", metav1.ManagedFieldsOperationUpdate, `{"f:spec":{"f:suspend":{}}}`)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := asWritten(live(tc.managed...))
			if err == nil || !strings.Contains(err.Error(), "no field manager owns its spec.runtimeRef") || !strings.Contains(err.Error(), "kubectl get trainjob llama -o yaml") {
				t.Errorf("error = %v, want one that says no manager owns spec.runtimeRef and how to copy by hand", err)
			}
		})
	}
}

// TestPrune: each notation of FieldsV1 keeps what it names, of maps, lists by key, sets, indexes and atomic
// values.
func TestPrune(t *testing.T) {
	obj := map[string]any{
		"a": "x",
		"b": map[string]any{"c": int64(1), "d": int64(2)},
		"ports": []any{
			map[string]any{"containerPort": int64(8080), "protocol": "TCP", "name": "http"},
			map[string]any{"containerPort": int64(6006), "protocol": "TCP", "name": "tb"},
		},
		"set":    []any{"p", "q", "r"},
		"list":   []any{"i0", "i1"},
		"atomic": map[string]any{"k": "v", "l": "w"},
	}
	fields := map[string]any{
		"f:b":      map[string]any{"f:d": map[string]any{}},
		"f:ports":  map[string]any{".": map[string]any{}, `k:{"containerPort":6006,"protocol":"TCP"}`: map[string]any{".": map[string]any{}, "f:name": map[string]any{}}},
		"f:set":    map[string]any{`v:"q"`: map[string]any{}},
		"f:list":   map[string]any{"i:1": map[string]any{}},
		"f:atomic": map[string]any{},
		"f:gone":   map[string]any{},
	}
	want := map[string]any{
		"b":      map[string]any{"d": int64(2)},
		"ports":  []any{map[string]any{"containerPort": int64(6006), "protocol": "TCP", "name": "tb"}},
		"set":    []any{"q"},
		"list":   []any{"i1"},
		"atomic": map[string]any{"k": "v", "l": "w"},
	}
	if diff := cmp.Diff(want, prune(obj, fields)); diff != "" {
		t.Errorf("prune (-want +got):\n%s", diff)
	}
}

// TestApplyToCopy: flags change a copy key by key — env vars, resources, labels, annotations — and leave the
// rest of it.
func TestApplyToCopy(t *testing.T) {
	tj := live()
	tj.Spec.Suspend = ptr.To(true)
	s := &spec{}
	if err := s.set([]string{"nodes=8", "env=EPOCHS=10", "env=LR=3e-4", "resources-per-node=memory=64Gi", "gpus-per-node=4",
		"label=team=vision", "annotation=note=again", "suspend=false", "dataset-uri=hf://tatsu-lab/alpaca"}); err != nil {
		t.Fatal(err)
	}
	if err := s.applyTo(tj); err != nil {
		t.Fatal(err)
	}
	res := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("4"), corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("64Gi")}
	wantTrainer := &trainer.Trainer{
		Image:            ptr.To("ghcr.io/example/llama-ft:1.0"),
		Command:          []string{"torchrun", "train.py"},
		NumNodes:         ptr.To[int32](8),
		Env:              []corev1.EnvVar{{Name: "NCCL_DEBUG", Value: "INFO"}, {Name: "EPOCHS", Value: "10"}, {Name: "LR", Value: "3e-4"}},
		ResourcesPerNode: &corev1.ResourceRequirements{Requests: res, Limits: res},
	}
	if diff := cmp.Diff(wantTrainer, tj.Spec.Trainer); diff != "" {
		t.Errorf("trainer (-want +got):\n%s", diff)
	}
	if tj.Spec.Suspend != nil {
		t.Errorf("suspend = %v, want the default (--set suspend=false)", *tj.Spec.Suspend)
	}
	if got := tj.Spec.Initializer.Dataset.StorageUri; got == nil || *got != "hf://tatsu-lab/alpaca" {
		t.Errorf("dataset storageUri = %v", got)
	}
	if tj.Labels["team"] != "vision" || tj.Labels["kueue.x-k8s.io/queue-name"] != "gpu" || tj.Annotations["note"] != "again" || tj.Annotations["owner"] != "alice" {
		t.Errorf("labels %v, annotations %v: want team=vision beside the queue, note=again beside owner", tj.Labels, tj.Annotations)
	}
}

// TestSet: rerun's --set takes create's flags by name, with create's parsing, and says what is wrong.
func TestSet(t *testing.T) {
	for _, tc := range []struct {
		set  string
		want string
	}{
		{"nodes", `invalid --set "nodes": write it as FLAG=VALUE with a flag of create, e.g. --set nodes=4`},
		{"=4", `invalid --set "=4": write it as FLAG=VALUE with a flag of create, e.g. --set nodes=4`},
		{"gpus=8", `invalid --set "gpus=8": gpus is not a flag create takes; use one of runtime, image, nodes, gpus-per-node, resources-per-node, env, dataset-uri, model-uri, suspend, label, annotation, queue, gpu-type, topology, gpu-claim`},
		{"nodes=four", `invalid --set "nodes=four": --nodes takes a whole number, not "four"`},
		{"suspend=maybe", `invalid --set "suspend=maybe": --suspend takes true or false, not "maybe"`},
	} {
		t.Run(tc.set, func(t *testing.T) {
			err := (&spec{}).set([]string{tc.set})
			if err == nil || err.Error() != tc.want {
				t.Errorf("error = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestRerunSuffix: a rerun of a rerun counts on from the first name.
func TestRerunSuffix(t *testing.T) {
	for name, base := range map[string]string{
		"llama": "llama", "llama-rerun-1": "llama", "llama-rerun-12": "llama", "llama-rerun": "llama-rerun",
		"llama-rerun-0": "llama-rerun-0", "llama-rerun-1-x": "llama-rerun-1-x",
	} {
		if got := rerunSuffix.ReplaceAllString(name, ""); got != base {
			t.Errorf("base of %s = %s, want %s", name, got, base)
		}
	}
}
