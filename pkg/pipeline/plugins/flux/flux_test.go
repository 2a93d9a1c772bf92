package flux

import (
	"context"
	"crypto/ecdh"
	"crypto/sha256"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/pipelinetest"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/golden"
)

// fluxRuntime has the shape of the flux-distributed example runtime;
// mlPolicy, network and node are flow mappings (node: extra fields of the
// `node` container), initContainers a flow sequence.
func fluxRuntime(t *testing.T, mlPolicy, network, node, initContainers string) *pipeline.Runtime {
	t.Helper()
	return pipelinetest.TrainerRuntime{
		Name: "flux-distributed", MLPolicy: mlPolicy, Network: network,
		Pod: `{initContainers: ` + initContainers + `, containers: [{name: node, image: "ubuntu:jammy", ` + node + `}]}`,
	}.Runtime(t)
}

// trainJob is the TrainJob `alpha` of UID uid-0001; trainerSpec is a flow
// mapping for spec.trainer, or "" for none.
func trainJob(t *testing.T, trainerSpec string) *trainer.TrainJob {
	t.Helper()
	return pipelinetest.TrainJobOn(t, "flux-distributed", trainerSpec)
}

// enforce runs the plugin's EnforceMLPolicy alone on a fresh RuntimeInfo.
func enforce(t *testing.T, rt *pipeline.Runtime, tj *trainer.TrainJob) *pipeline.RuntimeInfo {
	t.Helper()
	info := pipelinetest.Info(t, tj, rt)
	if err := (&Flux{}).EnforceMLPolicy(info, tj); err != nil {
		t.Fatalf("EnforceMLPolicy: %v", err)
	}
	return info
}

func fluxVolumes(job string) []corev1.Volume {
	return []corev1.Volume{
		{Name: "spack-install", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "flux-install", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: job + "-flux-entrypoint", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: job + "-flux-entrypoint"}, DefaultMode: ptr.To[int32](0o755),
		}}},
		{Name: "shared-memory", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
		{Name: "flux-curve", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: job + "-flux-curve", DefaultMode: ptr.To[int32](0o400),
		}}},
	}
}

func installer(image string) corev1.Container {
	return corev1.Container{
		Name: "flux-installer", Image: image, Command: []string{"/bin/bash", "/etc/flux-config/init.sh"},
		VolumeMounts: []corev1.VolumeMount{
			{Name: "flux-install", MountPath: "/mnt/flux"},
			{Name: "alpha-flux-entrypoint", MountPath: "/etc/flux-config", ReadOnly: true},
		},
	}
}

var nodeMounts = []corev1.VolumeMount{
	{Name: "flux-install", MountPath: "/mnt/flux"},
	{Name: "spack-install", MountPath: "/opt/software"},
	{Name: "alpha-flux-entrypoint", MountPath: "/etc/flux-config", ReadOnly: true},
	{Name: "flux-curve", MountPath: "/curve", ReadOnly: true},
	{Name: "shared-memory", MountPath: "/dev/shm"},
}

// fluxPod is the `node` pod of fluxRuntime after the plugin: the installer
// of image after initContainers, the volumes, and the container running
// wrapped under the Flux entrypoint with the runtime's env.
func fluxPod(image, wrapped string, env []corev1.EnvVar, initContainers ...corev1.Container) *corev1.PodSpec {
	return &corev1.PodSpec{
		InitContainers: append(initContainers, installer(image)),
		Containers: []corev1.Container{{
			Name: "node", Image: "ubuntu:jammy", VolumeMounts: nodeMounts, Env: env,
			Command: []string{"/bin/bash", "/etc/flux-config/entrypoint.sh", wrapped},
		}},
		Volumes: fluxVolumes("alpha"),
	}
}

