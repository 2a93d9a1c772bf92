package operator_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/plugins/flux"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/integration/operator/internal/optest"
)

// fluxRuntimeSpec is a Flux runtime of two nodes; initContainers are added
// to its `node` job.
func fluxRuntimeSpec(initContainers ...corev1.Container) trainer.TrainingRuntimeSpec {
	node := replicatedJob(trainer.Node, trainer.AncestorTrainer, trainer.Node)
	node.Template.Spec.Template.Spec.InitContainers = initContainers
	return runtimeSpec(&trainer.MLPolicy{NumNodes: ptr.To[int32](2), MLPolicySource: trainer.MLPolicySource{Flux: &trainer.FluxMLPolicySource{}}}, node)
}

// TestFlux: the `node` pods get the Flux installer, its volumes and the
// wrapped command; the entrypoint ConfigMap and CURVE Secret exist, are
// owned by the TrainJob and put back when deleted; the job completes or
// fails.
func TestFlux(t *testing.T) {
	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	createTrainingRuntime(t, ns, "flux", fluxRuntimeSpec())
	tr := &trainer.Trainer{NumNodes: ptr.To[int32](2), Command: []string{"trainjob"}, Args: []string{"trainjob"}}
	tj := newTrainJob(ns, "alpha", trainer.TrainingRuntimeKind, "flux")
	tj.Spec.Trainer = tr
	create(t, tj)
	js := jobSetOf(t, tj)

	nodeJob := findJob(&js.Spec, trainer.Node)
	node := container(nodeJob, trainer.Node)
	got := map[string]any{
		"initContainers": nodeJob.Template.Spec.Template.Spec.InitContainers,
		"volumes":        nodeJob.Template.Spec.Template.Spec.Volumes,
		"mounts":         node.VolumeMounts,
		"command":        node.Command,
		"args":           node.Args,
		"parallelism":    ptr.Deref(nodeJob.Template.Spec.Parallelism, 0),
	}
	want := map[string]any{
		"initContainers": []corev1.Container{{
			Name:    "flux-installer",
			Image:   "ghcr.io/converged-computing/flux-view-ubuntu:tag-jammy",
			Command: []string{"/bin/bash", "/etc/flux-config/init.sh"},
			VolumeMounts: []corev1.VolumeMount{
				{Name: "flux-install", MountPath: "/mnt/flux"},
				{Name: "alpha-flux-entrypoint", MountPath: "/etc/flux-config", ReadOnly: true},
			},
		}},
		"volumes": []corev1.Volume{
			{Name: "spack-install", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "flux-install", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "alpha-flux-entrypoint", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "alpha-flux-entrypoint"}, DefaultMode: ptr.To[int32](0o755),
			}}},
			{Name: "shared-memory", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
			{Name: "flux-curve", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
				SecretName: "alpha-flux-curve", DefaultMode: ptr.To[int32](0o400),
			}}},
		},
		"mounts": []corev1.VolumeMount{
			{Name: "flux-install", MountPath: "/mnt/flux"},
			{Name: "spack-install", MountPath: "/opt/software"},
			{Name: "alpha-flux-entrypoint", MountPath: "/etc/flux-config", ReadOnly: true},
			{Name: "flux-curve", MountPath: "/curve", ReadOnly: true},
			{Name: "shared-memory", MountPath: "/dev/shm"},
		},
		"command":     []string{"/bin/bash", "/etc/flux-config/entrypoint.sh", "trainjob trainjob"},
		"args":        []string(nil),
		"parallelism": int32(2),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("JobSet node job (-want +got):\n%s", diff)
	}

	fluxObjects := func(ctx context.Context) error {
		stored := &trainer.TrainJob{}
		if err := optest.Get(ctx, env.Client, key(tj), stored); err != nil {
			return err
		}
		cm := &corev1.ConfigMap{}
		if err := optest.Get(ctx, env.Client, nsName(ns, "alpha-flux-entrypoint"), cm); err != nil {
			return err
		}
		secret := &corev1.Secret{}
		if err := optest.Get(ctx, env.Client, nsName(ns, "alpha-flux-curve"), secret); err != nil {
			return err
		}
		owned := map[string]string{pipeline.TrainJobNameLabel: "alpha"}
		got := map[string]any{
			"configMapKeys":   slices.Sorted(maps.Keys(cm.Data)),
			"configMapOwner":  cm.OwnerReferences,
			"configMapLabels": cm.Labels,
			"hostlist":        strings.Contains(cm.Data["init.sh"], `echo "alpha-node-0-[0-1]" > `),
			"secretKeys":      slices.Sorted(maps.Keys(secret.Data)),
			"secretOwner":     secret.OwnerReferences,
			"secretLabels":    secret.Labels,
		}
		want := map[string]any{
			"configMapKeys":   []string{"entrypoint.sh", "init.sh"},
			"configMapOwner":  controllerRef(stored),
			"configMapLabels": owned,
			"hostlist":        true,
			"secretKeys":      []string{"curve.cert"},
			"secretOwner":     controllerRef(stored),
			"secretLabels":    owned,
		}
		if diff := cmp.Diff(want, got); diff != "" {
			return fmt.Errorf("Flux objects (-want +got):\n%s", diff)
		}
		return nil
	}
	optest.Eventually(t, "the Flux ConfigMap and Secret exist", fluxObjects)

	cert := &corev1.Secret{}
	if err := optest.Get(t.Context(), env.Client, nsName(ns, "alpha-flux-curve"), cert); err != nil {
		t.Fatal(err)
	}
	for _, obj := range []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alpha-flux-entrypoint"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alpha-flux-curve"}},
	} {
		if err := env.Client.Delete(t.Context(), obj); err != nil {
			t.Fatalf("delete %T %s: %v", obj, obj.GetName(), err)
		}
	}
	optest.Eventually(t, "the deleted Flux ConfigMap and Secret are put back", fluxObjects)
	again := &corev1.Secret{}
	if err := optest.Get(t.Context(), env.Client, nsName(ns, "alpha-flux-curve"), again); err != nil {
		t.Fatal(err)
	}
	// The Secret put back may hold the deleted one's key (a reconcile that
	// read it from the cache before the cache saw the delete) or a new one:
	// either is random, which TestFluxCurveKeyIsSecret checks.
	_ = again

	finishes(t, ns, trainer.TrainingRuntimeKind, "flux", tr)
}

