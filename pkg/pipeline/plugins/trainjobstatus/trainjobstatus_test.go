package trainjobstatus

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/pipelinetest"
)

var operatorInfo = pipeline.OperatorInfo{
	Namespace:          "ops",
	WebhookServiceName: "trainjob-webhook",
	WebhookSecretName:  "trainjob-webhook-cert",
	StatusServerPort:   10443,
}

// runtime has an initializer, a trainer step with a sidecar and an init
// container, and a job that is neither.
const runtime = `
apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata: {name: torch-distributed}
spec:
  mlPolicy: {torch: {}}
  template:
    spec:
      replicatedJobs:
      - name: dataset-initializer
        template:
          metadata:
            labels: {trainer.kubeflow.org/trainjob-ancestor-step: dataset-initializer}
          spec:
            template:
              spec:
                containers:
                - name: dataset-initializer
                  image: initializer
      - name: node
        template:
          metadata:
            labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}
          spec:
            template:
              spec:
                initContainers:
                - name: wait
                  image: busybox
                containers:
                - name: node
                  image: torch
                  env:
                  - {name: KUBEFLOW_TRAINER_SERVER_URL, value: stale}
                  - {name: KEEP, value: "1"}
                  volumeMounts:
                  - {name: data, mountPath: /data}
                - name: sidecar
                  image: logger
                volumes:
                - name: data
                  emptyDir: {}
`

// noTrainerRuntime has no job labelled as the trainer step.
const noTrainerRuntime = `
apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata: {name: plain}
spec:
  template:
    spec:
      replicatedJobs:
      - name: worker
        template:
          spec:
            template:
              spec:
                containers:
                - name: worker
                  image: worker
`

const trainJobDoc = `
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: alpha, namespace: team}
spec:
  runtimeRef: {name: torch-distributed}
`

func newPlugin(t *testing.T, c client.Client) *TrainJobStatus {
	t.Helper()
	h := pipeline.OfflineHandle(operatorInfo)
	if c != nil {
		h = pipeline.NewHandle(c, c.RESTMapper(), operatorInfo)
	}
	return newPluginOf(t, h)
}

func newPluginOf(t *testing.T, h pipeline.Handle) *TrainJobStatus {
	t.Helper()
	p, err := New(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	return p.(*TrainJobStatus)
}

func TestNewNeedsTheOperatorFacts(t *testing.T) {
	cases := []struct {
		name string
		edit func(*pipeline.OperatorInfo)
	}{
		{name: "no namespace", edit: func(o *pipeline.OperatorInfo) { o.Namespace = "" }},
		{name: "no webhook Service", edit: func(o *pipeline.OperatorInfo) { o.WebhookServiceName = "" }},
		{name: "no webhook Secret", edit: func(o *pipeline.OperatorInfo) { o.WebhookSecretName = "" }},
		{name: "no status server port", edit: func(o *pipeline.OperatorInfo) { o.StatusServerPort = 0 }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			op := operatorInfo
			tc.edit(&op)
			if _, err := New(context.Background(), pipeline.OfflineHandle(op)); err == nil || !strings.Contains(err.Error(), "status server port") {
				t.Errorf("New = %v, want an error naming what the plugin needs", err)
			}
		})
	}
}

func TestEnforcePodSpec(t *testing.T) {
	const url = "https://trainjob-webhook.ops.svc:10443/apis/trainer.kubeflow.org/v1alpha1/namespaces/team/trainjobs/alpha/status"
	injected := []corev1.EnvVar{
		{Name: "KUBEFLOW_TRAINER_SERVER_URL", Value: url},
		{Name: "KUBEFLOW_TRAINER_SERVER_CA_CERT", Value: "/var/run/secrets/kubeflow/trainer/ca.crt"},
		{Name: "KUBEFLOW_TRAINER_SERVER_TOKEN", Value: "/var/run/secrets/kubeflow/trainer/token"},
	}
	tokenMount := corev1.VolumeMount{Name: "kubeflow-trainer-token", MountPath: "/var/run/secrets/kubeflow/trainer", ReadOnly: true}
	wantTrainer := corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "wait", Image: "busybox"}},
		Containers: []corev1.Container{
			{
				Name:  "node",
				Image: "torch",
				// The stale URL is replaced in place; KEEP stays.
				Env:          append([]corev1.EnvVar{injected[0], {Name: "KEEP", Value: "1"}}, injected[1:]...),
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}, tokenMount},
			},
			{Name: "sidecar", Image: "logger", Env: injected, VolumeMounts: []corev1.VolumeMount{tokenMount}},
		},
		Volumes: []corev1.Volume{
			{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "kubeflow-trainer-token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
					Audience:          "trainer.kubeflow.org/v1alpha1/namespaces/team/trainjobs/alpha/status",
					ExpirationSeconds: ptr.To[int64](3600),
					Path:              "token",
				}},
				{ConfigMap: &corev1.ConfigMapProjection{
					LocalObjectReference: corev1.LocalObjectReference{Name: "alpha-tls-config"},
					Items:                []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}},
				}},
			}}}},
		},
	}
	wantInitializer := corev1.PodSpec{Containers: []corev1.Container{{Name: "dataset-initializer", Image: "initializer"}}}

	tj := pipelinetest.TrainJob(t, trainJobDoc)
	info := pipelinetest.Info(t, tj, pipelinetest.Runtime(t, runtime))
	p := newPlugin(t, nil)
	// Twice: a second run must change nothing.
	for range 2 {
		if err := p.EnforcePodSpec(info, tj); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff(wantTrainer, info.PodSet("node").Template.Spec); diff != "" {
		t.Errorf("trainer pod spec (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantInitializer, info.PodSet("dataset-initializer").Template.Spec); diff != "" {
		t.Errorf("initializer pod spec (-want +got):\n%s", diff)
	}
}

func TestEnforcePodSpecWithoutTrainerStep(t *testing.T) {
	tj := pipelinetest.TrainJob(t, trainJobDoc)
	info := pipelinetest.Info(t, tj, pipelinetest.Runtime(t, noTrainerRuntime))
	want := info.PodSet("worker").Template.Spec.DeepCopy()
	if err := newPlugin(t, nil).EnforcePodSpec(info, tj); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, &info.PodSet("worker").Template.Spec); diff != "" {
		t.Errorf("pod spec changed (-want +got):\n%s", diff)
	}
}

