//go:build !linux

package memlimit

import (
	"errors"
	"runtime/debug"
)

// Limit sets only the Go memory limit where RLIMIT_AS is not
// available; the deadline still applies.
func Limit(limit uint64) error {
	debug.SetMemoryLimit(int64(limit))
	return nil
}

// PeakRSS is not measured where there is no /proc.
func PeakRSS() (uint64, error) { return 0, errors.New("no peak RSS without Linux's /proc") }
