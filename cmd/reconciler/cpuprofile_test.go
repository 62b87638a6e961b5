package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// RECONCILER_CPUPROFILE (scripts/bench-http.sh's BENCH_PROFILE) writes a
// profile `go tool pprof` reads (gzip-compressed protobuf) when the node
// stops, and a path it cannot create is an error naming the variable.
func TestCPUProfileFromEnvironment(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.prof")
	stop, err := startCPUProfile(path)
	if err != nil {
		t.Fatal(err)
	}
	stop()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(data, []byte{0x1f, 0x8b}) {
		t.Errorf("profile of %d bytes is not gzip: % x", len(data), data[:min(len(data), 8)])
	}
	if _, err := startCPUProfile(filepath.Join(t.TempDir(), "missing", "cpu.prof")); err == nil || !strings.Contains(err.Error(), cpuProfileEnv) {
		t.Errorf("unwritable path: err = %v, want one naming %s", err, cpuProfileEnv)
	}
}
