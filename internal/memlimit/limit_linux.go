package memlimit

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"syscall"
)

// asSlack is the address space RLIMIT_AS allows beyond the memory
// limit. The runtime reserves address space in 64 MiB heap arenas plus
// their metadata, so with no slack a child holding 20 MiB could die
// reserving its next arena ("out of memory allocating heap arena
// metadata") while another run of the same tree fits: the verdict would
// depend on the address-space layout. The limit itself is enforced by
// Watch; RLIMIT_AS only stops a single allocation far past it
// before the watchdog's next look.
const asSlack = 512 << 20

// Limit sets the Go memory limit to limit and RLIMIT_AS to the
// address space the process holds now plus limit and asSlack: the Go
// runtime reserves hundreds of MiB of address space at start-up, so an
// absolute limit would measure the runtime, not the tree. The Go memory
// limit makes the collector work hard before Watch ends the child.
func Limit(limit uint64) error {
	vm, err := vmSize()
	if err != nil {
		return err
	}
	debug.SetMemoryLimit(int64(limit))
	rl := syscall.Rlimit{Cur: vm + limit + asSlack, Max: vm + limit + asSlack}
	return syscall.Setrlimit(syscall.RLIMIT_AS, &rl)
}

// vmSize is VmSize of /proc/self/status in bytes.
func vmSize() (uint64, error) { return statusBytes("VmSize:") }

// PeakRSS is the process's peak resident memory in bytes (VmHWM of
// /proc/self/status), for a child to report: a parent's rusage of its
// child is no measure, since Linux carries the RSS high-water mark of the
// parent's address space, which a child shares until exec, into it.
func PeakRSS() (uint64, error) { return statusBytes("VmHWM:") }

// statusBytes is the field of /proc/self/status that starts with key, a
// number of kB, in bytes.
func statusBytes(key string) (uint64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := bytes.CutPrefix(s.Bytes(), []byte(key)); ok {
			kb, err := strconv.ParseUint(string(bytes.TrimSuffix(bytes.TrimSpace(v), []byte(" kB"))), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/self/status: %w", key, s.Err())
}
