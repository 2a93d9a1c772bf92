package dryrun

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
)

func runtimeOf(t *testing.T, obj client.Object) *pipeline.Runtime {
	t.Helper()
	rt, err := pipeline.RuntimeOf(obj)
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

func trainJobOn(kind, name string) *trainer.TrainJob {
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "job"}}
	tj.Spec.RuntimeRef = trainer.RuntimeRef{Name: name, Kind: ptr.To(kind), APIGroup: ptr.To(trainer.GroupVersion.Group)}
	return tj
}

// TestFindRuntime: the runtime a TrainJob references, by kind, name and (for a TrainingRuntime) its
// namespace; else the webhook's words, the very ones the operator's webhook answers (pkg/admission).
func TestFindRuntime(t *testing.T) {
	cluster := runtimeOf(t, &trainer.ClusterTrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "torch"}})
	local := runtimeOf(t, &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "torch"}})
	elsewhere := runtimeOf(t, &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "mine"}})
	all := []*pipeline.Runtime{cluster, local, elsewhere}
	denied := `trainjobs.trainer.kubeflow.org is forbidden: admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request: `
	tests := []struct {
		name    string
		tj      *trainer.TrainJob
		want    *pipeline.Runtime
		wantErr string
	}{
		{name: "ClusterTrainingRuntime", tj: trainJobOn(trainer.ClusterTrainingRuntimeKind, "torch"), want: cluster},
		{name: "TrainingRuntime of the namespace, not the cluster's of the same name", tj: trainJobOn(trainer.TrainingRuntimeKind, "torch"), want: local},
		{name: "TrainingRuntime of another namespace", tj: trainJobOn(trainer.TrainingRuntimeKind, "mine"),
			wantErr: denied + `spec.runtimeRef: Invalid value: "mine": ` +
				`trainingruntimes.trainer.kubeflow.org "mine" not found: specified trainingRuntime must be created before the TrainJob is created`},
		{name: "missing ClusterTrainingRuntime", tj: trainJobOn(trainer.ClusterTrainingRuntimeKind, "gone"),
			wantErr: denied + `spec.runtimeRef: Invalid value: "gone": ` +
				`clustertrainingruntimes.trainer.kubeflow.org "gone" not found: specified clusterTrainingRuntime must be created before the TrainJob is created`},
		{name: "unsupported kind", tj: trainJobOn("Runtime", "torch"),
			wantErr: denied + `unsupported runtime: Runtime.trainer.kubeflow.org`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FindRuntime(tt.tj, all)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if gotErr != tt.wantErr {
				t.Errorf("error:\n got %s\nwant %s", gotErr, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("FindRuntime = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestToUnstructured: what render prints: no status, no null creationTimestamp, Secret values redacted
// unless shown.
func TestToUnstructured(t *testing.T) {
	secret := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "job-mpi-ssh-auth"},
		Data:       map[string][]byte{"ssh-privatekey": []byte("PRIVATE")},
		StringData: map[string]string{"note": "plain"},
	}
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "job-mpi-hostfile"},
		Data:       map[string]string{"hostfile": "job-node-0-0.job slots=8\n"},
	}
	const hostfileYAML = `---
apiVersion: v1
data:
  hostfile: |
    job-node-0-0.job slots=8
kind: ConfigMap
metadata:
  name: job-mpi-hostfile
  namespace: team
`
	tests := []struct {
		name        string
		showSecrets bool
		want        string
	}{
		{"redacted", false, hostfileYAML + `---
apiVersion: v1
data:
  ssh-privatekey: <redacted>
kind: Secret
metadata:
  name: job-mpi-ssh-auth
  namespace: team
stringData:
  note: <redacted>
`},
		{"shown", true, hostfileYAML + `---
apiVersion: v1
data:
  ssh-privatekey: UFJJVkFURQ==
kind: Secret
metadata:
  name: job-mpi-ssh-auth
  namespace: team
stringData:
  note: plain
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := ToUnstructured([]client.Object{cm, secret}, tt.showSecrets)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := WriteYAML(&out, objs); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, "---\n"+out.String()); diff != "" {
				t.Errorf("YAML (-want +got):\n%s", diff)
			}
		})
	}
	if string(secret.Data["ssh-privatekey"]) != "PRIVATE" {
		t.Errorf("ToUnstructured changed the Secret it was given: %q", secret.Data["ssh-privatekey"])
	}
}

func TestWriteJSONOfNothing(t *testing.T) {
	var out bytes.Buffer
	if err := WriteJSON(&out, nil); err != nil {
		t.Fatal(err)
	}
	want := "{\n    \"apiVersion\": \"v1\",\n    \"items\": [],\n    \"kind\": \"List\",\n    \"metadata\": {}\n}\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("JSON (-want +got):\n%s", diff)
	}
}

func TestSource(t *testing.T) {
	for _, tt := range []struct {
		s    Source
		want string
	}{
		{Source{File: "job.yaml", Document: 1}, "job.yaml"},
		{Source{File: "-"}, "-"},
		{Source{File: "all.yaml", Document: 3}, "all.yaml (document 3)"},
	} {
		if got := tt.s.String(); got != tt.want {
			t.Errorf("%+v = %q, want %q", tt.s, got, tt.want)
		}
	}
}

// TestAdmitTrainJob: a TrainJob made in memory is admitted as one read from a file: the CRD's defaults are
// set on a copy, and the CRD's rules refuse what the API server would, in its words.
func TestAdmitTrainJob(t *testing.T) {
	schema, err := NewSchema()
	if err != nil {
		t.Fatal(err)
	}
	l := &Loader{Schema: schema, Namespace: "team"}
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "job"}}
	tj.Spec.RuntimeRef = trainer.RuntimeRef{Name: "torch"}
	got, err := l.AdmitTrainJob(t.Context(), tj)
	if err != nil {
		t.Fatal(err)
	}
	if got.Namespace != "team" || ptr.Deref(got.Spec.ManagedBy, "") != trainer.TrainJobControllerManager ||
		ptr.Deref(got.Spec.RuntimeRef.Kind, "") != trainer.ClusterTrainingRuntimeKind {
		t.Errorf("admitted: namespace %q, managedBy %v, runtimeRef.kind %v; want team and the CRD's defaults", got.Namespace, got.Spec.ManagedBy, got.Spec.RuntimeRef.Kind)
	}
	if tj.Spec.ManagedBy != nil || tj.Namespace != "" {
		t.Errorf("AdmitTrainJob changed the TrainJob it was given: %+v", tj)
	}
	tj.Spec.Trainer = &trainer.Trainer{NumProcPerNode: ptr.To[int32](0)}
	if _, err := l.AdmitTrainJob(t.Context(), tj); err == nil || !strings.Contains(err.Error(), `TrainJob.trainer.kubeflow.org "job" is invalid`) {
		t.Errorf("numProcPerNode 0: error %v, want the API server's refusal", err)
	}
}

// TestLoadValidatesRuntimes: a runtime file is refused as the operator's runtime webhook refuses it, not only by
// the CRD's rules: render and describe-pipeline -f never show what a cluster would not admit.
func TestLoadValidatesRuntimes(t *testing.T) {
	schema, err := NewSchema()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "runtime.yaml")
	doc := `apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata: {name: two-trainers}
spec:
  template:
    spec:
      replicatedJobs:
      - name: node
        replicas: 2
        template:
          metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}
          spec: {template: {spec: {containers: [{name: node, image: torch}]}}}
`
	if err := os.WriteFile(file, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	err = (&Loader{Schema: schema, Namespace: "team"}).Load(t.Context(), &Inputs{}, file)
	want := file + `: ClusterTrainingRuntime.trainer.kubeflow.org "two-trainers" is invalid: spec.template.spec.replicatedJobs[0].replicas: Invalid value: 2: always must be 1`
	if err == nil || err.Error() != want {
		t.Errorf("Load: %v\nwant %s", err, want)
	}
}
