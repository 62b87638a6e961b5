package cluster

import (
	"context"
	"time"

	"github.com/policyrollout/reconciler/internal/raftstore"
)

// farewellTimeout bounds the last heartbeat a stopping node sends.
const farewellTimeout = time.Second

// NodeStatus is what a node reports about itself in every heartbeat:
// ONAP's PDP_STATUS (version, state, health, group, supported policy kinds,
// loaded policies and statistics). It stays in the leader's memory, as
// ONAP's PAP keeps PDP statistics, never in the raft log: it changes every
// heartbeat, and logging it would grow the log by nodes × 2 entries a
// second for numbers only the latest of which anyone reads.
type NodeStatus struct {
	Version string `json:"version"`
	// State is the state the node acts on (the replicated one as it has
	// applied it), or TERMINATED in the last heartbeat of a node that stops.
	State raftstore.NodeState `json:"state"`
	// Healthy is the result of the node's last health check (HEALTHY,
	// NOT_HEALTHY), "" before one ran.
	Healthy  string `json:"healthy,omitempty"`
	Group    string `json:"group"`
	Subgroup string `json:"subgroup"`
	// PolicyKinds are the policy kinds the node's engine supports.
	PolicyKinds []string `json:"supportedPolicyKinds"`
	// Generation is the generation the node serves; Etags its policies'.
	Generation uint64            `json:"generation"`
	Etags      map[string]string `json:"etags,omitempty"`
	Statistics Statistics        `json:"statistics"`
	// Settings are the node's decision-affecting settings, so that the
	// status can name how a node held PASSIVE differs from the leader.
	Settings Settings `json:"settings,omitempty"`
}

// Statistics are ONAP's PDP statistics, counted by the node since it
// started.
type Statistics struct {
	// PolicyDeployCount counts the generations this node compiled
	// (success + fail).
	PolicyDeployCount   uint64 `json:"policyDeployCount"`
	PolicyDeploySuccess uint64 `json:"policyDeploySuccessCount"`
	PolicyDeployFail    uint64 `json:"policyDeployFailCount"`
	// PolicyExecutedCount counts the decisions this node answered
	// (success + fail); a decision whose evaluation hit a run-time error
	// counts as failed.
	PolicyExecutedCount   uint64 `json:"policyExecutedCount"`
	PolicyExecutedSuccess uint64 `json:"policyExecutedSuccessCount"`
	PolicyExecutedFail    uint64 `json:"policyExecutedFailCount"`
}

// Add returns the sum of s and o (for the cluster's totals).
func (s Statistics) Add(o Statistics) Statistics {
	s.PolicyDeployCount += o.PolicyDeployCount
	s.PolicyDeploySuccess += o.PolicyDeploySuccess
	s.PolicyDeployFail += o.PolicyDeployFail
	s.PolicyExecutedCount += o.PolicyExecutedCount
	s.PolicyExecutedSuccess += o.PolicyExecutedSuccess
	s.PolicyExecutedFail += o.PolicyExecutedFail
	return s
}

// status is this node's PDP_STATUS for the next heartbeat, nil when the
// node gave no Status function.
func (vb *viewBuilder) status() *NodeStatus {
	if vb.statusFn == nil {
		return nil
	}
	s := vb.statusFn()
	return &s
}

// Farewell sends this node's last heartbeat, with state TERMINATED, so the
// leader stops waiting for it at once and shows it as stopped rather than
// as unreachable. Call it when the node stops normally; it gives up after
// a second (a leader that cannot be reached will find out by itself).
func (c *Cluster) Farewell(ctx context.Context, served uint64) {
	// The node's own call, like every heartbeat: with [tls] a heartbeat
	// that is neither local nor from the node's certificate is refused.
	ctx, cancel := context.WithTimeout(withLocal(ctx), farewellTimeout)
	defer cancel()
	st := c.views.status()
	if st == nil {
		st = &NodeStatus{}
	}
	st.State = raftstore.NodeTerminated
	if _, err := c.Heartbeat(ctx, Heartbeat{ID: c.cfg.NodeID, Generation: served, Status: st}); err != nil {
		c.log.Warn("last heartbeat (TERMINATED) not delivered", "error", err)
	}
}

// terminated reports whether id's last heartbeat said it stopped.
func (h *heartbeats) terminated(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	v, ok := h.seen[id]
	return ok && v.Status != nil && v.Status.State == raftstore.NodeTerminated
}
