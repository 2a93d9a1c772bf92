package controller

// Names of the controllers and their event recorders (as upstream names them).
const (
	TrainJobControllerName               = "trainjob_controller"
	TrainingRuntimeControllerName        = "trainingruntime_controller"
	ClusterTrainingRuntimeControllerName = "clustertrainingruntime_controller"
	OptimizationJobControllerName        = "optimizationjob_controller"

	TrainJobRecorderName        = "trainer-trainjob-controller"
	OptimizationJobRecorderName = "trainer-optimizationjob-controller"
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

// JobSetDeletedReason is the reason of Failed=True for a TrainJob whose
// JobSet ran and is gone before the TrainJob saw it end (added to upstream's
// reasons): deleted by its ttlSecondsAfterFinished while the operator was
// not running, or by hand. Its end is unknown, and it may have finished:
// it is not run again (upstream creates the JobSet again).
const JobSetDeletedReason = "JobSetDeleted"

// jobSetDeletedMessage is the message of Failed=True JobSetDeleted; it
// takes the JobSet's namespace/name.
const jobSetDeletedMessage = "JobSet %s was deleted before the TrainJob saw it end (by its ttlSecondsAfterFinished while the operator was not running, or by hand): " +
	"its training may have finished, so it is not run again; create the TrainJob again to run it again"
