package harness

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"

	"github.com/policyrollout/reconciler/internal/procmem"
)

// PeakRSS is the most resident memory, in bytes, the node's current
// incarnation has used since it started or since ResetPeakRSS (the
// kernel's VmHWM). Memory of the node's children (the validation worker)
// is not in it: that is the point of running them.
func (n *Node) PeakRSS() (int64, error) {
	pid := n.Pid()
	if pid == 0 {
		return 0, fmt.Errorf("%s: not running", n.ID)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("%s: peak memory needs Linux's /proc: %w", n.ID, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) == 3 && string(f[0]) == "VmHWM:" && string(f[2]) == "kB" {
			kb, err := strconv.ParseInt(string(f[1]), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("%s: no VmHWM in /proc/%d/status", n.ID, pid)
}

// ResetPeakRSS starts PeakRSS afresh from the node's present resident
// memory, so each step of a test measures its own peak ("5" to clear_refs,
// Linux 4.0 and later).
func (n *Node) ResetPeakRSS() error {
	pid := n.Pid()
	if pid == 0 {
		return fmt.Errorf("%s: not running", n.ID)
	}
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// RSS is the node's resident memory now, in bytes (VmRSS): what it holds
// after a step, where PeakRSS is the most it held during one.
func (n *Node) RSS() (int64, error) {
	pid := n.Pid()
	if pid == 0 {
		return 0, fmt.Errorf("%s: not running", n.ID)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("%s: resident memory needs Linux's /proc: %w", n.ID, err)
	}
	for line := range bytes.Lines(b) {
		f := bytes.Fields(line)
		if len(f) == 3 && string(f[0]) == "VmRSS:" && string(f[2]) == "kB" {
			kb, err := strconv.ParseInt(string(f[1]), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("%s: no VmRSS in /proc/%d/status", n.ID, pid)
}

// MappedRSS is the resident memory, in bytes, of the node's mappings of
// files whose path ends with suffix: bolt's memory-mapped raft log is
// "raft/raft.db".
func (n *Node) MappedRSS(suffix string) (int64, error) {
	pid := n.Pid()
	if pid == 0 {
		return 0, fmt.Errorf("%s: not running", n.ID)
	}
	b, err := procmem.MappedRSS(pid, suffix)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", n.ID, err)
	}
	return b, nil
}
