package mpi

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/pipelinetest"
)

// testKeyPEM is a P-521 key made by `openssl ecparam -name secp521r1 -genkey
// -noout`; testAuthorizedKey is what `ssh-keygen -y` prints for it. Both are
// independent of the code under test.
const (
	testKeyPEM = `-----BEGIN EC PRIVATE KEY-----
MIHcAgEBBEIACienJXdC4yyycogXBtDzAXnsGXOZyOaoIAFLX72EuJPIdSV+smKC
Z4AaJgIViK4M6psTsh7VzyC9lrwKDCBV172gBwYFK4EEACOhgYkDgYYABACDcR8h
g5LDzvStwHWLYDDpE2TOWCNnwdGSfYdFxm6q98lBhjDdp5ipN4bxKMY0sayYK7QR
aT3KVED26/fIcxmXnAEubp6h5Fnc0H66QtCapmT6AXLazFOu/jdbuMpvr3GWfTB8
+9klB3k8YeNYzYWczam8ItMmFRBsby1TJklFrIPnEA==
-----END EC PRIVATE KEY-----
`
	testAuthorizedKey = "ecdsa-sha2-nistp521 AAAAE2VjZHNhLXNoYTItbmlzdHA1MjEAAAAIbmlzdHA1MjEAAACFBACDcR8hg5LDzvStwHWLYDDpE2TOWCNnwdGSfYdFxm6q98lBhjDdp5ipN4bxKMY0sayYK7QRaT3KVED26/fIcxmXnAEubp6h5Fnc0H66QtCapmT6AXLazFOu/jdbuMpvr3GWfTB8+9klB3k8YeNYzYWczam8ItMmFRBsby1TJklFrIPnEA==\n"
)

// deepspeedRuntime has the shape of the shipped deepspeed-distributed
// runtime: job `node` (no ancestor) then job `launcher` (the trainer step).
// nodeResources is a flow mapping for the `node` job's container.
func deepspeedRuntime(mlPolicy, nodeResources string) string {
	return fmt.Sprintf(`
apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata: {name: deepspeed-distributed}
spec:
  mlPolicy: %s
  template:
    spec:
      network: {publishNotReadyAddresses: true}
      successPolicy: {operator: All, targetReplicatedJobs: [launcher]}
      replicatedJobs:
      - name: node
        template:
          spec:
            template:
              spec:
                containers:
                - name: node
                  image: ghcr.io/kubeflow/trainer/deepspeed-runtime
                  command: [/usr/sbin/sshd]
                  args: [-De, -f, /home/mpiuser/.sshd_config]
                  resources: %s
      - name: launcher
        dependsOn: [{name: node, status: Ready}]
        template:
          metadata:
            labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}
          spec:
            template:
              spec:
                containers:
                - name: node
                  image: ghcr.io/kubeflow/trainer/deepspeed-runtime
`, mlPolicy, nodeResources)
}

// nodeTrainerRuntime has the launcher first and the `node` job as the
// trainer step, where resourcesPerNode lands.
func nodeTrainerRuntime(mlPolicy, nodeResources string) string {
	return fmt.Sprintf(`
apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata: {name: mpi-distributed}
spec:
  mlPolicy: %s
  template:
    spec:
      replicatedJobs:
      - name: launcher
        template:
          spec:
            template:
              spec:
                containers:
                - name: node
                  image: mpi-runtime
      - name: node
        template:
          metadata:
            labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}
          spec:
            template:
              spec:
                containers:
                - name: node
                  image: mpi-runtime
                  resources: %s
`, mlPolicy, nodeResources)
}

// oneJobRuntime has a single replicated job, the trainer step.
func oneJobRuntime(jobName, mlPolicy string) string {
	return pipelinetest.TrainerRuntime{
		Name: "mpi-one-job", MLPolicy: mlPolicy, Job: jobName,
		Pod: `{containers: [{name: node, image: mpi-runtime}]}`,
	}.YAML()
}

// trainJob is the TrainJob `alpha`; trainerSpec is a flow mapping for
// spec.trainer, or "" for none.
func trainJob(t *testing.T, trainerSpec string) *trainer.TrainJob {
	t.Helper()
	return pipelinetest.TrainJobOn(t, "mpi", trainerSpec)
}