func TestEnforceMLPolicy(t *testing.T) {
	const view = "ghcr.io/converged-computing/flux-view-ubuntu:tag-jammy"
	runtimeEnv := []corev1.EnvVar{
		{Name: "FLUX_VIEW_IMAGE", Value: "example.com/view:rocky"},
		{Name: "FLUX_QUEUE_POLICY", Value: "easy"},
	}
	cases := []struct {
		name           string
		mlPolicy       string
		node           string
		initContainers string
		trainer        string
		// want is the `node` pod after the plugin; nil for untouched.
		want *corev1.PodSpec
	}{
		{
			name:     "another policy is left alone",
			mlPolicy: "{numNodes: 2, torch: {}}",
			trainer:  "{command: [trainjob]}",
		},
		{
			name:     "the TrainJob's command and args are wrapped in the Flux entrypoint",
			mlPolicy: "{numNodes: 1, flux: {}}",
			node:     "command: [sleep], args: ['1']",
			trainer:  "{numNodes: 2, command: [trainjob], args: [trainjob]}",
			want:     fluxPod(view, "trainjob trainjob", nil),
		},
		{
			name:     "without spec.trainer the runtime's command and args are wrapped",
			mlPolicy: "{numNodes: 2, flux: {numProcPerNode: 4}}",
			node:     "command: [lmp], args: ['-in', in.reaxff]",
			want:     fluxPod(view, "lmp -in in.reaxff", nil),
		},
		{
			name:     "the TrainJob's args follow the runtime's command",
			mlPolicy: "{flux: {}}",
			node:     "command: [python], args: [old.py]",
			trainer:  "{args: [new.py, --epochs, '3']}",
			want:     fluxPod(view, "python new.py --epochs 3", nil),
		},
		{
			name:           "no command at all starts an interactive instance",
			mlPolicy:       "{flux: {}}",
			initContainers: "[{name: warmup, image: busybox}]",
			want:           fluxPod(view, "", nil, corev1.Container{Name: "warmup", Image: "busybox"}),
		},
		{
			name:     "the view image comes from the runtime's env, the TrainJob's env winning",
			mlPolicy: "{flux: {}}",
			node:     "env: [{name: FLUX_VIEW_IMAGE, value: example.com/view:rocky}, {name: FLUX_QUEUE_POLICY, value: easy}]",
			trainer:  "{env: [{name: FLUX_VIEW_IMAGE, value: example.com/view:noble}]}",
			want:     fluxPod("example.com/view:noble", "", runtimeEnv),
		},
		{
			name:     "the runtime's view image stays when the TrainJob's env has no value",
			mlPolicy: "{flux: {}}",
			node:     "env: [{name: FLUX_VIEW_IMAGE, value: example.com/view:rocky}, {name: FLUX_QUEUE_POLICY, value: easy}]",
			trainer:  "{env: [{name: FLUX_VIEW_IMAGE, valueFrom: {configMapKeyRef: {name: c, key: k}}}]}",
			want:     fluxPod("example.com/view:rocky", "", runtimeEnv),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			node := tc.node
			if node == "" {
				node = "resources: {}"
			}
			initContainers := tc.initContainers
			if initContainers == "" {
				initContainers = "[]"
			}
			rt := fluxRuntime(t, tc.mlPolicy, "{}", node, initContainers)
			tj := trainJob(t, tc.trainer)
			before := pipelinetest.Info(t, tj, rt).PodSet(trainer.Node).Template.Spec
			info := enforce(t, rt, tj)
			ps := info.PodSet(trainer.Node)
			want := tc.want
			if want == nil {
				want = &before
			}
			if diff := cmp.Diff(want, &ps.Template.Spec, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("node pod (-want +got):\n%s", diff)
			}
			// The JobSet builder must not copy spec.trainer's command over the wrapped one.
			wantSetBy := ""
			if tc.want != nil {
				wantSetBy = Name
			}
			if ps.EntrypointSetBy != wantSetBy {
				t.Errorf("EntrypointSetBy = %q, want %q", ps.EntrypointSetBy, wantSetBy)
			}
		})
	}
}

// TestEnforceMLPolicyIdempotent: enforcing twice (as the framework never
// does, but a plugin must not rely on it) adds nothing twice.
func TestEnforceMLPolicyIdempotent(t *testing.T) {
	rt := fluxRuntime(t, "{flux: {}}", "{}", "command: [hostname]", "[]")
	tj := trainJob(t, "{numNodes: 2}")
	info := enforce(t, rt, tj)
	once := info.PodSet(trainer.Node).Template.DeepCopy()
	if err := (&Flux{}).EnforceMLPolicy(info, tj); err != nil {
		t.Fatal(err)
	}
	// The second pass wraps the already wrapped command; everything else
	// must be as after the first.
	twice := info.PodSet(trainer.Node).Template
	opt := cmpopts.IgnoreFields(corev1.Container{}, "Command")
	if diff := cmp.Diff(once, twice, opt); diff != "" {
		t.Errorf("second enforcement changed the pod (-once +twice):\n%s", diff)
	}
}

