// Package procmem reads what Linux's /proc says of a process's memory, for
// tests that measure it (test/harness, the raft log's map in raftstore).
package procmem

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// MappedRSS is the resident memory, in bytes, of process pid's mappings
// of files whose path ends with suffix (/proc/PID/smaps).
func MappedRSS(pid int, suffix string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return 0, fmt.Errorf("mapped memory needs Linux's /proc: %w", err)
	}
	var kb int64
	in := false
	for line := range bytes.Lines(b) {
		f := bytes.Fields(line)
		switch {
		case len(f) >= 5 && bytes.Contains(f[0], []byte("-")) && !bytes.HasSuffix(f[0], []byte(":")):
			in = len(f) == 6 && bytes.HasSuffix(f[5], []byte(suffix)) // a mapping's header line
		case in && len(f) == 3 && string(f[0]) == "Rss:":
			v, err := strconv.ParseInt(string(f[1]), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/%d/smaps: %w", pid, err)
			}
			kb += v
		}
	}
	return kb << 10, nil
}
