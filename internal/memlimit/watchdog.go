package memlimit

import (
	"fmt"
	"os"
	"runtime/metrics"
	"sync/atomic"
	"time"
)

// watchdogPeriod is how often the child measures the memory it holds.
const watchdogPeriod = 2 * time.Millisecond

// Memory the runtime holds from the OS: everything it has mapped, less
// heap pages it has given back.
const (
	metricTotal    = "/memory/classes/total:bytes"
	metricReleased = "/memory/classes/heap/released:bytes"
)

// Samples are the runtime metrics Held reads, allocated once by a caller
// that measures often.
func Samples() []metrics.Sample {
	return []metrics.Sample{{Name: metricTotal}, {Name: metricReleased}}
}

// Held is the memory the runtime holds from the OS now, read into s
// (from Samples).
func Held(s []metrics.Sample) uint64 {
	metrics.Read(s)
	return s[0].Value.Uint64() - s[1].Value.Uint64()
}

// Watch ends the process when the memory it holds grows by more
// than limit over what it held at the last call of the rebase function it
// returns (at start, then at each request). RLIMIT_AS alone cannot be the
// measure: the runtime maps its heap in 64 MiB arenas that VmSize counts
// once reserved, so a tree needing 70 MiB could fit a 16 MiB limit in
// one run and not in the next. With the Go memory limit set to limit the
// collector keeps the heap under it while the live data fits, so what
// this watches is the tree's live data, the same in every run. A period
// of 2 ms lets the heap overshoot by what it allocates in that time;
// RLIMIT_AS stays as the backstop.
func Watch(limit uint64) (rebase func()) {
	s := Samples()
	var base atomic.Uint64
	base.Store(Held(s))
	go func() {
		s := Samples()
		t := time.NewTicker(watchdogPeriod)
		defer t.Stop()
		for range t.C {
			if h, b := Held(s), base.Load(); h > b+limit {
				fmt.Fprintf(os.Stderr, "out of memory: grew by %d MiB, over its limit of %d MiB\n", (h-b)>>20, limit>>20)
				os.Exit(3)
			}
		}
	}()
	return func() { base.Store(Held(s)) }
}
