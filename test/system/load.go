package system

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/test/harness"
)

// LoadOptions bound a Load: it stops at MaxRequests, after MaxDuration, or
// at Stop, whichever comes first.
type LoadOptions struct {
	WorkersPerNode int
	// Pause is each worker's wait between two requests (0: none).
	Pause       time.Duration
	MaxRequests int64
	MaxDuration time.Duration
}

// DecisionTimeout bounds one decision of the load. It is far above any
// sane latency so that a CI machine running other tests at the same time
// does not make a healthy node look failed; slow answers are reported.
const DecisionTimeout = 5 * time.Second

// DefaultLoad is enough traffic to catch a failed swap without starving
// raft of the two CPUs a CI machine has.
var DefaultLoad = LoadOptions{WorkersPerNode: 2, Pause: 2 * time.Millisecond, MaxRequests: 2_000_000, MaxDuration: 3 * time.Minute}

// Load sends decisions to every node of a cluster and hands each answer to
// a Checker.
type Load struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	sent   atomic.Int64
	once   sync.Once
}

// StartLoad starts opts.WorkersPerNode workers per node of c. t.Cleanup
// stops them if the test does not.
func StartLoad(t testing.TB, c *Cluster, chk *Checker, opts LoadOptions) *Load {
	ctx, cancel := context.WithTimeout(context.Background(), opts.MaxDuration)
	l := &Load{cancel: cancel}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		c.watchGenerations(ctx)
	}()
	for _, p := range c.Nodes {
		for w := range opts.WorkersPerNode {
			l.wg.Add(1)
			go l.worker(ctx, c, p, chk, opts, w)
		}
	}
	t.Cleanup(func() { l.Stop() })
	return l
}

// Stop ends the load and waits for the workers; it returns how many
// requests were sent.
func (l *Load) Stop() int64 {
	l.once.Do(func() {
		l.cancel()
		l.wg.Wait()
	})
	return l.sent.Load()
}

// Sent is how many requests have been sent so far.
func (l *Load) Sent() int64 { return l.sent.Load() }

func (l *Load) worker(ctx context.Context, c *Cluster, p *harness.Node, chk *Checker, opts LoadOptions, w int) {
	defer l.wg.Done()
	next := w * 7 // workers start at different requests
	for n := 0; ctx.Err() == nil && l.sent.Load() < opts.MaxRequests; n++ {
		healthy, epoch := p.Healthy()
		if !healthy {
			sleepCtx(ctx, 10*time.Millisecond)
			continue
		}
		// Every other request is the probe, so every generation a node
		// answers from is tied to its tree.
		i := 0
		if n%2 == 1 {
			next = (next + 1) % len(harness.Requests)
			i = next
		}
		r := Result{Node: p.ID, Req: i, Floor: chk.Floor(p.ID), Start: time.Now()}
		rctx, cancel := context.WithTimeout(ctx, DecisionTimeout)
		r.Decision, r.Err = c.Client.Evaluate(rctx, p, harness.Policy, harness.Requests[i])
		cancel()
		r.End = time.Now()
		l.sent.Add(1)
		if r.Err != nil && ctx.Err() != nil {
			return // stopped mid-request: not an answer
		}
		healthy, epoch2 := p.Healthy()
		r.Tolerated = !healthy || epoch2 != epoch
		chk.Record(r)
		if opts.Pause > 0 {
			sleepCtx(ctx, opts.Pause)
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
