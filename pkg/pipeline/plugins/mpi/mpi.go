// Package mpi is the MPI plugin (OpenMPI only): a launcher pod runs mpirun
// and reaches the node pods over SSH. The plugin sizes the `node` job, mounts
// the SSH keys and the hostfile, and builds the Secret and ConfigMap that
// hold them. It reads the cluster only to learn whether the Secret exists:
// the Secret is immutable, so it is generated once and never re-applied.
package mpi

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
)

// Name is the plugin's name in the registry.
const Name = "MPI"

// Names of the objects, volumes, keys and files the plugin owns.
const (
	SSHAuthSecretSuffix     = "-mpi-ssh-auth"
	HostfileConfigMapSuffix = "-mpi-hostfile"

	sshAuthVolume  = "mpi-ssh-auth"
	hostfileVolume = "mpi-hostfile"

	// sshPublicKey is the Secret key of the authorized_keys line; the private
	// key is under corev1.SSHAuthPrivateKey, as kubernetes.io/ssh-auth requires.
	sshPublicKey = "ssh-publickey"
	// hostfileKey is the ConfigMap key (and file name) of the hostfile.
	hostfileKey = "hostfile"

	privateKeyFile     = "id_rsa"
	publicKeyFile      = "id_rsa.pub"
	authorizedKeysFile = "authorized_keys"

	hostfileDir             = "/etc/mpi"
	defaultSSHAuthMountPath = "/root/.ssh"
)

// OpenMPI settings given to the launcher; users may not set them.
const (
	envHostfile          = "OMPI_MCA_orte_default_hostfile"
	envKeepFQDNHostnames = "OMPI_MCA_orte_keep_fqdn_hostnames"
	envDefaultSlots      = "OMPI_MCA_orte_set_default_slots"
	envRSHArgs           = "OMPI_MCA_plm_rsh_args"

	rshArgs = "-o ConnectionAttempts=10"
)

var reservedEnvs = [...]string{envHostfile, envKeepFQDNHostnames, envDefaultSlots, envRSHArgs}

// MPI implements the mlPolicy.mpi runtimes.
type MPI struct {
	client client.Reader
	// generateKey makes the key pair of a new SSH auth Secret. It is a field
	// so tests can fix the key: since Go 1.26 ecdsa.GenerateKey ignores the
	// io.Reader it is given, so injecting a reader would not make it
	// deterministic.
	generateKey func() (*ecdsa.PrivateKey, error)
}

var (
	_ pipeline.EnforceMLPolicyPlugin  = (*MPI)(nil)
	_ pipeline.CustomValidationPlugin = (*MPI)(nil)
	_ pipeline.WatchExtensionPlugin   = (*MPI)(nil)
	_ pipeline.ComponentBuilderPlugin = (*MPI)(nil)
)

// New builds the MPI plugin. Offline (render, describe-pipeline) h.Reader()
// holds only the input files, so the SSH auth Secret is NotFound unless one
// of them holds it: Build then makes it as for a new TrainJob.
func New(_ context.Context, h pipeline.Handle) (pipeline.Plugin, error) {
	return &MPI{client: h.Reader(), generateKey: generateP521Key}, nil
}

// Name returns the plugin's name.
func (m *MPI) Name() string { return Name }

func generateP521Key() (*ecdsa.PrivateKey, error) {
	return ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
}

