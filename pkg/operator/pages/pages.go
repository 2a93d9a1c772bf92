// Package pages gives back to the kernel the pages of the operator's executable that only its start-up
// touched.
//
// One binary is both the kubectl plugin and the operator, so it links kubectl's, cli-runtime's and the
// operator's packages: about 70 MiB of code and constants. Each package's init runs once at start-up, and
// every page fault on a file-backed mapping maps up to 16 neighbouring pages that are in the page cache
// (the kernel's fault-around), so after start-up nearly the whole executable is resident, though the
// operator's steady state runs a fraction of it. Dropping the executable's read-only mappings once the
// caches are synced (madvise MADV_DONTNEED: the pages stay in the page cache and fault back in when used)
// leaves in the operator's RSS only what it goes on to use.
package pages

import "context"

// Releaser releases the executable's start-up pages once ready is closed. It runs on every replica, leader
// or not.
type Releaser struct {
	// Ready is closed (or returns true) when start-up is over: in the operator, when the caches synced.
	Ready func(ctx context.Context) bool
	// Log reports what was released.
	Log func(msg string, keysAndValues ...any)
}

// Start waits for start-up to end, releases the pages once and returns.
func (r Releaser) Start(ctx context.Context) error {
	if !r.Ready(ctx) {
		return nil
	}
	n, err := ReleaseExecutable()
	if err != nil {
		r.Log("could not release the executable's start-up pages", "error", err.Error())
		return nil
	}
	r.Log("released the executable's start-up pages", "bytes", n)
	return nil
}

// NeedLeaderElection is false: every replica starts up.
func (Releaser) NeedLeaderElection() bool { return false }
