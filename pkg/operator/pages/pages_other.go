//go:build !linux

package pages

// ReleaseExecutable does nothing where the operator does not run (it runs on Linux nodes).
func ReleaseExecutable() (int64, error) { return 0, nil }
