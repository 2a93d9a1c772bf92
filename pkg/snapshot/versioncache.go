package snapshot

import "github.com/kubectl-trainjob/kubectl-trainjob/pkg/intern"

// VersionCacheSize bounds a VersionCache: a cluster has few runtimes, and
// each version of one is what its TrainJobs' snapshots hold.
const VersionCacheSize = intern.DefaultTableSize

// VersionCache caches one value per runtime version (its content, or the
// runtime's kind, UID and resourceVersion), for the TrainJobs of a runtime
// to share, at most VersionCacheSize of them.
type VersionCache[K comparable, V any] = intern.Table[K, V]
