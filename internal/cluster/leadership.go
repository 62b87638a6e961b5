package cluster

import (
	"context"
	"time"
)

// leadershipPoll bounds how long a missed LeaderCh signal goes unnoticed
// (raft drops signals its reader is not ready for).
const leadershipPoll = 250 * time.Millisecond

// RunLeadership runs lead while this node is the leader, until ctx ends:
// each time the node gains leadership it clears the heartbeat table and
// calls lead with a context that is cancelled when leadership is lost,
// and waits for lead to return before it can be called again. leaderCh
// is raft's leadership channel (a wake-up only; IsLeader is the truth).
func (c *Cluster) RunLeadership(ctx context.Context, leaderCh <-chan bool, lead func(context.Context)) {
	poll := time.NewTicker(leadershipPoll)
	defer poll.Stop()
	var run *leaderRun
	defer func() { run.stop() }()
	for {
		leading := c.store.IsLeader()
		switch {
		case leading && (run == nil || run.finished()):
			run.stop()
			c.hb.reset()
			c.log.Info("leading the cluster")
			run = startLeaderRun(ctx, lead)
		case !leading && run != nil:
			run.stop()
			run = nil
			c.log.Info("no longer leading the cluster")
		}
		select {
		case <-ctx.Done():
			return
		case <-leaderCh:
		case <-poll.C:
		}
	}
}

// leaderRun is one call of the leader function.
type leaderRun struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func startLeaderRun(ctx context.Context, lead func(context.Context)) *leaderRun {
	lctx, cancel := context.WithCancel(ctx)
	r := &leaderRun{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		lead(lctx)
	}()
	return r
}

func (r *leaderRun) finished() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// stop cancels the run and waits for it; nil-safe.
func (r *leaderRun) stop() {
	if r == nil {
		return
	}
	r.cancel()
	<-r.done
}