func TestValidate(t *testing.T) {
	runtimeRef := field.NewPath("spec", "runtimeRef")
	cases := []struct {
		name           string
		mlPolicy       string
		initContainers string
		jobName        string
		trainer        string
		want           field.ErrorList
	}{
		{name: "a valid TrainJob", mlPolicy: "{flux: {numProcPerNode: 2}}", trainer: "{numNodes: 4}"},
		{
			name: "another policy's runtime may have a flux-installer", mlPolicy: "{torch: {}}",
			initContainers: "[{name: flux-installer, image: busybox}]",
		},
		{
			name: "the runtime's flux-installer init container is reserved", mlPolicy: "{flux: {}}",
			initContainers: "[{name: flux-installer, image: busybox}]",
			want: field.ErrorList{field.Forbidden(runtimeRef,
				`InitContainer "flux-installer" of replicated job "node" is reserved: the Flux plugin adds it; rename the runtime's (or runtimePatches') init container`)},
		},
		{
			name: "trainer numProcPerNode 0", mlPolicy: "{flux: {}}", trainer: "{numProcPerNode: 0}",
			want: field.ErrorList{field.Invalid(field.NewPath("spec", "trainer", "numProcPerNode"), int32(0), "must be greater than or equal to 1 for Flux TrainJob")},
		},
		{
			name: "runtime numProcPerNode 0", mlPolicy: "{flux: {numProcPerNode: 0}}",
			want: field.ErrorList{field.Invalid(runtimeRef, "flux-distributed", "the runtime's mlPolicy.flux.numProcPerNode is 0; it must be greater than or equal to 1")},
		},
		{name: "a name of 47 characters", mlPolicy: "{flux: {}}", jobName: strings.Repeat("a", 47)},
		{
			name: "a name of 48 characters", mlPolicy: "{flux: {}}", jobName: strings.Repeat("a", 48),
			want: field.ErrorList{field.Invalid(field.NewPath("metadata", "name"), strings.Repeat("a", 48),
				`must be no more than 47 characters with a Flux runtime, so that the volume of ConfigMap "`+strings.Repeat("a", 48)+`-flux-entrypoint" is a valid name; shorten it by 1`)},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			initContainers := tc.initContainers
			if initContainers == "" {
				initContainers = "[]"
			}
			rt := fluxRuntime(t, tc.mlPolicy, "{}", "command: [hostname]", initContainers)
			tj := trainJob(t, tc.trainer)
			if tc.jobName != "" {
				tj.Name = tc.jobName
			}
			warnings, errs := (&Flux{}).Validate(context.Background(), pipelinetest.Info(t, tj, rt), nil, tj)
			if len(warnings) != 0 {
				t.Errorf("warnings = %v, want none", warnings)
			}
			if diff := cmp.Diff(tc.want, errs); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

// TestBuild: the ConfigMap and Secret, owned by the TrainJob; the scripts
// are golden files (refresh with -update) and must parse as bash.
func TestBuild(t *testing.T) {
	cases := []struct {
		name     string
		mlPolicy string
		network  string
		node     string
		trainer  string
	}{
		{
			name: "four GPU nodes with a subdomain and broker settings", mlPolicy: "{numNodes: 1, flux: {numProcPerNode: 2}}",
			network: "{subdomain: hpc}",
			node:    "resources: {limits: {nvidia.com/gpu: 8}}, env: [{name: FLUX_NETWORK_DEVICE, value: ib0}]",
			trainer: "{numNodes: 4, numProcPerNode: 8, command: [lmp, -in, in.reaxff], env: [{name: FLUX_QUEUE_POLICY, value: easy}]}",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rt := fluxRuntime(t, tc.mlPolicy, tc.network, tc.node, "[]")
			tj := trainJob(t, tc.trainer)
			info := enforce(t, rt, tj)
			// PlainML sizes the trainer from numNodes before Flux builds.
			if tr := tj.Spec.Trainer; tr != nil && tr.NumNodes != nil {
				info.PodSet(trainer.Node).Count = *tr.NumNodes
			}
			objs, err := (&Flux{client: pipeline.OfflineHandle(pipeline.OperatorInfo{}).Reader()}).Build(context.Background(), info, tj)
			if err != nil {
				t.Fatal(err)
			}
			owner := []metav1.OwnerReference{{
				APIVersion: "trainer.kubeflow.org/v1alpha1", Kind: "TrainJob", Name: "alpha", UID: "uid-0001",
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}}
			want := []client.Object{
				&corev1.ConfigMap{
					TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
					ObjectMeta: metav1.ObjectMeta{Name: "alpha-flux-entrypoint", Namespace: "default", OwnerReferences: owner},
				},
				&corev1.Secret{
					TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
					ObjectMeta: metav1.ObjectMeta{Name: "alpha-flux-curve", Namespace: "default", OwnerReferences: owner},
				},
			}
			ignoreData := cmpopts.IgnoreFields(corev1.ConfigMap{}, "Data")
			if diff := cmp.Diff(want, objs, ignoreData, cmpopts.IgnoreFields(corev1.Secret{}, "Data")); diff != "" {
				t.Fatalf("objects (-want +got):\n%s", diff)
			}
			cm, secret := objs[0].(*corev1.ConfigMap), objs[1].(*corev1.Secret)
			dir := filepath.Join("testdata", strings.ReplaceAll(tc.name, " ", "-"))
			for _, key := range []string{"entrypoint.sh", "init.sh"} {
				golden.Assert(t, filepath.Join(dir, key), []byte(cm.Data[key]))
				bashParses(t, key, cm.Data[key])
			}
			if diff := cmp.Diff([]string{"curve.cert"}, slices.Sorted(maps.Keys(secret.Data))); diff != "" {
				t.Errorf("Secret keys (-want +got):\n%s", diff)
			}
			keysOf(t, string(secret.Data["curve.cert"]))
		})
	}
}

func TestBuildWithoutFluxPolicy(t *testing.T) {
	rt := fluxRuntime(t, "{jax: {}}", "{}", "command: [hostname]", "[]")
	tj := trainJob(t, "")
	objs, err := (&Flux{client: pipeline.OfflineHandle(pipeline.OperatorInfo{}).Reader()}).Build(context.Background(), pipelinetest.Info(t, tj, rt), tj)
	if err != nil || objs != nil {
		t.Errorf("Build = %v, %v; want nothing", objs, err)
	}
}

func bashParses(t *testing.T, name, script string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("bash", "-n", path).CombinedOutput(); err != nil {
		t.Errorf("%s does not parse: %v\n%s", name, err, out)
	}
}

var certLine = regexp.MustCompile(`(?m)^    (public|secret)-key = "(.{40})"$`)

// keysOf returns the decoded public and secret keys of a certificate.
func keysOf(t *testing.T, cert string) (public, secret []byte) {
	t.Helper()
	m := certLine.FindAllStringSubmatch(cert, -1)
	if len(m) != 2 || m[0][1] != "public" || m[1][1] != "secret" {
		t.Fatalf("certificate has no public and secret key lines:\n%s", cert)
	}
	public, err := z85Decode(m[0][2])
	if err != nil {
		t.Fatal(err)
	}
	secret, err = z85Decode(m[1][2])
	if err != nil {
		t.Fatal(err)
	}
	return public, secret
}

// build runs the plugin's Build for tj on a fresh RuntimeInfo of a two-node
// Flux runtime, with cluster as the cluster its reader sees, and returns
// the CURVE Secret's certificate.
func build(t *testing.T, tj *trainer.TrainJob, cluster ...client.Object) string {
	t.Helper()
	rt := fluxRuntime(t, "{numNodes: 2, flux: {}}", "{}", "command: [hostname]", "[]")
	p, err := New(context.Background(), pipeline.OfflineHandle(pipeline.OperatorInfo{}, cluster...))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := p.(*Flux).Build(context.Background(), enforce(t, rt, tj), tj)
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range objs {
		if secret, ok := obj.(*corev1.Secret); ok {
			return string(secret.Data["curve.cert"])
		}
	}
	t.Fatalf("Build returned no Secret: %v", objs)
	return ""
}

// TestCurveCertificate: a TrainJob's CURVE key comes from crypto/rand, so
// that nothing a reader of the TrainJob sees (UID, namespace, name, spec)
// gives it away: two builds of the same TrainJob without a Secret give two
// keys, and no hash of those fields is the key. The certificate is in
// czmq's format, its public key that of its secret key.
func TestCurveCertificate(t *testing.T) {
	tj := trainJob(t, "{numNodes: 2}")
	tj.UID = "uid-123"
	a := build(t, tj)
	public, secret := keysOf(t, a)
	key, err := ecdh.X25519().NewPrivateKey(secret)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(key.PublicKey().Bytes(), public); diff != "" {
		t.Errorf("public key is not X25519 of the secret key (-want +got):\n%s", diff)
	}
	wantHeader := "#  ZeroMQ CURVE Secret Certificate\n#  Generated by kubectl-trainjob for TrainJob default/alpha\n\nmetadata\n    name = \"alpha\"\ncurve\n"
	if !strings.HasPrefix(a, wantHeader) {
		t.Errorf("certificate does not start with the czmq header %q:\n%s", wantHeader, a)
	}

	spec, err := json.Marshal(tj.Spec)
	if err != nil {
		t.Fatal(err)
	}
	for _, public := range []string{string(tj.UID), tj.Name, tj.Namespace + "/" + tj.Name, string(spec)} {
		if seed := sha256.Sum256([]byte(public)); string(seed[:]) == string(secret) {
			t.Errorf("the secret key is SHA-256 of %q, which every reader of the TrainJob sees", public)
		}
	}
	if _, again := keysOf(t, build(t, tj.DeepCopy())); string(again) == string(secret) {
		t.Errorf("two builds of TrainJob %s (UID %s) without a Secret gave the same key: it is derived from the TrainJob", tj.Name, tj.UID)
	}
}

var publicKeyLine = regexp.MustCompile(`(?m)^    public-key = .*$`)

// TestCurveCertificateReused: once the Secret exists, its key is the
// TrainJob's: every reconcile builds the same Secret (no write), and an
// edited certificate is written back from its secret key. A Secret whose
// key cannot be read, or that the TrainJob does not control, gets a new
// key.
func TestCurveCertificateReused(t *testing.T) {
	tj := trainJob(t, "{numNodes: 2}")
	cert := build(t, tj)
	secret := func(data string, owner metav1.Object) *corev1.Secret {
		return &corev1.Secret{
			ObjectMeta: pipeline.OwnedObjectMeta(owner.(*trainer.TrainJob), CurveSecretSuffix),
			Data:       map[string][]byte{"curve.cert": []byte(data)},
		}
	}
	other := tj.DeepCopy()
	other.UID = "uid-of-another"
	for _, tc := range []struct {
		name     string
		existing *corev1.Secret
		same     bool
	}{
		{"the Secret as built", secret(cert, tj), true},
		{"the public key and comments edited", secret("# edited\n"+publicKeyLine.ReplaceAllString(cert, `    public-key = "0000000000000000000000000000000000000000"`), tj), true},
		{"no certificate", secret("", tj), false},
		{"a secret key that is not Z85", secret(secretKeyLine.ReplaceAllString(cert, `    secret-key = "~~~~~"`), tj), false},
		{"another TrainJob's Secret of the name", secret(cert, other), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := build(t, tj, tc.existing)
			if same := got == cert; same != tc.same {
				t.Errorf("certificate kept = %v, want %v:\n%s", same, tc.same, got)
			}
			keysOf(t, got)
		})
	}
}

func TestZ85Encode(t *testing.T) {
	for _, tc := range []struct {
		name    string
		data    []byte
		want    string
		wantErr bool
	}{
		// The test vector of ZeroMQ RFC 32.
		{name: "RFC 32 vector", data: []byte{0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B}, want: "HelloWorld"},
		{name: "zeros", data: []byte{0, 0, 0, 0}, want: "00000"},
		{name: "all ones", data: []byte{0xff, 0xff, 0xff, 0xff}, want: "%nSc0"},
		{name: "empty", data: nil, want: ""},
		{name: "a length not a multiple of 4", data: []byte{1, 2, 3}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := z85Encode(tc.data)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error = %v, want error %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("z85Encode = %q, want %q", got, tc.want)
			}
			if !tc.wantErr && len(tc.data) > 0 {
				decoded, err := z85Decode(got)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.data, decoded); diff != "" {
					t.Errorf("round trip (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestHostlistAndRange(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  string
		want string
	}{
		{"one index", indexRange(0, 1), "0"},
		{"four indexes", indexRange(0, 4), "0-3"},
		{"an offset range", indexRange(10, 3), "10-12"},
		{"one node", hostlist("lammps", 1), "lammps-node-0-[0]"},
		{"four nodes", hostlist("alpha", 4), "alpha-node-0-[0-3]"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, tc.got, tc.want)
		}
	}
}

func TestFluxResources(t *testing.T) {
	for _, tc := range []struct {
		name          string
		nodes, tasks  int32
		gpus          int64
		wantResources string
		wantFlags     string
	}{
		{"one CPU node, one task", 1, 1, 0, "--cores=0", "-N 1 -n 1"},
		{"four CPU nodes of eight tasks", 4, 8, 0, "--cores=0-7", "-N 4 -n 32"},
		{"a task per node takes the node's GPUs", 2, 1, 4, "--cores=0 --gpu=0-3", "-N 2 -n 2 -g 4"},
		{"GPUs shared among the tasks of a node", 4, 8, 8, "--cores=0-7 --gpu=0-7", "-N 4 -n 32 -g 1"},
		{"fewer GPUs than tasks: no GPUs per task", 2, 4, 2, "--cores=0-3 --gpu=0-1", "-N 2 -n 8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resources, flags := fluxResources(tc.nodes, tc.tasks, tc.gpus)
			if diff := cmp.Diff([2]string{tc.wantResources, tc.wantFlags}, [2]string{resources, flags}); diff != "" {
				t.Errorf("R encode arguments, flux run flags (-want +got):\n%s", diff)
			}
		})
	}
}
