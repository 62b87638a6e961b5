//go:build !linux

package sandbox

import "runtime/debug"

// limitMemory sets only the Go memory limit where RLIMIT_AS is not
// available; the deadline still applies.
func limitMemory(limit uint64) error {
	debug.SetMemoryLimit(int64(limit))
	return nil
}
