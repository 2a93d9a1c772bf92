package runtimes

import "sync"

// VersionCacheSize bounds a VersionCache: a cluster has few runtimes, and
// each version of one is what its TrainJobs' snapshots hold.
const VersionCacheSize = 64

// VersionCache caches one value per runtime version (its content, or the
// runtime's kind, UID and resourceVersion), for the TrainJobs of a runtime
// to share. It keeps at most VersionCacheSize: when full, any one is forgotten,
// so a version no longer in use goes eventually. Safe for concurrent use.
type VersionCache[K comparable, V any] struct {
	mu sync.Mutex
	m  map[K]V
}

// Get returns the value kept for k.
func (c *VersionCache[K, V]) Get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[k]
	return v, ok
}

// Add keeps v for k.
func (c *VersionCache[K, V]) Add(k K, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[K]V{}
	}
	if _, ok := c.m[k]; !ok && len(c.m) >= VersionCacheSize {
		for old := range c.m {
			delete(c.m, old)
			break
		}
	}
	c.m[k] = v
}

// Len is how many values are kept.
func (c *VersionCache[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}
