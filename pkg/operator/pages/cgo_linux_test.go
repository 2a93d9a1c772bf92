//go:build cgo

package pages

import (
	"os/user"
	"testing"
)

// TestReleaseExecutableDynamicallyLinked checks that calls into libc (os/user, and the runtime's mmap) still
// work after the release. It can only fail when the binary is linked by the external linker, which gives it a
// RELRO segment (`make test-unit` runs it so: -ldflags=-linkmode=external): releasing the relocated RELRO
// pages brought back the file's unrelocated pointers and crashed the next call with PC=0.
func TestReleaseExecutableDynamicallyLinked(t *testing.T) {
	if _, err := ReleaseExecutable(); err != nil {
		t.Fatal(err)
	}
	if _, err := user.Current(); err != nil {
		t.Fatal(err)
	}
	var keep [][]byte
	for range 64 {
		keep = append(keep, make([]byte, 4<<20))
	}
	if len(keep) != 64 {
		t.Fatal("allocation after the release failed")
	}
}
