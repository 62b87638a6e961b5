package preview_test

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Shape of the load.
const (
	openSenders   = 64              // open-loop requests in flight at most before sends fall behind schedule
	closedWorkers = 32              // closed-loop workers
	closedFor     = 2 * time.Second // closed-loop step length
	warmRequests  = 1000            // open-loop requests before each measured step, not timed
	lateAfter     = time.Millisecond
)

// benchBodies are the :evaluate bodies, sent in order: 100 paths that
// match one rule each (at every priority) and 20 that fall through to the
// default action.
var benchBodies = func() []string {
	out := make([]string, 120)
	for i := range out {
		out[i] = fmt.Sprintf(`{"path":"/svc%03d/item","method":"GET"}`, (i*7)%120)
	}
	return out
}()

// target is where the load goes: the node's address and the requests on
// the wire, benchBodies to :evaluate.
type target struct {
	addr string
	reqs [][]byte
}

func newTarget(evaluateURL string) (*target, error) {
	reqs, addr, err := rawRequests(evaluateURL, benchBodies)
	return &target{addr: addr, reqs: reqs}, err
}

// senders dials n connections ahead of a run.
func (tg *target) senders(n int) []*sender {
	out := make([]*sender, n)
	for i := range out {
		out[i] = &sender{addr: tg.addr}
		if rc, err := dialRaw(tg.addr); err == nil { // else send dials and counts the failure
			out[i].rc = rc
		}
	}
	return out
}

// openResult is one open-loop run.
type openResult struct {
	lat    []time.Duration // see openLoop, sorted
	late   int             // requests sent more than lateAfter after their time
	held   int             // requests no sender was free for at their time
	failed int
}

// openLoop sends n requests on a fixed schedule, request i at start +
// i/rate, from a pool of senders, so the node sees the same arrivals
// whatever its answers' latency. A request that no sender was free for at
// its time (all were waiting for answers) is timed from its scheduled
// time, so a stall of the node shows in every request it held back (no
// coordinated omission); the others are timed from when they were sent,
// leaving out how late Go's timers woke the sender (up to a millisecond
// on an idle CPU: the netpoller waits in whole milliseconds).
func openLoop(tg *target, n int, rate float64) openResult {
	defer quietGC()()
	interval := time.Duration(float64(time.Second) / rate)
	lat, ok := make([]time.Duration, n), make([]bool, n)
	var next, late, held atomic.Int64
	senders := tg.senders(openSenders)
	start := time.Now().Add(10 * time.Millisecond)
	var wg sync.WaitGroup
	for _, s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer s.close()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				from, wasHeld, wasLate := departure(start.Add(time.Duration(i) * interval))
				held.Add(b2i(wasHeld))
				late.Add(b2i(wasLate))
				ok[i] = s.send(tg.reqs[i%len(tg.reqs)])
				lat[i] = time.Since(from)
			}
		}()
	}
	wg.Wait()
	res := openResult{late: int(late.Load()), held: int(held.Load()), lat: lat[:0]}
	for i, d := range lat {
		if ok[i] {
			res.lat = append(res.lat, d)
		} else {
			res.failed++
		}
	}
	slices.Sort(res.lat)
	return res
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// quietGC keeps this process's garbage collector from running (up to
// a GiB of heap) until the returned func is called, which collects: a
// collection on the load generator's one CPU would show as node latency.
func quietGC() func() {
	gc, limit := debug.SetGCPercent(-1), debug.SetMemoryLimit(1<<30)
	return func() {
		debug.SetGCPercent(gc)
		debug.SetMemoryLimit(limit)
		runtime.GC()
	}
}

// departure waits for at and returns the time to measure a request
// from: at itself when it had already passed (no sender was free: held),
// else the moment the sender woke; late is more than lateAfter behind.
func departure(at time.Time) (from time.Time, held, late bool) {
	if now := time.Now(); now.After(at) {
		return at, true, now.Sub(at) > lateAfter
	}
	time.Sleep(time.Until(at))
	now := time.Now()
	return now, false, now.Sub(at) > lateAfter
}

// closedLoop sends requests from workers, each waiting for its answer
// before the next, for d; it returns the answered count and the
// failures.
func closedLoop(tg *target, workers int, d time.Duration) (answered, failed int) {
	var ok, bad atomic.Int64
	senders := tg.senders(workers)
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	for w, s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer s.close()
			for i := w; time.Now().Before(stop); i += workers {
				if s.send(tg.reqs[i%len(tg.reqs)]) {
					ok.Add(1)
				} else {
					bad.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return int(ok.Load()), int(bad.Load())
}
