//go:build !linux

package memlimit

import "runtime/debug"

// Limit sets only the Go memory limit where RLIMIT_AS is not
// available; the deadline still applies.
func Limit(limit uint64) error {
	debug.SetMemoryLimit(int64(limit))
	return nil
}
