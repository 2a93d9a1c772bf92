package controller

// Names of the controllers and their event recorders (as upstream names them).
const (
	TrainJobControllerName               = "trainjob_controller"
	TrainingRuntimeControllerName        = "trainingruntime_controller"
	ClusterTrainingRuntimeControllerName = "clustertrainingruntime_controller"

	TrainJobRecorderName = "trainer-trainjob-controller"
)

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

// ComponentNotControlledReason is the reason of ComponentsCreated=False
// while an object that has the name of one of the TrainJob's children exists
// and the TrainJob does not control it (added to upstream's reasons).
const ComponentNotControlledReason = "ComponentNotControlled"

// Lengths the API server accepts.
const (
	// maxConditionMessage is metav1.Condition's message limit.
	maxConditionMessage = 32768
	// eventNoteCut keeps event notes under events.k8s.io/v1's 1024-byte
	// limit: longer notes are cut there and marked with " ..." (as upstream
	// does).
	eventNoteCut = 950
)
