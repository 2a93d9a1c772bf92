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
// symbol tables) from this process: madvise(MADV_DONTNEED) on a private file mapping none of whose pages
// were ever written only unmaps its pages, which fault back in from the page cache when used. Writable
// mappings (data, bss) are left alone, and so is a read-only mapping holding any page that was written
// before it became read-only (Anonymous in smaps): in a dynamically linked executable the loader relocates
// the RELRO segment (the GOT, say) and then protects it, and dropping those pages would bring back the
// unrelocated bytes of the file. It returns the size of the mappings it advised.
func ReleaseExecutable() (int64, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, err
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	type mapping struct {
		header          string
		start, end      uint64
		candidate, anon bool
	}
	var ms []mapping
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := s.Text()
		fields := strings.Fields(line)
		if len(fields) >= 5 && len(fields[1]) == 4 && strings.Contains(fields[0], "-") {
			// 00400000-01390000 r--p 00000000 fd:01 1234 /path/to/exe
			m := mapping{header: line}
			from, to, _ := strings.Cut(fields[0], "-")
			start, err1 := strconv.ParseUint(from, 16, 64)
			end, err2 := strconv.ParseUint(to, 16, 64)
			if err1 != nil || err2 != nil || end <= start {
				return 0, fmt.Errorf("unexpected line in /proc/self/smaps: %q", line)
			}
			m.start, m.end = start, end
			m.candidate = len(fields) >= 6 && fields[5] == exe && !strings.Contains(fields[1], "w") && strings.HasSuffix(fields[1], "p")
			ms = append(ms, m)
			continue
		}
		// Anonymous: 12 kB — pages of this mapping that are the process's own copies.
		if len(ms) > 0 && len(fields) == 3 && fields[0] == "Anonymous:" && fields[1] != "0" {
			ms[len(ms)-1].anon = true
		}
	}
	if err := s.Err(); err != nil {
		return 0, err
	}
	var total int64
	for _, m := range ms {
		if !m.candidate || m.anon {
			continue
		}
		if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, uintptr(m.start), uintptr(m.end-m.start), syscall.MADV_DONTNEED); errno != 0 {
			return total, fmt.Errorf("madvise %s: %w", m.header, errno)
		}
		total += int64(m.end - m.start)
	}
	return total, nil
}
