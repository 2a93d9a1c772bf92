// Package flux is the Flux plugin (HPC): the `node` pods of the runtime
// become one Flux instance. An init container copies a Flux view (Flux
// prebuilt for the image's OS) into a shared volume; the trainer's command
// is wrapped by an entrypoint that starts a broker on every pod and runs
// the command with `flux run` from the first. The plugin builds the
// ConfigMap of the scripts and the Secret of the brokers' CURVE key. It
// reads the cluster only for that Secret: the key is random, generated once
// and then read back from the Secret, so each reconcile builds the same.
package flux

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
)

// Name is the plugin's name in the registry.
const Name = "Flux"

// Names of the objects, containers, volumes and paths the plugin owns, as
// upstream Trainer names them.
const (
	EntrypointConfigMapSuffix = "-flux-entrypoint"
	CurveSecretSuffix         = "-flux-curve"

	// InstallerContainer is the init container that installs Flux; a
	// runtime must not have one of that name in its `node` job.
	InstallerContainer = "flux-installer"

	installVolume    = "flux-install"
	installPath      = "/mnt/flux"
	spackViewVolume  = "spack-install"
	spackViewPath    = "/opt/software"
	configPath       = "/etc/flux-config"
	curveVolume      = "flux-curve"
	curvePath        = "/curve"
	sharedMemVolume  = "shared-memory"
	sharedMemPath    = "/dev/shm"
	entrypointScript = configPath + "/entrypoint.sh"
	initScript       = configPath + "/init.sh"

	// Keys of the ConfigMap and of the Secret.
	entrypointKey = "entrypoint.sh"
	initKey       = "init.sh"
	curveCertKey  = "curve.cert"
)

// Broker settings a runtime's `node` container or the TrainJob's
// trainer.env may override, and their defaults.
const (
	EnvViewImage     = "FLUX_VIEW_IMAGE"
	EnvNetworkDevice = "FLUX_NETWORK_DEVICE"
	EnvQueuePolicy   = "FLUX_QUEUE_POLICY"

	DefaultViewImage     = "ghcr.io/converged-computing/flux-view-ubuntu:tag-jammy"
	DefaultNetworkDevice = "eth0"
	DefaultQueuePolicy   = "fcfs"
)

// Flux implements the mlPolicy.flux runtimes.
type Flux struct {
	client client.Reader
}

var (
	_ pipeline.EnforceMLPolicyPlugin  = (*Flux)(nil)
	_ pipeline.CustomValidationPlugin = (*Flux)(nil)
	_ pipeline.WatchExtensionPlugin   = (*Flux)(nil)
	_ pipeline.ComponentBuilderPlugin = (*Flux)(nil)
)

// New builds the Flux plugin.
func New(_ context.Context, h pipeline.Handle) (pipeline.Plugin, error) {
	return &Flux{client: h.Reader()}, nil
}

// Name returns the plugin's name.
func (*Flux) Name() string { return Name }

// settings are the broker settings of a TrainJob: the defaults, overridden
// by the runtime's `node` container env, overridden by trainer.env. Only
// literal, non-empty values count (upstream lets an env from a fieldRef
// blank a setting).
type settings struct {
	viewImage, networkDevice, queuePolicy string
}

func brokerSettings(runtimeEnv []corev1.EnvVar, trainJob *trainer.TrainJob) settings {
	s := settings{viewImage: DefaultViewImage, networkDevice: DefaultNetworkDevice, queuePolicy: DefaultQueuePolicy}
	set := func(env []corev1.EnvVar) {
		for _, e := range env {
			if e.Value == "" {
				continue
			}
			switch e.Name {
			case EnvViewImage:
				s.viewImage = e.Value
			case EnvNetworkDevice:
				s.networkDevice = e.Value
			case EnvQueuePolicy:
				s.queuePolicy = e.Value
			}
		}
	}
	set(runtimeEnv)
	if trainJob.Spec.Trainer != nil {
		set(trainJob.Spec.Trainer.Env)
	}
	return s
}