// EnforceMLPolicy sizes the `node` job, settles numProcPerNode and gives
// the `node` and `launcher` pods their SSH keys, and the launcher its
// hostfile and OpenMPI settings.
func (m *MPI) EnforceMLPolicy(info *pipeline.RuntimeInfo, trainJob *trainer.TrainJob) error {
	policy := mpiPolicy(info)
	if policy == nil {
		return nil
	}
	if impl := ptr.Deref(policy.MPIImplementation, trainer.MPIImplementationOpenMPI); impl != trainer.MPIImplementationOpenMPI && impl != "" {
		return fmt.Errorf("MPI implementation %q is not supported", impl)
	}
	launcherAsNode := ptr.Deref(policy.RunLauncherAsNode, false)
	node := info.PodSet(trainer.Node)
	launcher := info.PodSet(trainer.Launcher)

	numNodes := info.RuntimePolicy.MLPolicy.NumNodes
	if trainJob.Spec.Trainer != nil && trainJob.Spec.Trainer.NumNodes != nil {
		numNodes = trainJob.Spec.Trainer.NumNodes
	}
	if node != nil && numNodes != nil {
		node.Count = *numNodes
		if launcherAsNode {
			node.Count = max(*numNodes-1, 1)
		}
	}
	// The launcher is one pod, whatever numNodes says. Upstream leaves it at
	// the runtime's numNodes when it carries the trainer ancestor label.
	if launcher != nil {
		launcher.Count = 1
	}

	nproc := ptr.Deref(policy.NumProcPerNode, 1)
	if trainJob.Spec.Trainer != nil && trainJob.Spec.Trainer.NumProcPerNode != nil {
		nproc = *trainJob.Spec.Trainer.NumProcPerNode
	} else if nproc == 1 {
		if gpus := nodeGPUs(info, launcherAsNode); gpus > 1 {
			nproc = int32(min(gpus, math.MaxInt32))
		}
	}
	policy.NumProcPerNode = &nproc

	mountPath := ptr.Deref(policy.SSHAuthMountPath, defaultSSHAuthMountPath)
	if node != nil {
		addSSHAuth(node, trainJob.Name, mountPath)
	}
	if launcher != nil {
		addSSHAuth(launcher, trainJob.Name, mountPath)
		launcher.UpsertVolume(corev1.Volume{
			Name: hostfileVolume,
			VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: trainJob.Name + HostfileConfigMapSuffix},
				Items:                []corev1.KeyToPath{{Key: hostfileKey, Path: hostfileKey, Mode: ptr.To[int32](0o444)}},
			}},
		})
		if c := launcher.Container(trainer.Node); c != nil {
			pipeline.UpsertVolumeMount(c, corev1.VolumeMount{Name: hostfileVolume, MountPath: hostfileDir})
			pipeline.UpsertEnv(c,
				corev1.EnvVar{Name: envHostfile, Value: hostfileDir + "/" + hostfileKey},
				corev1.EnvVar{Name: envKeepFQDNHostnames, Value: "true"},
				corev1.EnvVar{Name: envDefaultSlots, Value: strconv.Itoa(int(nproc))},
				corev1.EnvVar{Name: envRSHArgs, Value: rshArgs},
			)
		}
	}
	return nil
}

// nodeGPUs are the GPUs of one MPI node, from the resources where
// resourcesPerNode was merged and the pod's DRA claims: the `node` job when
// the launcher runs as a node, else the trainer step. Upstream reads the
// TrainJob's resourcesPerNode alone, so GPUs set only in the runtime were
// missed (kubeflow/trainer PR #3974).
func nodeGPUs(info *pipeline.RuntimeInfo, launcherAsNode bool) int64 {
	if ps := info.PodSet(trainer.Node); launcherAsNode && ps.Container(trainer.Node) != nil {
		return ps.GPUs(trainer.Node)
	}
	return info.TrainerGPUs()
}

// addSSHAuth mounts the SSH auth Secret into the pod set's `node` container.
// The private key is group-readable so a non-root user in the pod's fsGroup
// can use it; ssh skips its permission check for keys it does not own.
func addSSHAuth(ps *pipeline.PodSet, jobName, mountPath string) {
	ps.UpsertVolume(corev1.Volume{
		Name: sshAuthVolume,
		VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName:  jobName + SSHAuthSecretSuffix,
			DefaultMode: ptr.To[int32](0o400),
			Items: []corev1.KeyToPath{
				{Key: corev1.SSHAuthPrivateKey, Path: privateKeyFile, Mode: ptr.To[int32](0o640)},
				{Key: sshPublicKey, Path: publicKeyFile, Mode: ptr.To[int32](0o644)},
				{Key: sshPublicKey, Path: authorizedKeysFile, Mode: ptr.To[int32](0o644)},
			},
		}},
	})
	if c := ps.Container(trainer.Node); c != nil {
		pipeline.UpsertVolumeMount(c, corev1.VolumeMount{Name: sshAuthVolume, MountPath: mountPath})
	}
}

