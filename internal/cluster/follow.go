package cluster

import (
	"fmt"
	"maps"
	"slices"
	"time"
)

// DefaultFollowTimeout is how long a node may go without reaching an
// entry the leader had applied before the leader stops waiting for it to
// promote. hashicorp/raft backs off replication to a follower whose RPCs
// failed for up to 10.24 s (10 ms doubled ten times) before it tries
// again, so a healthy node back from a blip may look stalled that long;
// 15 s leaves a few heartbeats of margin above it. It is never longer
// than the staging timeout (a node behind is also a node not Ready).
const DefaultFollowTimeout = 15 * time.Second

// Lag is the leader's finding that a node does not follow the raft log:
// at Since the leader had applied LeaderIndex, and the node, still
// heartbeating, has not applied it for longer than the follow timeout (a
// full disk, a stalled apply, a raft port cut off while HTTP works).
type Lag struct {
	// Since is when the leader had applied LeaderIndex, on its clock.
	Since time.Time `json:"since"`
	// LeaderIndex is the entry the node has not reached since then.
	LeaderIndex uint64 `json:"leaderIndex"`
	// AppliedIndex is the node's applied index in its last heartbeat.
	AppliedIndex uint64 `json:"appliedIndex"`
}

// Reason says it in words, for the nodes view and /readyz.
func (l Lag) Reason() string {
	return fmt.Sprintf("not following the raft log since %s: applied index %d, the leader had applied %d by then",
		l.Since.UTC().Format(time.RFC3339), l.AppliedIndex, l.LeaderIndex)
}

// mark is the leader's applied index at a time, which a node following
// the log reaches within moments.
type mark struct {
	index uint64
	since time.Time
	heard time.Time // the node's last heartbeat with an applied index
}

// observeApplied takes a node's applied index from its heartbeat. When
// the node has reached its mark (or has none), the mark moves to the
// leader's applied index now; otherwise it stays, so its time is when
// the node stopped following, whatever happened to the generations since.
// A node back after a silence longer than the reachability window (a
// restart) starts with a new mark: it was unreachable, not stalled, and
// gets the follow timeout to catch up. A heartbeat without an index (an
// older build) is not judged.
func (h *heartbeats) observeApplied(id string, applied *uint64, leaderIndex uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if applied == nil {
		delete(h.marks, id)
		return
	}
	v := h.seen[id]
	v.AppliedIndex = *applied
	h.seen[id] = v
	now := h.now()
	m, ok := h.marks[id]
	if !ok || *applied >= m.index || now.Sub(m.heard) >= h.window {
		m = mark{index: leaderIndex, since: now}
	}
	m.heard = now
	h.marks[id] = m
}

// lagLocked is id's Lag when it has not reached its mark within the
// follow timeout, nil otherwise. h.mu must be held.
func (h *heartbeats) lagLocked(id string, now time.Time) *Lag {
	m, ok := h.marks[id]
	v := h.seen[id]
	if !ok || v.AppliedIndex >= m.index || now.Sub(m.since) < h.followTimeout {
		return nil
	}
	return &Lag{Since: m.since, LeaderIndex: m.index, AppliedIndex: v.AppliedIndex}
}

// lag is lagLocked for callers without the lock.
func (h *heartbeats) lag(id string) *Lag {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lagLocked(id, h.now())
}

// sweepLags returns the nodes that stopped following since the last
// sweep, and those that follow again, each once.
func (h *heartbeats) sweepLags() (lagging map[string]Lag, back []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	lagging = map[string]Lag{}
	for id := range h.seen {
		l := h.lagLocked(id, now)
		switch {
		case l != nil && !h.lagging[id]:
			h.lagging[id] = true
			lagging[id] = *l
		case l == nil && h.lagging[id]:
			delete(h.lagging, id)
			back = append(back, id)
		}
	}
	slices.Sort(back)
	return lagging, back
}

// checkFollowing runs with checkFailures on the leader: it logs once each
// node that stopped following the log, and once when it follows again.
func (w *failureWatch) checkFollowing() {
	lagging, back := w.hb.sweepLags()
	for _, id := range slices.Sorted(maps.Keys(lagging)) {
		l := lagging[id]
		w.log.Warn("node does not follow the raft log: promotions no longer wait for it, and it is out of rotation "+
			"until it catches up (a full disk, a stalled apply, or its raft port unreachable)", "node", id,
			"since", l.Since, "applied_index", l.AppliedIndex, "leader_index", l.LeaderIndex,
			"follow_timeout", w.hb.followTimeout)
	}
	for _, id := range back {
		w.log.Info("node follows the raft log again", "node", id)
	}
}