// fillEndpoints names the pods as the JobSet plugin's PreBuildSync does,
// with one replica.
func fillEndpoints(info *pipeline.RuntimeInfo, tj *trainer.TrainJob) {
	for k := range info.PodSets {
		ps := &info.PodSets[k]
		ps.Endpoints = pipeline.Endpoints(tj.Name, ps.Name, 1, ps.Count, info.Subdomain(tj))
	}
}

func newMPI(t *testing.T, c client.Client) *MPI {
	t.Helper()
	h := pipeline.OfflineHandle(pipeline.OperatorInfo{})
	if c != nil {
		h = pipeline.NewHandle(c, c.RESTMapper(), pipeline.OperatorInfo{})
	}
	p, err := New(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	m := p.(*MPI)
	block, _ := pem.Decode([]byte(testKeyPEM))
	key, err := x509.ParseECPrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	m.generateKey = func() (*ecdsa.PrivateKey, error) { return key, nil }
	return m
}

// enforce builds the RuntimeInfo and runs EnforceMLPolicy on it.
func enforce(t *testing.T, runtimeDoc string, tj *trainer.TrainJob) (*pipeline.RuntimeInfo, error) {
	t.Helper()
	info := pipelinetest.Info(t, tj, pipelinetest.Runtime(t, runtimeDoc))
	return info, newMPI(t, nil).EnforceMLPolicy(info, tj)
}

func counts(info *pipeline.RuntimeInfo) map[string]int32 {
	out := map[string]int32{}
	for _, ps := range info.PodSets {
		out[ps.Name] = ps.Count
	}
	return out
}

func TestEnforceMLPolicyCountsAndSlots(t *testing.T) {
	cases := []struct {
		name        string
		runtime     string
		trainer     string
		wantCounts  map[string]int32
		wantNumProc int32
	}{
		{
			name:        "runtime numNodes and numProcPerNode when the TrainJob sets neither",
			runtime:     nodeTrainerRuntime("{numNodes: 2, mpi: {numProcPerNode: 4}}", "{}"),
			wantCounts:  map[string]int32{"launcher": 1, "node": 2},
			wantNumProc: 4,
		},
		{
			name:        "TrainJob numNodes overrides the runtime's",
			runtime:     nodeTrainerRuntime("{numNodes: 1, mpi: {numProcPerNode: 1}}", "{}"),
			trainer:     "{numNodes: 3}",
			wantCounts:  map[string]int32{"launcher": 1, "node": 3},
			wantNumProc: 1,
		},
		{
			name:        "TrainJob numProcPerNode overrides the runtime's",
			runtime:     nodeTrainerRuntime("{numNodes: 1, mpi: {numProcPerNode: 4}}", "{}"),
			trainer:     "{numProcPerNode: 2}",
			wantCounts:  map[string]int32{"launcher": 1, "node": 1},
			wantNumProc: 2,
		},
		{
			name:        "TrainJob numProcPerNode wins over GPUs",
			runtime:     nodeTrainerRuntime("{mpi: {numProcPerNode: 1}}", "{limits: {nvidia.com/gpu: 8}}"),
			trainer:     "{numProcPerNode: 3}",
			wantCounts:  map[string]int32{"launcher": 1, "node": 1},
			wantNumProc: 3,
		},
		{
			name:        "GPUs per node become the slots when the policy says 1",
			runtime:     nodeTrainerRuntime("{mpi: {numProcPerNode: 1}}", "{}"),
			trainer:     "{resourcesPerNode: {limits: {nvidia.com/gpu: 8}}}",
			wantCounts:  map[string]int32{"launcher": 1, "node": 1},
			wantNumProc: 8,
		},
		{
			name:        "runtime GPUs count when the TrainJob sets only CPU",
			runtime:     nodeTrainerRuntime("{mpi: {numProcPerNode: 1}}", "{limits: {nvidia.com/gpu: 4}}"),
			trainer:     "{resourcesPerNode: {requests: {cpu: 2}}}",
			wantCounts:  map[string]int32{"launcher": 1, "node": 1},
			wantNumProc: 4,
		},
		{
			name:        "GPUs do not override a policy other than 1",
			runtime:     nodeTrainerRuntime("{mpi: {numProcPerNode: 2}}", "{limits: {nvidia.com/gpu: 8}}"),
			wantCounts:  map[string]int32{"launcher": 1, "node": 1},
			wantNumProc: 2,
		},
		{
			name:        "a single GPU keeps one slot",
			runtime:     nodeTrainerRuntime("{mpi: {numProcPerNode: 1}}", "{limits: {nvidia.com/gpu: 1}}"),
			wantCounts:  map[string]int32{"launcher": 1, "node": 1},
			wantNumProc: 1,
		},
		{
			name:        "no numProcPerNode anywhere means one slot",
			runtime:     nodeTrainerRuntime("{mpi: {}}", "{}"),
			wantCounts:  map[string]int32{"launcher": 1, "node": 1},
			wantNumProc: 1,
		},
		{
			name:        "launcher as node takes one of the TrainJob's nodes",
			runtime:     deepspeedRuntime("{numNodes: 1, mpi: {numProcPerNode: 1, runLauncherAsNode: true}}", "{}"),
			trainer:     "{numNodes: 3}",
			wantCounts:  map[string]int32{"node": 2, "launcher": 1},
			wantNumProc: 1,
		},
		{
			name:        "launcher as node with one node still runs one node pod",
			runtime:     deepspeedRuntime("{numNodes: 1, mpi: {numProcPerNode: 1, runLauncherAsNode: true}}", "{}"),
			trainer:     "{numNodes: 1}",
			wantCounts:  map[string]int32{"node": 1, "launcher": 1},
			wantNumProc: 1,
		},
		{
			name:        "launcher as node with the runtime's numNodes keeps the launcher at one pod",
			runtime:     deepspeedRuntime("{numNodes: 4, mpi: {numProcPerNode: 1, runLauncherAsNode: true}}", "{}"),
			wantCounts:  map[string]int32{"node": 3, "launcher": 1},
			wantNumProc: 1,
		},
		{
			name:        "launcher as node takes the GPUs of the node job, where resourcesPerNode is merged",
			runtime:     deepspeedRuntime("{numNodes: 1, mpi: {numProcPerNode: 1, runLauncherAsNode: true}}", "{}"),
			trainer:     "{numNodes: 2, resourcesPerNode: {limits: {nvidia.com/gpu: 8}}}",
			wantCounts:  map[string]int32{"node": 1, "launcher": 1},
			wantNumProc: 8,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			info, err := enforce(t, tc.runtime, trainJob(t, tc.trainer))
			if err != nil {
				t.Fatalf("EnforceMLPolicy: %v", err)
			}
			if diff := cmp.Diff(tc.wantCounts, counts(info)); diff != "" {
				t.Errorf("pod set counts (-want +got):\n%s", diff)
			}
			if got := ptr.Deref(info.RuntimePolicy.MLPolicy.MPI.NumProcPerNode, 0); got != tc.wantNumProc {
				t.Errorf("settled numProcPerNode = %d, want %d", got, tc.wantNumProc)
			}
			env := info.PodSet(trainer.Launcher).Container(trainer.Node).Env
			if diff := cmp.Diff(fmt.Sprint(tc.wantNumProc), envValue(env, envDefaultSlots)); diff != "" {
				t.Errorf("launcher %s (-want +got):\n%s", envDefaultSlots, diff)
			}
		})
	}
}

