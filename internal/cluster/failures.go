package cluster

import (
	"slices"

	"github.com/hashicorp/go-hclog"
)

// sweep marks failed the nodes whose last heartbeat is older than the
// window and returns those newly failed, and those heard from again since
// they were marked, each once. A node stays failed (and is logged and
// counted once) until its next heartbeat.
func (h *heartbeats) sweep() (failed, back []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	for id, v := range h.seen {
		late := now.Sub(v.LastHeartbeat) >= h.window
		terminated := v.Status != nil && v.Status.State == "TERMINATED"
		switch {
		case late && !terminated && !h.failed[id]:
			h.failed[id] = true
			failed = append(failed, id)
		case !late && h.failed[id]:
			delete(h.failed, id)
			back = append(back, id)
		}
	}
	slices.Sort(failed)
	slices.Sort(back)
	return failed, back
}

// leaderCheck is what the leader-only parts need of the store.
type leaderCheck interface {
	IsLeader() bool
}

// failureWatch, on the leader, logs and reports the nodes that stop
// heartbeating or stop following the raft log, once each.
type failureWatch struct {
	store      leaderCheck
	hb         *heartbeats
	log        hclog.Logger
	nodeFailed func(id string) // Config.NodeFailed, optional
}

// checkFailures runs on the leader at every heartbeat tick: it logs each
// node that went past the heartbeat timeout once, and tells NodeFailed.
func (w *failureWatch) checkFailures() {
	if !w.store.IsLeader() {
		return
	}
	failed, back := w.hb.sweep()
	for _, id := range failed {
		w.log.Warn("node missed its heartbeats: marked failed, not waited for", "node", id,
			"heartbeat_timeout", w.hb.window)
		if w.nodeFailed != nil {
			w.nodeFailed(id)
		}
	}
	for _, id := range back {
		w.log.Info("node heard from again", "node", id)
	}
	w.checkFollowing() // follow.go
}
