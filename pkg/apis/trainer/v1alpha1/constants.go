package v1alpha1

// Kinds of this API, as they appear in runtimeRef.kind and ownerReferences.
const (
	TrainJobKind               = "TrainJob"
	TrainingRuntimeKind        = "TrainingRuntime"
	ClusterTrainingRuntimeKind = "ClusterTrainingRuntime"
	OptimizationJobKind        = "OptimizationJob"
)

// Condition types of a TrainJob.
const (
	TrainJobSuspended = "Suspended"
	TrainJobComplete  = "Complete"
	TrainJobFailed    = "Failed"
	// TrainJobComponentsCreated is not in upstream Kubeflow Trainer: it makes a
	// failed Build phase visible in status (kubeflow/trainer#2351, #3671).
	TrainJobComponentsCreated = "ComponentsCreated"
)

// Condition reasons and messages of a TrainJob.
const (
	TrainJobSuspendedReason           = "Suspended"
	TrainJobResumedReason             = "Resumed"
	TrainJobRuntimeNotSupportedReason = "TrainingRuntimeNotSupported"
	TrainJobDeadlineExceededReason    = "DeadlineExceeded"
	TrainJobJobsCreatedReason         = "JobsCreated"
	TrainJobJobsBuildFailedReason     = "JobsBuildFailed"
	TrainJobJobsCreationFailedReason  = "JobsCreationFailed"

	TrainJobSuspendedMessage        = "TrainJob is suspended"
	TrainJobResumedMessage          = "TrainJob is resumed"
	TrainJobDeadlineExceededMessage = "TrainJob exceeded its active deadline"
)

// Well-known labels, annotations and values.
const (
	// AncestorLabel marks a replicated job of a runtime template with the
	// TrainJob step it runs: dataset-initializer, model-initializer or trainer.
	AncestorLabel = "trainer.kubeflow.org/trainjob-ancestor-step"

	AncestorDatasetInitializer = "dataset-initializer"
	AncestorModelInitializer   = "model-initializer"
	AncestorTrainer            = "trainer"

	// FrameworkLabel names a runtime's framework (torch, deepspeed, jax, …).
	FrameworkLabel = "trainer.kubeflow.org/framework"
	// SupportLabel set to "deprecated" marks a deprecated runtime.
	SupportLabel           = "trainer.kubeflow.org/support"
	SupportDeprecated      = "deprecated"
	WebhookValidationLabel = "trainer.kubeflow.org/webhook-validation"

	// ResourceInUseFinalizer is the legacy runtime finalizer; controllers only remove it.
	ResourceInUseFinalizer = "trainer.kubeflow.org/resource-in-use"

	TrainJobControllerManager = "trainer.kubeflow.org/trainjob-controller"
	MultiKueueController      = "kueue.x-k8s.io/multikueue"

	DeprecationPolicyURL = "https://trainer.kubeflow.org/en/latest/operator-guides/runtime.html#runtime-deprecation-policy"
)

// Names of replicated jobs and containers in runtime templates. The
// initializer jobs and their containers are named like their ancestor step.
const (
	Node                   = "node"
	Launcher               = "launcher"
	DatasetInitializerName = "dataset-initializer"
	ModelInitializerName   = "model-initializer"
)

// Environment and mounts of initializers, and the trainer's port.
const (
	StorageURIEnv        = "STORAGE_URI"
	InitializerVolume    = "initializer"
	DatasetMountPath     = "/workspace/dataset"
	ModelMountPath       = "/workspace/model"
	ContainerTrainerPort = 29500
)
