package intern

import "sync"

// DefaultTableSize bounds a Table whose Max is not set: a cluster has few
// runtimes, and each version of one is what its TrainJobs share.
const DefaultTableSize = 64

// Table keeps one value per key for the holders of that key to share (a
// string, a runtime version's content, its decoded form). It keeps at most
// Max (DefaultTableSize when 0): when full, a random entry makes room, so a
// key no longer in use goes eventually. Safe for concurrent use; the zero
// value is ready.
type Table[K comparable, V any] struct {
	Max int

	mu sync.RWMutex
	m  map[K]V
}

// Get returns the value kept for k.
func (t *Table[K, V]) Get(k K) (V, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	v, ok := t.m[k]
	return v, ok
}

// Add keeps v for k.
func (t *Table[K, V]) Add(k K, v V) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[K]V{}
	}
	limit := t.Max
	if limit <= 0 {
		limit = DefaultTableSize
	}
	if _, ok := t.m[k]; !ok && len(t.m) >= limit {
		for old := range t.m {
			delete(t.m, old)
			break
		}
	}
	t.m[k] = v
}

// Len is how many values are kept.
func (t *Table[K, V]) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.m)
}
