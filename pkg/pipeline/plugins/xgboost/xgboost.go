// Package xgboost is the XGBoost plugin: it sizes the trainer step and
// gives each worker the DMLC settings of XGBoost's collective (Rabit)
// tracker, which runs on the first pod. It touches nothing but the
// trainer's `node` container.
package xgboost

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
)

// Name is the plugin's name in the registry.
const Name = "XGBoost"

// DMLC settings the plugin owns; users may not set them.
const (
	EnvTrackerURI  = "DMLC_TRACKER_URI"
	EnvTrackerPort = "DMLC_TRACKER_PORT"
	EnvTaskID      = "DMLC_TASK_ID"
	EnvNumWorker   = "DMLC_NUM_WORKER"
)

var reservedEnvs = [...]string{EnvTrackerURI, EnvTrackerPort, EnvTaskID, EnvNumWorker}

// XGBoost implements the mlPolicy.xgboost runtimes.
type XGBoost struct{}

var (
	_ pipeline.EnforceMLPolicyPlugin  = (*XGBoost)(nil)
	_ pipeline.CustomValidationPlugin = (*XGBoost)(nil)
)

// New builds the XGBoost plugin.
func New(context.Context, pipeline.Handle) (pipeline.Plugin, error) { return &XGBoost{}, nil }

// Name returns the plugin's name.
func (*XGBoost) Name() string { return Name }

// EnforceMLPolicy sets the trainer's pod count from the TrainJob and, when
// the TrainJob has a trainer, the DMLC settings: one worker per GPU of a
// node, or one per node without GPUs.
func (*XGBoost) EnforceMLPolicy(info *pipeline.RuntimeInfo, trainJob *trainer.TrainJob) error {
	if src := info.MLPolicySource(); src == nil || src.XGBoost == nil {
		return nil
	}
	ps, c := info.SizeTrainer(trainJob)
	if c == nil {
		return nil
	}
	// Merged resources: GPUs set only in the runtime count even when the
	// TrainJob's resourcesPerNode names other resources.
	workersPerNode := max(info.TrainerGPUs(), 1)
	numWorkers := min(int64(ps.Count)*workersPerNode, math.MaxInt32)
	pipeline.UpsertEnv(c,
		corev1.EnvVar{Name: EnvTrackerURI, Value: info.FirstEndpoint(trainJob, ps.Name)},
		corev1.EnvVar{Name: EnvTrackerPort, Value: strconv.Itoa(trainer.ContainerTrainerPort)},
		pipeline.CompletionIndexEnv(EnvTaskID),
		corev1.EnvVar{Name: EnvNumWorker, Value: strconv.FormatInt(numWorkers, 10)},
	)
	pipeline.UpsertPort(c, corev1.ContainerPort{ContainerPort: trainer.ContainerTrainerPort})
	return nil
}

// Validate forbids the DMLC settings the plugin owns in trainer.env.
func (*XGBoost) Validate(_ context.Context, info *pipeline.RuntimeInfo, _, newObj *trainer.TrainJob) (admission.Warnings, field.ErrorList) {
	if src := info.MLPolicySource(); src == nil || src.XGBoost == nil || newObj.Spec.Trainer == nil {
		return nil, nil
	}
	envPath := field.NewPath("spec", "trainer", "env")
	var errs field.ErrorList
	for i, e := range newObj.Spec.Trainer.Env {
		if slices.Contains(reservedEnvs[:], e.Name) {
			errs = append(errs, field.Forbidden(envPath.Index(i), fmt.Sprintf("%s is reserved for the XGBoost runtime", e.Name)))
		}
	}
	return nil, errs
}
