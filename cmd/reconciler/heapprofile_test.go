package main

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// SIGUSR1 writes a heap profile into RECONCILER_HEAPPROFILE's directory,
// one a process, whole (gzip-compressed protobuf, as pprof reads).
func TestHeapProfileOnSignal(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	heapProfileOnSignal(ctx, dir, func(format string, args ...any) { t.Errorf(format, args...) })
	if err := syscall.Kill(os.Getpid(), syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, fmt.Sprintf("heap-%d.pprof", os.Getpid()))
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		f, err := os.Open(path)
		if err == nil {
			var zr *gzip.Reader
			var n int64
			if zr, err = gzip.NewReader(f); err == nil {
				n, err = io.Copy(io.Discard, zr) // a profile still being written ends short
			}
			f.Close()
			if err == nil && n > 0 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no heap profile at %s: %v", path, err)
		}
	}
}
