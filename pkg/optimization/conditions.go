package optimization

// Condition types of an OptimizationJob, as KEP-2605 (§7.4) names them.
const (
	// Created: the controller creates the trials (True), or cannot
	// (False, with why).
	Created = "Created"
	// Complete: every trial has ended and the best one is in
	// status.result. Terminal.
	Complete = "Complete"
	// Failed: the search cannot go on or came to nothing. Terminal.
	Failed = "Failed"
)

// Condition reasons. KEP-2605 names TrainJobsCreationFailed (Created=False)
// and, in its sample, MaxTrialsReached (Complete); the others are ours.
const (
	TrialsCreatedReason           = "TrialsCreated"
	AllTrialsCreatedReason        = "AllTrialsCreated"
	TrainJobsCreationFailedReason = "TrainJobsCreationFailed"
	// TrialNotControlledReason: a TrainJob the OptimizationJob does not
	// control holds the name of its next trial.
	TrialNotControlledReason = "TrialNotControlled"
	MaxTrialsReachedReason   = "MaxTrialsReached"
	// SearchSpaceExhaustedReason: a grid search ran out of points before
	// numTrials.
	SearchSpaceExhaustedReason = "SearchSpaceExhausted"
	// NoTrialSucceededReason: every trial ended and none both completed and
	// reported the objective metric.
	NoTrialSucceededReason = "NoTrialSucceeded"
	// InvalidSpecReason: the search cannot be built from the spec (the
	// webhook refuses such a spec; without it, the controller says so).
	InvalidSpecReason = "InvalidSpec"
)
