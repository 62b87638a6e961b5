package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"syscall"
)

// heapProfileEnv names a directory the node writes its heap profile to
// (heap-PID.pprof, so that the nodes of a test can share it), after a
// collection, each time it receives SIGUSR1 (what holds a node's memory:
// test/lists's NodeMemory test). Like cpuProfileEnv it is set by whoever
// starts the process, never over the network.
const heapProfileEnv = "RECONCILER_HEAPPROFILE"

// heapProfileOnSignal writes the profile into dir on every SIGUSR1 until
// ctx ends.
func heapProfileOnSignal(ctx context.Context, dir string, errorf func(format string, args ...any)) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGUSR1)
	go func() {
		defer signal.Stop(ch)
		for {
			select {
			case <-ctx.Done():
				return
			case <-ch:
				runtime.GC() // the profile is of the last collection: make it now
				path := filepath.Join(dir, fmt.Sprintf("heap-%d.pprof", os.Getpid()))
				if err := writeHeapProfile(path); err != nil {
					errorf("%s: %v", heapProfileEnv, err)
				}
			}
		}
	}()
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.WriteHeapProfile(f); err != nil {
		f.Close()
		return fmt.Errorf("writing: %w", err)
	}
	return f.Close()
}
