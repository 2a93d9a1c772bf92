package stack

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBinaryRefusesAStaleBinary: a $KUBECTL_TRAINJOB_BIN older than the sources is refused, one newer is
// used as it is.
func TestBinaryRefusesAStaleBinary(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "kubectl-trainjob")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(BinaryEnv, bin)

	old := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := os.Chtimes(bin, old, old); err != nil {
		t.Fatal(err)
	}
	_, err := Binary(t.Context(), t.TempDir())
	if err == nil || !strings.HasPrefix(err.Error(), BinaryEnv+"="+bin+" is older than ") || !strings.HasSuffix(err.Error(), ": run `make build`, or unset "+BinaryEnv+" to have the tests build it") {
		t.Errorf("Binary with a binary of 2000 = %v, want a refusal naming the newer source", err)
	}

	fresh := time.Now().Add(time.Hour)
	if err := os.Chtimes(bin, fresh, fresh); err != nil {
		t.Fatal(err)
	}
	got, err := Binary(t.Context(), t.TempDir())
	if err != nil || got != bin {
		t.Errorf("Binary with a binary newer than the sources = %q, %v; want %q", got, err, bin)
	}
}