// curveKey is the secret key of a Flux CURVE Secret's certificate.
func curveKey(t *testing.T, secret *corev1.Secret) []byte {
	t.Helper()
	key, err := flux.SecretKey(secret.Data["curve.cert"])
	if err != nil {
		t.Fatalf("Secret %s: %v", secret.Name, err)
	}
	return key
}

// TestFluxCurveKeyIsSecret: the brokers' CURVE key comes from crypto/rand
// and lives only in its Secret: two TrainJobs of the same spec get two
// keys, and no hash of what a reader of the TrainJob sees (UID, namespace,
// name, spec) is the key. Reconciles keep it: a TrainJob changed (here
// suspended) is rebuilt with the same Secret, unwritten.
func TestFluxCurveKeyIsSecret(t *testing.T) {
	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	createTrainingRuntime(t, ns, "flux", fluxRuntimeSpec())
	keys := map[string][]byte{}
	secrets := map[string]*corev1.Secret{}
	for _, name := range []string{"alpha", "beta"} {
		tj := newTrainJob(ns, name, trainer.TrainingRuntimeKind, "flux")
		tj.Spec.Trainer = &trainer.Trainer{NumNodes: ptr.To[int32](2)}
		create(t, tj)
		secret := &corev1.Secret{}
		optest.Eventually(t, "the CURVE Secret of "+name+" exists", func(ctx context.Context) error {
			return optest.Get(ctx, env.Client, nsName(ns, name+"-flux-curve"), secret)
		})
		stored := &trainer.TrainJob{}
		if err := optest.Get(t.Context(), env.Client, key(tj), stored); err != nil {
			t.Fatal(err)
		}
		spec, err := json.Marshal(stored.Spec)
		if err != nil {
			t.Fatal(err)
		}
		keys[name], secrets[name] = curveKey(t, secret), secret
		for field, value := range map[string]string{
			"UID": string(stored.UID), "name": stored.Name, "namespace/name": stored.Namespace + "/" + stored.Name, "spec": string(spec),
		} {
			if sum := sha256.Sum256([]byte(value)); string(sum[:]) == string(keys[name]) {
				t.Errorf("TrainJob %s: the CURVE secret key is SHA-256 of its %s, which every reader of the TrainJob sees", name, field)
			}
		}
	}
	if string(keys["alpha"]) == string(keys["beta"]) {
		t.Errorf("TrainJobs alpha and beta have the same CURVE key")
	}

	// Suspending the TrainJob makes a reconcile that builds the Flux
	// objects, then the JobSet (the JobSet plugin builds last): once the
	// JobSet is suspended, the Secret was built again, and must be the
	// same object, unwritten.
	tj := &trainer.TrainJob{}
	if err := optest.Get(t.Context(), env.Client, nsName(ns, "alpha"), tj); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Patch(t.Context(), tj, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"suspend":true}}`))); err != nil {
		t.Fatal(err)
	}
	optest.Eventually(t, "the TrainJob's JobSet is suspended", func(ctx context.Context) error {
		js := &jobsetv1alpha2.JobSet{}
		if err := optest.Get(ctx, env.Client, nsName(ns, "alpha"), js); err != nil {
			return err
		}
		if !ptr.Deref(js.Spec.Suspend, false) {
			return fmt.Errorf("JobSet not suspended")
		}
		return nil
	})
	after := &corev1.Secret{}
	if err := optest.Get(t.Context(), env.Client, nsName(ns, "alpha-flux-curve"), after); err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != secrets["alpha"].ResourceVersion {
		t.Errorf("the CURVE Secret was written again by a reconcile: resourceVersion %s, then %s", secrets["alpha"].ResourceVersion, after.ResourceVersion)
	}
}

// TestFluxAdmission: what the schema (422) and the Flux plugin at the
// webhook (403) refuse.
func TestFluxAdmission(t *testing.T) {
	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	createTrainingRuntime(t, ns, "flux", fluxRuntimeSpec())
	createTrainingRuntime(t, ns, "flux-reserved", fluxRuntimeSpec(corev1.Container{Name: "flux-installer", Image: "ubuntu:22.04"}))
	long := strings.Repeat("a", 48)
	for _, tc := range []struct {
		name string
		doc  string
		want admission
	}{
		{name: "valid", doc: `