// Validate rejects a TrainJob whose node count the runtime cannot host or
// whose hostfile would not fit its ConfigMap, and OpenMPI settings in
// trainer.env.
func (m *MPI) Validate(_ context.Context, info *pipeline.RuntimeInfo, _, newObj *trainer.TrainJob) (admission.Warnings, field.ErrorList) {
	policy := mpiPolicy(info)
	if policy == nil {
		return nil, nil
	}
	errs := validateHostfileSize(info, newObj)
	tr := newObj.Spec.Trainer
	if tr == nil {
		return nil, errs
	}
	trainerPath := field.NewPath("spec", "trainer")
	if ptr.Deref(policy.RunLauncherAsNode, false) && ptr.Deref(tr.NumNodes, 1) >= 2 &&
		(info.PodSet(trainer.Launcher) == nil || info.PodSet(trainer.Node) == nil) {
		errs = append(errs, field.Invalid(trainerPath.Child("numNodes"), *tr.NumNodes,
			"must have 1 when MPI trainingRuntime with enabled runLauncherAsNode does not have either launcher and node"))
	}
	var reserved []string
	for _, e := range tr.Env {
		if slices.Contains(reservedEnvs[:], e.Name) && !slices.Contains(reserved, e.Name) {
			reserved = append(reserved, e.Name)
		}
	}
	if len(reserved) > 0 {
		slices.Sort(reserved)
		errs = append(errs, field.Invalid(trainerPath.Child("env"), field.OmitValueType{},
			fmt.Sprintf("must not have reserved envs, invalid envs configured: %v", reserved)))
	}
	return nil, errs
}

// maxHostfileBytes is the most a ConfigMap holds: the API server refuses a
// larger one (corev1.MaxSecretSize, which it applies to ConfigMaps too).
const maxHostfileBytes = corev1.MaxSecretSize

// validateHostfileSize refuses a TrainJob whose hostfile would not fit its
// ConfigMap: every node's line is at least `<job>-node-0-0.<subdomain>
// slots=<n>`, so numNodes of them past the limit can never be stored.
func validateHostfileSize(info *pipeline.RuntimeInfo, tj *trainer.TrainJob) field.ErrorList {
	policy := mpiPolicy(info)
	numNodes := info.RuntimePolicy.MLPolicy.NumNodes
	if tj.Spec.Trainer != nil && tj.Spec.Trainer.NumNodes != nil {
		numNodes = tj.Spec.Trainer.NumNodes
	}
	slots := ptr.Deref(policy.NumProcPerNode, 1)
	if tj.Spec.Trainer != nil && tj.Spec.Trainer.NumProcPerNode != nil {
		slots = *tj.Spec.Trainer.NumProcPerNode
	}
	line := len(info.FirstEndpoint(tj, trainer.Node)) + len(" slots=\n") + len(strconv.Itoa(int(slots)))
	if numNodes == nil || int64(*numNodes)*int64(line) <= maxHostfileBytes {
		return nil
	}
	return field.ErrorList{field.Invalid(field.NewPath("spec", "trainer", "numNodes"), *numNodes, fmt.Sprintf(
		"must be no more than %d for TrainJob %q: the MPI hostfile has a line of at least %d bytes per node, and the ConfigMap that holds it at most %d bytes",
		maxHostfileBytes/line, tj.Name, line, maxHostfileBytes))}
}

// ReconcilerBuilders watch the plugin's own Secrets and ConfigMaps, so that
// a deleted or edited hostfile is put back.
func (m *MPI) ReconcilerBuilders() []pipeline.ReconcilerBuilder {
	return []pipeline.ReconcilerBuilder{
		pipeline.OwnsNamed(&corev1.Secret{}, SSHAuthSecretSuffix),
		pipeline.OwnsNamed(&corev1.ConfigMap{}, HostfileConfigMapSuffix),
	}
}

