package pages

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// executableRSS is the resident size, in KiB, of this test binary's read-only mappings.
func executableRSS(t *testing.T) int {
	t.Helper()
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	var rss int
	inExe := false
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) >= 5 && strings.Contains(fields[0], "-") && len(fields[1]) == 4 {
			inExe = len(fields) >= 6 && fields[5] == exe && !strings.Contains(fields[1], "w")
			continue
		}
		if inExe && len(fields) == 3 && fields[0] == "Rss:" {
			kib, err := strconv.Atoi(fields[1])
			if err != nil {
				t.Fatal(err)
			}
			rss += kib
		}
	}
	return rss
}

func TestReleaseExecutable(t *testing.T) {
	before := executableRSS(t)
	n, err := ReleaseExecutable()
	if err != nil {
		t.Fatal(err)
	}
	after := executableRSS(t)
	t.Logf("advised %d KiB of mappings; their resident size went from %d KiB to %d KiB", n/1024, before, after)
	if n == 0 {
		t.Fatal("no read-only mapping of the executable was found")
	}
	// Without the release it could only grow; what runs between release and measurement (reading smaps)
	// faults some pages back in.
	if after >= before {
		t.Errorf("resident size of the executable went from %d KiB to %d KiB, want less", before, after)
	}
	// The code still runs, and the data (writable mappings) is intact.
	if got := strings.Repeat("ab", 2); got != "abab" {
		t.Errorf("after release: %q", got)
	}
}
