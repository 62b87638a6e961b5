package sandbox

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"syscall"
)

// limitMemory sets RLIMIT_AS to the address space the process holds now
// plus limit: the Go runtime reserves hundreds of MiB of address space
// at start-up, so an absolute limit would measure the runtime, not the
// tree. The Go memory limit makes the collector work hard before the
// kernel refuses a mapping (which ends the child with "out of memory").
func limitMemory(limit uint64) error {
	vm, err := vmSize()
	if err != nil {
		return err
	}
	debug.SetMemoryLimit(int64(limit))
	rl := syscall.Rlimit{Cur: vm + limit, Max: vm + limit}
	return syscall.Setrlimit(syscall.RLIMIT_AS, &rl)
}

// vmSize is VmSize of /proc/self/status in bytes.
func vmSize() (uint64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := bytes.CutPrefix(s.Bytes(), []byte("VmSize:")); ok {
			kb, err := strconv.ParseUint(string(bytes.TrimSuffix(bytes.TrimSpace(v), []byte(" kB"))), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmSize in /proc/self/status: %w", s.Err())
}
