package status

import (
	"os"
	"testing"
	"time"
)

// TestMain pins the local time zone, in which status prints its timeline (printers.Clock): the goldens hold
// UTC, and the machine's zone (TZ; make test-unit runs in America/New_York) must not change what they hold.
func TestMain(m *testing.M) {
	time.Local = time.UTC
	os.Exit(m.Run())
}
