// Package feature is what the in-tree plugins' registry knows of the
// operator's feature gates, as the kube-scheduler's plugins/feature: the
// gates are read once, from the configuration, and handed to the
// registry (plugins.NewInTreeRegistry), so that every caller of the
// pipeline — operator, render, describe-pipeline — gets the same plugins
// for the same gates. It holds no state.
package feature

// Features are the feature gates that change the pipeline.
type Features struct {
	// EnableTrainJobStatus registers the TrainJobStatus plugin (KEP-2779).
	EnableTrainJobStatus bool
}
