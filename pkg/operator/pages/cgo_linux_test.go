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
	// 256 MiB of new heap, which the runtime maps through libc's mmap: every
	// page written, then read back.
	const page = 4 << 10
	var keep [][]byte
	for i := range 64 {
		b := make([]byte, 4<<20)
		for j := 0; j < len(b); j += page {
			b[j] = byte(i + j/page)
		}
		keep = append(keep, b)
	}
	for i, b := range keep {
		for j := 0; j < len(b); j += page {
			if want := byte(i + j/page); b[j] != want {
				t.Fatalf("buffer %d, page %d holds %d, want %d", i, j/page, b[j], want)
			}
		}
	}
}