func envValue(env []corev1.EnvVar, name string) string {
	for _, e := range env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

func TestEnforceMLPolicyPodTemplates(t *testing.T) {
	type podTemplate struct {
		Volumes []corev1.Volume
		Mounts  []corev1.VolumeMount
		Env     []corev1.EnvVar
	}
	// want is what spec §2.6 lists for the `node` and `launcher` pods.
	want := func(mountPath, slots string) map[string]podTemplate {
		sshAuth := corev1.Volume{Name: "mpi-ssh-auth", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName:  "alpha-mpi-ssh-auth",
			DefaultMode: ptr.To[int32](0o400),
			Items: []corev1.KeyToPath{
				{Key: "ssh-privatekey", Path: "id_rsa", Mode: ptr.To[int32](0o640)},
				{Key: "ssh-publickey", Path: "id_rsa.pub", Mode: ptr.To[int32](0o644)},
				{Key: "ssh-publickey", Path: "authorized_keys", Mode: ptr.To[int32](0o644)},
			},
		}}}
		hostfile := corev1.Volume{Name: "mpi-hostfile", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "alpha-mpi-hostfile"},
			Items:                []corev1.KeyToPath{{Key: "hostfile", Path: "hostfile", Mode: ptr.To[int32](0o444)}},
		}}}
		sshAuthMount := corev1.VolumeMount{Name: "mpi-ssh-auth", MountPath: mountPath}
		return map[string]podTemplate{
			"node": {Volumes: []corev1.Volume{sshAuth}, Mounts: []corev1.VolumeMount{sshAuthMount}},
			"launcher": {
				Volumes: []corev1.Volume{sshAuth, hostfile},
				Mounts:  []corev1.VolumeMount{sshAuthMount, {Name: "mpi-hostfile", MountPath: "/etc/mpi"}},
				Env: []corev1.EnvVar{
					{Name: "OMPI_MCA_orte_default_hostfile", Value: "/etc/mpi/hostfile"},
					{Name: "OMPI_MCA_orte_keep_fqdn_hostnames", Value: "true"},
					{Name: "OMPI_MCA_orte_set_default_slots", Value: slots},
					{Name: "OMPI_MCA_plm_rsh_args", Value: "-o ConnectionAttempts=10"},
				},
			},
		}
	}
	cases := []struct {
		name    string
		runtime string
		trainer string
		want    map[string]podTemplate
	}{
		{
			name:    "deepspeed runtime mounts the keys at sshAuthMountPath",
			runtime: deepspeedRuntime("{numNodes: 1, mpi: {numProcPerNode: 1, mpiImplementation: OpenMPI, sshAuthMountPath: /home/mpiuser/.ssh, runLauncherAsNode: true}}", "{}"),
			trainer: "{numNodes: 2, numProcPerNode: 8}",
			want:    want("/home/mpiuser/.ssh", "8"),
		},
		{
			name:    "keys are mounted at /root/.ssh by default",
			runtime: nodeTrainerRuntime("{mpi: {}}", "{}"),
			want:    want("/root/.ssh", "1"),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			info, err := enforce(t, tc.runtime, trainJob(t, tc.trainer))
			if err != nil {
				t.Fatalf("EnforceMLPolicy: %v", err)
			}
			got := map[string]podTemplate{}
			for _, ps := range info.PodSets {
				c := ps.Container(trainer.Node)
				got[ps.Name] = podTemplate{Volumes: ps.Template.Spec.Volumes, Mounts: c.VolumeMounts, Env: c.Env}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("pod templates (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEnforceMLPolicyIsIdempotent(t *testing.T) {
	tj := trainJob(t, "{numNodes: 2}")
	info := pipelinetest.Info(t, tj, pipelinetest.Runtime(t, deepspeedRuntime("{mpi: {runLauncherAsNode: true}}", "{}")))
	m := newMPI(t, nil)
	if err := m.EnforceMLPolicy(info, tj); err != nil {
		t.Fatal(err)
	}
	once := info.Template.DeepCopy()
	if err := m.EnforceMLPolicy(info, tj); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(once, info.Template); diff != "" {
		t.Errorf("second EnforceMLPolicy changed the template (-once +twice):\n%s", diff)
	}
}

func TestEnforceMLPolicySkipsOtherRuntimes(t *testing.T) {
	for _, policy := range []string{"{numNodes: 2, torch: {}}", "{numNodes: 2}", "null"} {
		t.Run(policy, func(t *testing.T) {
			tj := trainJob(t, "{numNodes: 3}")
			info := pipelinetest.Info(t, tj, pipelinetest.Runtime(t, nodeTrainerRuntime(policy, "{}")))
			before := info.Template.DeepCopy()
			beforeCounts := counts(info)
			if err := newMPI(t, nil).EnforceMLPolicy(info, tj); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(before, info.Template); diff != "" {
				t.Errorf("template changed (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(beforeCounts, counts(info)); diff != "" {
				t.Errorf("counts changed (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEnforceMLPolicyRejectsOtherImplementations(t *testing.T) {
	_, err := enforce(t, nodeTrainerRuntime("{mpi: {mpiImplementation: Intel}}", "{}"), trainJob(t, ""))
	if err == nil || err.Error() != `MPI implementation "Intel" is not supported` {
		t.Errorf("EnforceMLPolicy error = %v, want Intel not supported", err)
	}
}

func TestHostfile(t *testing.T) {
	cases := []struct {
		name    string
		runtime string
		trainer string
		want    string
	}{
		{
			name:    "one line per node pod with the settled slots (spec §6.1)",
			runtime: nodeTrainerRuntime("{numNodes: 1, mpi: {numProcPerNode: 1}}", "{}"),
			trainer: "{numNodes: 2, numProcPerNode: 8}",
			want:    "alpha-node-0-0.alpha slots=8\nalpha-node-0-1.alpha slots=8\n",
		},
		{
			name:    "GPU-derived slots",
			runtime: nodeTrainerRuntime("{numNodes: 1, mpi: {numProcPerNode: 1}}", "{limits: {nvidia.com/gpu: 4}}"),
			want:    "alpha-node-0-0.alpha slots=4\n",
		},
		{
			name:    "launcher running as a node is listed in template order, as upstream does",
			runtime: deepspeedRuntime("{numNodes: 1, mpi: {numProcPerNode: 2, runLauncherAsNode: true}}", "{}"),
			trainer: "{numNodes: 3}",
			want:    "alpha-node-0-0.alpha slots=2\nalpha-node-0-1.alpha slots=2\nalpha-launcher-0-0.alpha slots=2\n",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tj := trainJob(t, tc.trainer)
			info, err := enforce(t, tc.runtime, tj)
			if err != nil {
				t.Fatalf("EnforceMLPolicy: %v", err)
			}
			fillEndpoints(info, tj)
			objs, err := newMPI(t, nil).Build(context.Background(), info, tj)
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			cm, ok := objs[len(objs)-1].(*corev1.ConfigMap)
			if !ok {
				t.Fatalf("last object is %T, want the hostfile ConfigMap", objs[len(objs)-1])
			}
			if diff := cmp.Diff(tc.want, cm.Data["hostfile"]); diff != "" {
				t.Errorf("hostfile (-want +got):\n%s", diff)
			}
		})
	}
}

// TestHostfileBounded: Build refuses a hostfile larger than a ConfigMap holds as soon as it passes the
// limit, instead of writing it whole (a TrainJob admitted before the webhook checked its size, or built by
// render, must not make the operator hold a hostfile of numNodes lines).
func TestHostfileBounded(t *testing.T) {
	tj := trainJob(t, "{numNodes: 50000}")
	info, err := enforce(t, nodeTrainerRuntime("{numNodes: 1, mpi: {numProcPerNode: 1}}", "{}"), tj)
	if err != nil {
		t.Fatalf("EnforceMLPolicy: %v", err)
	}
	fillEndpoints(info, tj)
	_, err = newMPI(t, nil).Build(context.Background(), info, tj)
	const want = "the MPI hostfile of 50000 nodes is over the 1048576 bytes a ConfigMap holds: use fewer nodes"
	if err == nil || err.Error() != want {
		t.Errorf("Build: %v, want %s", err, want)
	}
}

func TestBuild(t *testing.T) {
	ownerRefs := []metav1.OwnerReference{{
		APIVersion: "trainer.kubeflow.org/v1alpha1", Kind: "TrainJob", Name: "alpha", UID: "uid-0001",
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}}
	wantSecret := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: "alpha-mpi-ssh-auth", Namespace: "default", OwnerReferences: ownerRefs},
		Type:       corev1.SecretTypeSSHAuth,
		Immutable:  ptr.To(true),
		Data: map[string][]byte{
			"ssh-privatekey": []byte(testKeyPEM),
			"ssh-publickey":  []byte(testAuthorizedKey),
		},
	}
	wantHostfile := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "alpha-mpi-hostfile", Namespace: "default", OwnerReferences: ownerRefs},
		Data:       map[string]string{"hostfile": "alpha-node-0-0.alpha slots=8\nalpha-node-0-1.alpha slots=8\n"},
	}
	existingSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "alpha-mpi-ssh-auth", Namespace: "default", OwnerReferences: pipelinetest.ControlledBy("alpha")}}
	errAPI := apierrors.NewServiceUnavailable("etcd is away")
	cases := []struct {
		name    string
		client  client.Client
		want    []client.Object
		wantErr error
	}{
		{
			name:   "offline render generates the Secret",
			client: nil,
			want:   []client.Object{wantSecret, wantHostfile},
		},
		{
			name:   "new TrainJob gets a Secret and a hostfile",
			client: fake.NewClientBuilder().Build(),
			want:   []client.Object{wantSecret, wantHostfile},
		},
		{
			name:   "existing Secret is not rebuilt",
			client: fake.NewClientBuilder().WithObjects(existingSecret).Build(),
			want:   []client.Object{wantHostfile},
		},
		{
			name: "Secret of the same name the TrainJob does not control is not its own",
			client: fake.NewClientBuilder().WithObjects(&corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: "alpha-mpi-ssh-auth", Namespace: "default"},
			}).Build(),
			want: []client.Object{wantSecret, wantHostfile},
		},
		{
			name: "Secret of another TrainJob does not count",
			client: fake.NewClientBuilder().WithObjects(&corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: "beta-mpi-ssh-auth", Namespace: "default"},
			}).Build(),
			want: []client.Object{wantSecret, wantHostfile},
		},
		{
			name: "API error reading the Secret is surfaced",
			client: fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
				Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
					return errAPI
				},
			}).Build(),
			wantErr: errAPI,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tj := trainJob(t, "{numNodes: 2, numProcPerNode: 8}")
			info := pipelinetest.Info(t, tj, pipelinetest.Runtime(t, nodeTrainerRuntime("{mpi: {}}", "{}")))
			m := newMPI(t, tc.client)
			if err := m.EnforceMLPolicy(info, tj); err != nil {
				t.Fatal(err)
			}
			fillEndpoints(info, tj)
			got, err := m.Build(context.Background(), info, tj)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Build error = %v, want %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("objects (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBuildSkipsOtherRuntimes(t *testing.T) {
	tj := trainJob(t, "")
	info := pipelinetest.Info(t, tj, pipelinetest.Runtime(t, nodeTrainerRuntime("{torch: {}}", "{}")))
	got, err := newMPI(t, fake.NewClientBuilder().Build()).Build(context.Background(), info, tj)
	if err != nil || got != nil {
		t.Errorf("Build = %v, %v; want nothing", got, err)
	}
}

