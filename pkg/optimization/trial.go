// Package optimization holds what the OptimizationJob controller and the
// CLI agree on about a trial: the labels and annotations that tie a
// TrainJob to its OptimizationJob and carry its parameter assignment.
// KEP-2605 has no Trial object: a trial is a TrainJob, and everything the
// controller knows of one is read back from these keys.
package optimization

const (
	// JobNameLabel names the OptimizationJob a trial belongs to, so that
	// its trials are one label selector away.
	JobNameLabel = "trainer.kubeflow.org/optimizationjob-name"

	// TrialIndexLabel is the trial's place in the search: 0 for the first
	// trial created, counting trials deleted by hand. The controller
	// derives the next assignment from the assignments of trials 0..n-1.
	TrialIndexLabel = "trainer.kubeflow.org/trial-index"

	// ParametersAnnotation holds the trial's parameter assignment as JSON,
	// a list of {"name", "value"} in the order of spec.parameters (KEP-2605:
	// "the raw JSON parameter assignment as an Annotation").
	ParametersAnnotation = "trainer.kubeflow.org/trial-parameters"
)