// EnforceMLPolicy turns the `node` pods into Flux brokers: it adds the
// installer init container and the volumes, and wraps the trainer's
// command (spec.trainer's, else the runtime's, with the args) in the Flux
// entrypoint. The JobSet builder then leaves the command and args alone.
func (*Flux) EnforceMLPolicy(info *pipeline.RuntimeInfo, trainJob *trainer.TrainJob) error {
	if fluxPolicy(info) == nil {
		return nil
	}
	ps := info.PodSet(trainer.Node)
	if ps == nil {
		return nil
	}
	cmName := trainJob.Name + EntrypointConfigMapSuffix
	c := ps.Container(trainer.Node)
	var runtimeEnv []corev1.EnvVar
	if c != nil {
		runtimeEnv = c.Env
	}
	s := brokerSettings(runtimeEnv, trainJob)

	for _, v := range []corev1.Volume{
		{Name: spackViewVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: installVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: cmName, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: cmName},
			DefaultMode:          ptr.To[int32](0o755),
		}}},
		{Name: sharedMemVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
		{Name: curveVolume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName:  trainJob.Name + CurveSecretSuffix,
			DefaultMode: ptr.To[int32](0o400),
		}}},
	} {
		ps.UpsertVolume(v)
	}
	upsertInitContainer(&ps.Template.Spec, corev1.Container{
		Name:    InstallerContainer,
		Image:   s.viewImage,
		Command: []string{"/bin/bash", initScript},
		VolumeMounts: []corev1.VolumeMount{
			{Name: installVolume, MountPath: installPath},
			{Name: cmName, MountPath: configPath, ReadOnly: true},
		},
	})
	if c == nil {
		return nil
	}
	for _, m := range []corev1.VolumeMount{
		{Name: installVolume, MountPath: installPath},
		{Name: spackViewVolume, MountPath: spackViewPath},
		{Name: cmName, MountPath: configPath, ReadOnly: true},
		{Name: curveVolume, MountPath: curvePath, ReadOnly: true},
		// Upstream mounts /dev/shm read-only, which leaves the memory
		// volume unusable for shared memory.
		{Name: sharedMemVolume, MountPath: sharedMemPath},
	} {
		pipeline.UpsertVolumeMount(c, m)
	}
	c.Command = []string{"/bin/bash", entrypointScript, wrappedCommand(c, trainJob.Spec.Trainer)}
	c.Args = nil
	ps.EntrypointSetBy = Name
	return nil
}

// wrappedCommand is the command Flux runs, as one string: spec.trainer's
// command, else the container's, followed by spec.trainer's args, else the
// container's, as the pod would have run them. Upstream drops the
// runtime's args.
func wrappedCommand(c *corev1.Container, tr *trainer.Trainer) string {
	command, args := c.Command, c.Args
	if tr != nil && tr.Command != nil {
		command = tr.Command
	}
	if tr != nil && tr.Args != nil {
		args = tr.Args
	}
	return strings.TrimSpace(strings.Join(slices.Concat(command, args), " "))
}

// upsertInitContainer adds the init container after the runtime's, or
// replaces one of the same name.
func upsertInitContainer(pod *corev1.PodSpec, c corev1.Container) {
	if k := slices.IndexFunc(pod.InitContainers, func(ic corev1.Container) bool { return ic.Name == c.Name }); k >= 0 {
		pod.InitContainers[k] = c
		return
	}
	pod.InitContainers = append(pod.InitContainers, c)
}

// maxNameLength is the longest TrainJob name whose entrypoint ConfigMap
// name is also a valid volume name (a DNS label): upstream names the
// volume after the ConfigMap.
const maxNameLength = validation.DNS1123LabelMaxLength - len(EntrypointConfigMapSuffix)

