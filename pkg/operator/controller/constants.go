package controller

// Names of the controllers and their event recorders (as upstream names them).
const (
	TrainJobControllerName               = "trainjob_controller"
	TrainingRuntimeControllerName        = "trainingruntime_controller"
	ClusterTrainingRuntimeControllerName = "clustertrainingruntime_controller"

	TrainJobRecorderName = "trainer-trainjob-controller"
)

// FieldManager is the server-side apply field manager of every object the
// operator applies.
const FieldManager = "trainer"

// TrainJobNameLabel is set on every ConfigMap and Secret the operator
// applies for a TrainJob, with the TrainJob's name. The operator caches only
// ConfigMaps and Secrets that carry it, rather than every one in the
// cluster (kubeflow/trainer#3374).
const TrainJobNameLabel = "trainer.kubeflow.org/trainjob-name"

// AppliedHashAnnotation is set on every object the Build phase returns,
// with the hash of what the operator applied: an object that carries the
// hash of what the operator would apply now is not applied again.
const AppliedHashAnnotation = "trainer.kubeflow.org/applied-hash"

// Events. Upstream records only TrainJobResourcesCreationFailed; this
// operator also records one event per condition transition, with the
// condition's reason and message and, as the action, the condition type.
const (
	ReasonResourcesCreationFailed = "TrainJobResourcesCreationFailed"
	ActionReconciling             = "Reconciling"
	// resourcesCreationFailedPrefix starts the note of a
	// TrainJobResourcesCreationFailed event.
	resourcesCreationFailedPrefix = "TrainJob resources reconciliation failed: "
)

// Messages of the ComponentsCreated condition (the reasons are in the API).
const (
	ComponentsCreatedMessage       = "TrainJob components are created"
	ComponentsBuildFailedPrefix    = "Failed to build TrainJob components: "
	ComponentsCreationFailedPrefix = "Failed to create TrainJob components: "
)

// Lengths the API server accepts.
const (
	// maxConditionMessage is metav1.Condition's message limit.
	maxConditionMessage = 32768
	// eventNoteCut keeps event notes under events.k8s.io/v1's 1024-byte
	// limit: longer notes are cut there and marked with " ..." (as upstream
	// does).
	eventNoteCut = 950
)
