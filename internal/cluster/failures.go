package cluster

import "slices"

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

// checkFailures runs on the leader at every heartbeat tick: it logs each
// node that went past the heartbeat timeout once, and tells NodeFailed.
func (c *Cluster) checkFailures() {
	if !c.store.IsLeader() {
		return
	}
	failed, back := c.hb.sweep()
	for _, id := range failed {
		c.log.Warn("node missed its heartbeats: marked failed, not waited for", "node", id,
			"heartbeat_timeout", c.hb.window)
		if c.cfg.NodeFailed != nil {
			c.cfg.NodeFailed(id)
		}
	}
	for _, id := range back {
		c.log.Info("node heard from again", "node", id)
	}
	c.checkFollowing() // follow.go
}
