package harness

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
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

// RSSFile is the part of RSS that is pages of mapped files (RssFile: the
// executable, bolt's memory-mapped database), which the kernel may drop
// and read back, unlike the anonymous part (the Go heap).
func (n *Node) RSSFile() (int64, error) {
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
		if len(f) == 3 && string(f[0]) == "RssFile:" && string(f[2]) == "kB" {
			kb, err := strconv.ParseInt(string(f[1]), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("%s: no RssFile in /proc/%d/status", n.ID, pid)
}