// TestGeneratedSSHKey checks the real key generator: a P-521 key in an
// "EC PRIVATE KEY" PEM block whose public half is the authorized_keys line.
func TestGeneratedSSHKey(t *testing.T) {
	tj := trainJob(t, "")
	info := pipelinetest.Info(t, tj, pipelinetest.Runtime(t, nodeTrainerRuntime("{mpi: {}}", "{}")))
	p, err := New(context.Background(), pipeline.OfflineHandle(pipeline.OperatorInfo{}))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := p.(*MPI).Build(context.Background(), info, tj)
	if err != nil {
		t.Fatal(err)
	}
	secret := objs[0].(*corev1.Secret)
	block, rest := pem.Decode(secret.Data["ssh-privatekey"])
	if block == nil || block.Type != "EC PRIVATE KEY" || len(rest) != 0 {
		t.Fatalf("ssh-privatekey is not a single EC PRIVATE KEY PEM block:\n%s", secret.Data["ssh-privatekey"])
	}
	key, err := x509.ParseECPrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if key.Curve != elliptic.P521() {
		t.Errorf("curve = %s, want P-521", key.Curve.Params().Name)
	}
	pub, _, _, rest2, err := ssh.ParseAuthorizedKey(secret.Data["ssh-publickey"])
	if err != nil || len(rest2) != 0 {
		t.Fatalf("ssh-publickey is not one authorized_keys line: %v", err)
	}
	want, err := ssh.NewPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	if pub.Type() != "ecdsa-sha2-nistp521" || string(pub.Marshal()) != string(want.Marshal()) {
		t.Errorf("ssh-publickey %q does not match the private key", secret.Data["ssh-publickey"])
	}
}