metadata: {name: ok}
spec: {runtimeRef: {name: flux, kind: TrainingRuntime}, trainer: {numNodes: 4, numProcPerNode: 2}}`, want: allowed},
		{name: "numProcPerNode 0", doc: `
metadata: {name: nproc-zero}
spec: {runtimeRef: {name: flux, kind: TrainingRuntime}, trainer: {numProcPerNode: 0}}`,
			want: invalidTrainJob("nproc-zero", `spec.trainer.numProcPerNode: Invalid value: 0: numProcPerNode must be greater than or equal to 1`)},
		{name: "reserved flux-installer init container", doc: `
metadata: {name: reserved}
spec: {runtimeRef: {name: flux-reserved, kind: TrainingRuntime}}`, want: admission{403, deniedTrainJob +
			`spec.runtimeRef: Forbidden: InitContainer "flux-installer" of replicated job "node" is reserved: the Flux plugin adds it; rename the runtime's (or runtimePatches') init container`}},
		{name: "name of 48 characters", doc: `
metadata: {name: ` + long + `}
spec: {runtimeRef: {name: flux, kind: TrainingRuntime}}`, want: admission{403, deniedTrainJob +
			`metadata.name: Invalid value: "` + long + `": must be no more than 47 characters with a Flux runtime, so that the volume of ConfigMap "` + long + `-flux-entrypoint" is a valid name; shorten it by 1`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkAdmission(t, env.Client.Create(t.Context(), trainJobYAML(t, ns, tc.doc)), tc.want)
		})
	}
}
