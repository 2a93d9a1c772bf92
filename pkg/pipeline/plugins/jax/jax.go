// Package jax is the JAX plugin: it sizes the trainer step and tells each
// process how to join jax.distributed (process count, process id and the
// coordinator on the first pod). It touches nothing but the trainer's
// `node` container.
package jax

import (
	"context"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
)

// Name is the plugin's name in the registry.
const Name = "JAX"

// Environment of jax.distributed.initialize().
const (
	EnvNumProcesses       = "JAX_NUM_PROCESSES"
	EnvProcessID          = "JAX_PROCESS_ID"
	EnvCoordinatorAddress = "JAX_COORDINATOR_ADDRESS"
)

// JAX implements the mlPolicy.jax runtimes.
type JAX struct{}

var (
	_ pipeline.EnforceMLPolicyPlugin  = (*JAX)(nil)
	_ pipeline.CustomValidationPlugin = (*JAX)(nil)
)

// New builds the JAX plugin.
func New(context.Context, pipeline.Handle) (pipeline.Plugin, error) { return &JAX{}, nil }

// Name returns the plugin's name.
func (*JAX) Name() string { return Name }

// EnforceMLPolicy sets the trainer's pod count from the TrainJob and, when
// the TrainJob has a trainer, one JAX process per pod with the first pod as
// coordinator.
func (*JAX) EnforceMLPolicy(info *pipeline.RuntimeInfo, trainJob *trainer.TrainJob) error {
	if src := info.MLPolicySource(); src == nil || src.JAX == nil {
		return nil
	}
	ps, c := info.SizeTrainer(trainJob)
	if c == nil {
		return nil
	}
	pipeline.UpsertEnv(c,
		corev1.EnvVar{Name: EnvNumProcesses, Value: strconv.Itoa(int(ps.Count))},
		pipeline.CompletionIndexEnv(EnvProcessID),
		corev1.EnvVar{Name: EnvCoordinatorAddress, Value: info.FirstEndpoint(trainJob, ps.Name) + ":" + strconv.Itoa(trainer.ContainerTrainerPort)},
	)
	pipeline.UpsertPort(c, corev1.ContainerPort{ContainerPort: trainer.ContainerTrainerPort})
	return nil
}

// Validate accepts every TrainJob: JAX has no settings of its own to check.
func (*JAX) Validate(context.Context, *pipeline.RuntimeInfo, *trainer.TrainJob, *trainer.TrainJob) (admission.Warnings, field.ErrorList) {
	return nil, nil
}