func TestValidate(t *testing.T) {
	const numNodesMsg = "must have 1 when MPI trainingRuntime with enabled runLauncherAsNode does not have either launcher and node"
	launcherAsNode := "{mpi: {runLauncherAsNode: true}}"
	cases := []struct {
		name    string
		runtime string
		trainer string
		want    field.ErrorList
	}{
		{
			name:    "launcher as node with two nodes and both jobs",
			runtime: deepspeedRuntime(launcherAsNode, "{}"),
			trainer: "{numNodes: 2}",
		},
		{
			name:    "launcher as node with two nodes needs a node job",
			runtime: oneJobRuntime("launcher", launcherAsNode),
			trainer: "{numNodes: 2}",
			want:    field.ErrorList{field.Invalid(field.NewPath("spec", "trainer", "numNodes"), int32(2), numNodesMsg)},
		},
		{
			name:    "launcher as node with two nodes needs a launcher job",
			runtime: oneJobRuntime("node", launcherAsNode),
			trainer: "{numNodes: 2}",
			want:    field.ErrorList{field.Invalid(field.NewPath("spec", "trainer", "numNodes"), int32(2), numNodesMsg)},
		},
		{
			name:    "launcher as node with one node needs no launcher job",
			runtime: oneJobRuntime("node", launcherAsNode),
			trainer: "{numNodes: 1}",
		},
		{
			name:    "without launcher as node a single job is fine",
			runtime: oneJobRuntime("node", "{mpi: {}}"),
			trainer: "{numNodes: 4}",
		},
		{
			name:    "reserved OpenMPI envs are listed once, sorted",
			runtime: nodeTrainerRuntime("{mpi: {}}", "{}"),
			trainer: `{env: [{name: OMPI_MCA_plm_rsh_args, value: x}, {name: FOO, value: y}, {name: OMPI_MCA_orte_default_hostfile, value: z}]}`,
			want: field.ErrorList{field.Invalid(field.NewPath("spec", "trainer", "env"), field.OmitValueType{},
				"must not have reserved envs, invalid envs configured: [OMPI_MCA_orte_default_hostfile OMPI_MCA_plm_rsh_args]")},
		},
		{
			name:    "other OpenMPI settings are allowed",
			runtime: nodeTrainerRuntime("{mpi: {}}", "{}"),
			trainer: "{env: [{name: OMPI_MCA_btl, value: ^openib}]}",
		},
		{
			name:    "both problems are reported",
			runtime: oneJobRuntime("launcher", launcherAsNode),
			trainer: "{numNodes: 3, env: [{name: OMPI_MCA_orte_set_default_slots, value: '4'}]}",
			want: field.ErrorList{
				field.Invalid(field.NewPath("spec", "trainer", "numNodes"), int32(3), numNodesMsg),
				field.Invalid(field.NewPath("spec", "trainer", "env"), field.OmitValueType{},
					"must not have reserved envs, invalid envs configured: [OMPI_MCA_orte_set_default_slots]"),
			},
		},
		{
			name:    "other runtimes are not checked",
			runtime: oneJobRuntime("launcher", "{torch: {}}"),
			trainer: "{numNodes: 2, env: [{name: OMPI_MCA_plm_rsh_args, value: x}]}",
		},
		{
			name:    "TrainJob without trainer is fine",
			runtime: oneJobRuntime("launcher", launcherAsNode),
		}, {
			name:    "a hostfile that fits a ConfigMap",
			runtime: nodeTrainerRuntime("{mpi: {}}", "{}"),
			trainer: "{numNodes: 30000}",
		},
		{
			// 50 000 lines of at least `alpha-node-0-0.alpha slots=1\n`, 29 bytes.
			name:    "a hostfile over the 1 MiB a ConfigMap holds",
			runtime: nodeTrainerRuntime("{mpi: {}}", "{}"),
			trainer: "{numNodes: 50000}",
			want: field.ErrorList{field.Invalid(field.NewPath("spec", "trainer", "numNodes"), int32(50000),
				"must be no more than 36157 for TrainJob \"alpha\": the MPI hostfile has a line of at least 29 bytes per node, and the ConfigMap that holds it at most 1048576 bytes")},
		},
		{
			name:    "the runtime's numNodes counts when the TrainJob sets none",
			runtime: nodeTrainerRuntime("{numNodes: 50000, mpi: {}}", "{}"),
			want: field.ErrorList{field.Invalid(field.NewPath("spec", "trainer", "numNodes"), int32(50000),
				"must be no more than 36157 for TrainJob \"alpha\": the MPI hostfile has a line of at least 29 bytes per node, and the ConfigMap that holds it at most 1048576 bytes")},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tj := trainJob(t, tc.trainer)
			info := pipelinetest.Info(t, tj, pipelinetest.Runtime(t, tc.runtime))
			warnings, errs := newMPI(t, nil).Validate(context.Background(), info, nil, tj)
			if len(warnings) != 0 {
				t.Errorf("warnings = %v, want none", warnings)
			}
			if diff := cmp.Diff(tc.want, errs); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}