// Build returns the SSH auth Secret when it does not exist yet, then the
// hostfile ConfigMap, which is applied every time since endpoints follow
// the node count.
func (m *MPI) Build(ctx context.Context, info *pipeline.RuntimeInfo, trainJob *trainer.TrainJob) ([]client.Object, error) {
	if mpiPolicy(info) == nil {
		return nil, nil
	}
	var objs []client.Object
	exists, err := m.sshAuthSecretExists(ctx, trainJob)
	if err != nil {
		return nil, err
	}
	if !exists {
		secret, err := m.sshAuthSecret(trainJob)
		if err != nil {
			return nil, fmt.Errorf("generate SSH auth Secret: %w", err)
		}
		objs = append(objs, secret)
	}
	cm, err := hostfileConfigMap(info, trainJob)
	if err != nil {
		return nil, err
	}
	return append(objs, cm), nil
}

// sshAuthSecretExists tells whether the TrainJob's SSH auth Secret exists.
// It reads the Secret from the same informer as the watch above and the
// operator's writes do (a metadata-only read would start a second one).
func (m *MPI) sshAuthSecretExists(ctx context.Context, trainJob *trainer.TrainJob) (bool, error) {
	key := client.ObjectKey{Namespace: trainJob.Namespace, Name: trainJob.Name + SSHAuthSecretSuffix}
	switch err := pipeline.GetControlled(ctx, m.client, trainJob, key, &corev1.Secret{}); {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		return false, nil
	default:
		return false, fmt.Errorf("get SSH auth Secret %s: %w", key, err)
	}
}

func (m *MPI) sshAuthSecret(trainJob *trainer.TrainJob) (*corev1.Secret, error) {
	key, err := m.generateKey()
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	pub, err := ssh.NewPublicKey(&key.PublicKey)
	if err != nil {
		return nil, err
	}
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: pipeline.OwnedObjectMeta(trainJob, SSHAuthSecretSuffix),
		Type:       corev1.SecretTypeSSHAuth,
		Immutable:  ptr.To(true),
		Data: map[string][]byte{
			corev1.SSHAuthPrivateKey: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}),
			sshPublicKey:             ssh.MarshalAuthorizedKey(pub),
		},
	}, nil
}

func hostfileConfigMap(info *pipeline.RuntimeInfo, trainJob *trainer.TrainJob) (*corev1.ConfigMap, error) {
	hosts, err := hostfile(info)
	if err != nil {
		return nil, err
	}
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: pipeline.OwnedObjectMeta(trainJob, HostfileConfigMapSuffix),
		Data:       map[string]string{hostfileKey: hosts},
	}, nil
}

// hostfile has one line `<endpoint> slots=<numProcPerNode>` per node pod,
// and per launcher pod when the launcher runs as a node, in the runtime
// template's order, as upstream Trainer writes it. It stops with an error
// once the hostfile passes what a ConfigMap holds.
func hostfile(info *pipeline.RuntimeInfo) (string, error) {
	policy := mpiPolicy(info)
	slots := " slots=" + strconv.Itoa(int(ptr.Deref(policy.NumProcPerNode, 1))) + "\n"
	var b strings.Builder
	nodes := 0
	write := func(ps *pipeline.PodSet) {
		if ps == nil || ps.Endpoints == nil {
			return
		}
		nodes += int(ps.Count)
		for e := range ps.Endpoints {
			if b.Len() > maxHostfileBytes {
				return
			}
			b.WriteString(e)
			b.WriteString(slots)
		}
	}
	launcherIsNode := ptr.Deref(policy.RunLauncherAsNode, false)
	for k := range info.PodSets {
		ps := &info.PodSets[k]
		if ps.Name == trainer.Node || (launcherIsNode && ps.Name == trainer.Launcher) {
			write(ps)
		}
	}
	if b.Len() > maxHostfileBytes {
		return "", fmt.Errorf("the MPI hostfile of %d nodes is over the %d bytes a ConfigMap holds: use fewer nodes", nodes, maxHostfileBytes)
	}
	return b.String(), nil
}

func mpiPolicy(info *pipeline.RuntimeInfo) *trainer.MPIMLPolicySource {
	if info == nil {
		return nil
	}
	if src := info.MLPolicySource(); src != nil {
		return src.MPI
	}
	return nil
}
