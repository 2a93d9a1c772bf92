package pages

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// ReleaseExecutable drops the resident pages of the executable's read-only mappings (code, constants,
// symbol tables) from this process: madvise(MADV_DONTNEED) on a private, never-written file mapping only
// unmaps its pages, which fault back in from the page cache when used. Writable mappings (data, bss) are
// left alone. It returns the size of the mappings it advised.
func ReleaseExecutable() (int64, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, err
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var total int64
	s := bufio.NewScanner(f)
	for s.Scan() {
		// 00400000-01390000 r--p 00000000 fd:01 1234 /path/to/exe
		fields := strings.Fields(s.Text())
		if len(fields) < 6 || fields[5] != exe || strings.ContainsAny(fields[1], "w") || !strings.HasSuffix(fields[1], "p") {
			continue
		}
		from, to, ok := strings.Cut(fields[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(from, 16, 64)
		end, err2 := strconv.ParseUint(to, 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			return total, fmt.Errorf("unexpected line in /proc/self/maps: %q", s.Text())
		}
		if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, uintptr(start), uintptr(end-start), syscall.MADV_DONTNEED); errno != 0 {
			return total, fmt.Errorf("madvise %s: %w", fields[0], errno)
		}
		total += int64(end - start)
	}
	return total, s.Err()
}