func TestBuild(t *testing.T) {
	const ca = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
	certSecret := func(data map[string][]byte) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "trainjob-webhook-cert", Namespace: "ops"}, Data: data}
	}
	wantConfigMap := &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      "alpha-tls-config",
			Namespace: "team",
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "trainer.kubeflow.org/v1alpha1", Kind: "TrainJob", Name: "alpha", UID: "uid-0001",
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Data: map[string]string{"ca.crt": ca},
	}
	cases := []struct {
		name    string
		runtime string
		client  client.Client
		want    []client.Object
		wantErr string
	}{
		{
			name:    "CA copied from the webhook certificate Secret",
			runtime: runtime,
			client:  fake.NewClientBuilder().WithObjects(certSecret(map[string][]byte{"ca.crt": []byte(ca), "tls.key": []byte("secret")})).Build(),
			want:    []client.Object{wantConfigMap},
		},
		{
			name:    "no trainer step, no ConfigMap",
			runtime: noTrainerRuntime,
			client:  fake.NewClientBuilder().Build(),
		},
		{
			name:    "Secret missing",
			runtime: runtime,
			client:  fake.NewClientBuilder().Build(),
			wantErr: `read webhook certificate Secret ops/trainjob-webhook-cert: secrets "trainjob-webhook-cert" not found`,
		},
		{
			name:    "Secret of another namespace does not count",
			runtime: runtime,
			client: fake.NewClientBuilder().WithObjects(&corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: "trainjob-webhook-cert", Namespace: "team"},
				Data:       map[string][]byte{"ca.crt": []byte(ca)},
			}).Build(),
			wantErr: `secrets "trainjob-webhook-cert" not found`,
		},
		{
			name:    "Secret without a CA yet",
			runtime: runtime,
			client:  fake.NewClientBuilder().WithObjects(certSecret(map[string][]byte{"tls.crt": []byte("cert")})).Build(),
			wantErr: "webhook certificate Secret ops/trainjob-webhook-cert has no ca.crt yet",
		},
		{
			name:    "offline, without the Secret in the input files",
			runtime: runtime,
			wantErr: `read webhook certificate Secret ops/trainjob-webhook-cert: secrets "trainjob-webhook-cert" not found`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tj := pipelinetest.TrainJob(t, trainJobDoc)
			info := pipelinetest.Info(t, tj, pipelinetest.Runtime(t, tc.runtime))
			got, err := newPlugin(t, tc.client).Build(context.Background(), info, tj)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Build: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("Build error = %v, want one containing %q", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("objects (-want +got):\n%s", diff)
			}
		})
	}
}

// operatorCA is a ServingCA the operator keeps in memory.
type operatorCA []byte

func (c operatorCA) Bundle(context.Context) ([]byte, error) { return c, nil }
func (operatorCA) Notify(func())                            {}

// TestBuildWithTheOperatorsCA: in the operator, the CA comes from its
// memory: a build neither reads the Secret nor fails without it.
func TestBuildWithTheOperatorsCA(t *testing.T) {
	const ca = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
	c := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		Get: func(_ context.Context, _ client.WithWatch, key client.ObjectKey, _ client.Object, _ ...client.GetOption) error {
			t.Errorf("Build read %s", key)
			return apierrors.NewServiceUnavailable("not to be read")
		},
	}).Build()
	p := newPluginOf(t, pipeline.NewOperatorHandle(c, c.RESTMapper(), operatorInfo, operatorCA(ca)))
	tj := pipelinetest.TrainJob(t, trainJobDoc)
	info := pipelinetest.Info(t, tj, pipelinetest.Runtime(t, runtime))
	got, err := p.Build(context.Background(), info, tj)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if len(got) != 1 || got[0].(*corev1.ConfigMap).Data["ca.crt"] != ca {
		t.Errorf("Build = %+v, want the -tls-config ConfigMap with the operator's CA", got)
	}
}

func TestAPIErrorIsWrapped(t *testing.T) {
	errAPI := apierrors.NewServiceUnavailable("etcd is away")
	c := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
			return errAPI
		},
	}).Build()
	tj := pipelinetest.TrainJob(t, trainJobDoc)
	info := pipelinetest.Info(t, tj, pipelinetest.Runtime(t, runtime))
	if _, err := newPlugin(t, c).Build(context.Background(), info, tj); !errors.Is(err, errAPI) {
		t.Errorf("Build error = %v, want it to wrap %v", err, errAPI)
	}
}