// Validate rejects a runtime whose `node` job already has an init
// container named flux-installer, a numProcPerNode below 1 (the CRDs
// refuse it too, but render runs without them) and a TrainJob name too
// long for the entrypoint volume.
func (*Flux) Validate(_ context.Context, info *pipeline.RuntimeInfo, _, newObj *trainer.TrainJob) (admission.Warnings, field.ErrorList) {
	policy := fluxPolicy(info)
	if policy == nil {
		return nil, nil
	}
	var errs field.ErrorList
	if n := len(newObj.Name); n > maxNameLength {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), newObj.Name,
			fmt.Sprintf("must be no more than %d characters with a Flux runtime, so that the volume of ConfigMap %q is a valid name; shorten it by %d", maxNameLength, newObj.Name+EntrypointConfigMapSuffix, n-maxNameLength)))
	}
	if tr := newObj.Spec.Trainer; tr != nil && tr.NumProcPerNode != nil && *tr.NumProcPerNode < 1 {
		errs = append(errs, field.Invalid(field.NewPath("spec", "trainer", "numProcPerNode"), *tr.NumProcPerNode, "must be greater than or equal to 1 for Flux TrainJob"))
	} else if n := ptr.Deref(policy.NumProcPerNode, 1); n < 1 {
		errs = append(errs, field.Invalid(field.NewPath("spec", "runtimeRef"), newObj.Spec.RuntimeRef.Name,
			fmt.Sprintf("the runtime's mlPolicy.flux.numProcPerNode is %d; it must be greater than or equal to 1", n)))
	}
	if ps := info.PodSet(trainer.Node); ps != nil && ps.Template != nil &&
		slices.ContainsFunc(ps.Template.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == InstallerContainer }) {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "runtimeRef"),
			fmt.Sprintf("InitContainer %q of replicated job %q is reserved: the Flux plugin adds it; rename the runtime's (or runtimePatches') init container", InstallerContainer, trainer.Node)))
	}
	return nil, errs
}

// ReconcilerBuilders watch the plugin's ConfigMaps and Secrets, so that one
// deleted or edited is put back.
func (*Flux) ReconcilerBuilders() []pipeline.ReconcilerBuilder {
	return []pipeline.ReconcilerBuilder{
		pipeline.OwnsNamed(&corev1.ConfigMap{}, EntrypointConfigMapSuffix),
		pipeline.OwnsNamed(&corev1.Secret{}, CurveSecretSuffix),
	}
}

// Build returns the ConfigMap of the entrypoint and init scripts and the
// Secret of the CURVE certificate, whose key is the existing Secret's (see
// curveKey), so applying them every reconcile changes nothing once they
// exist.
func (f *Flux) Build(ctx context.Context, info *pipeline.RuntimeInfo, trainJob *trainer.TrainJob) ([]client.Object, error) {
	policy := fluxPolicy(info)
	ps := info.PodSet(trainer.Node)
	if policy == nil || ps == nil {
		return nil, nil
	}
	var runtimeEnv []corev1.EnvVar
	if c := ps.Container(trainer.Node); c != nil {
		runtimeEnv = c.Env
	}
	s := brokerSettings(runtimeEnv, trainJob)
	tasks := ptr.Deref(policy.NumProcPerNode, 1)
	if tr := trainJob.Spec.Trainer; tr != nil && tr.NumProcPerNode != nil {
		tasks = *tr.NumProcPerNode
	}
	scripts, err := renderScripts(scriptParams{
		jobName:  trainJob.Name,
		domain:   info.Subdomain(trainJob) + "." + trainJob.Namespace + ".svc.cluster.local",
		nodes:    ps.Count,
		tasks:    tasks,
		gpus:     info.TrainerGPUs(),
		settings: s,
	})
	if err != nil {
		return nil, err
	}
	key, err := f.curveKey(ctx, trainJob)
	if err != nil {
		return nil, err
	}
	cert, err := curveCertificate(trainJob, key)
	if err != nil {
		return nil, err
	}
	return []client.Object{
		&corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: pipeline.OwnedObjectMeta(trainJob, EntrypointConfigMapSuffix),
			Data:       map[string]string{entrypointKey: scripts.entrypoint, initKey: scripts.init},
		},
		&corev1.Secret{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: pipeline.OwnedObjectMeta(trainJob, CurveSecretSuffix),
			Data:       map[string][]byte{curveCertKey: []byte(cert)},
		},
	}, nil
}

func fluxPolicy(info *pipeline.RuntimeInfo) *trainer.FluxMLPolicySource {
	if info == nil {
		return nil
	}
	if src := info.MLPolicySource(); src != nil {
		return src.Flux
	}
	return nil
}
