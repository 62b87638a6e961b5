package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/policyrollout/reconciler/internal/raftstore"
)

// heartbeats is the leader's memory of who is alive. It is reset when this
// node gains leadership: a new leader knows nothing about liveness until
// the nodes' next heartbeats, and says so through settled.
type heartbeats struct {
	now    func() time.Time
	window time.Duration

	mu       sync.Mutex
	since    time.Time // when this node last became leader
	seen     map[string]NodeView
	payloads map[string]json.RawMessage // the last Heartbeat.Payload of each node
	failed   map[string]bool            // past the window, logged once (failures.go)

	followTimeout time.Duration   // a node past it without reaching its mark does not follow (follow.go)
	marks         map[string]mark // the leader's applied index each node has to reach
	lagging       map[string]bool // not following, logged once (follow.go)
}

func newHeartbeats(now func() time.Time, window time.Duration) *heartbeats {
	return &heartbeats{now: now, window: window, seen: map[string]NodeView{}, payloads: map[string]json.RawMessage{},
		failed: map[string]bool{}, followTimeout: DefaultFollowTimeout, marks: map[string]mark{}, lagging: map[string]bool{}}
}

// reset starts a leadership term with no heartbeats heard.
func (h *heartbeats) reset() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.since = h.now()
	h.seen = map[string]NodeView{}
	h.payloads = map[string]json.RawMessage{}
	h.failed = map[string]bool{}
	h.marks = map[string]mark{}
	h.lagging = map[string]bool{}
}

func (h *heartbeats) record(hb Heartbeat) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seen[hb.ID] = NodeView{LastHeartbeat: h.now(), Generation: hb.Generation, Status: hb.Status,
		AppliedIndex: h.seen[hb.ID].AppliedIndex}
	if hb.Payload != nil {
		h.payloads[hb.ID] = hb.Payload
	}
}

// payloadsWithin copies the payloads of the nodes heard from within ttl,
// dropping the others: a node that stopped beating stops counting.
func (h *heartbeats) payloadsWithin(ttl time.Duration) map[string]json.RawMessage {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	out := make(map[string]json.RawMessage, len(h.payloads))
	for id, p := range h.payloads {
		if now.Sub(h.seen[id].LastHeartbeat) > ttl {
			delete(h.payloads, id)
			continue
		}
		out[id] = p
	}
	return out
}

// settled reports whether this leader has led for a whole reachability
// window, so a node it has not heard from is really unreachable rather
// than not yet aware of the new leader.
func (h *heartbeats) settled() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.since.IsZero() && h.now().Sub(h.since) >= h.window
}

func (h *heartbeats) fresh(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	v, ok := h.seen[id]
	return ok && h.now().Sub(v.LastHeartbeat) < h.window
}

// snapshot copies the table with Reachable computed now.
func (h *heartbeats) snapshot() map[string]NodeView {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	out := make(map[string]NodeView, len(h.seen))
	for id, v := range h.seen {
		v.Reachable = now.Sub(v.LastHeartbeat) < h.window
		v.NotFollowing = h.lagLocked(id, now)
		out[id] = v
	}
	return out
}

// viewHolder keeps the last view a follower received from the leader.
type viewHolder struct{ p atomic.Pointer[View] }

func (v *viewHolder) load() View {
	if p := v.p.Load(); p != nil {
		return *p
	}
	return View{}
}

// viewBuilder makes what a heartbeat carries: the leader's view (its
// heartbeat table, the source's status and the piggyback merge) and this
// node's own PDP_STATUS and piggyback payload.
type viewBuilder struct {
	self     string
	now      func() time.Time
	interval time.Duration // Config.HeartbeatInterval
	source   func() SourceStatus
	statusFn func() NodeStatus
	hb       *heartbeats
	pb       atomic.Pointer[Piggyback]

	mergeMu  sync.Mutex // guards the cached piggyback merge
	mergeAt  time.Time
	mergeVal json.RawMessage
}

// Heartbeat records that a node is alive and answers with the leader's
// view; on a follower it forwards to the leader. Only registered nodes are
// recorded, which keeps the table as small as the registry.
func (c *Cluster) Heartbeat(ctx context.Context, hb Heartbeat) (View, error) {
	if err := checkSpeaker(ctx, c.cfg.PeerTLS, hb.ID, "heartbeat"); err != nil {
		return View{}, err
	}
	var v View
	err := c.fwd.viaLeader(ctx, PathHeartbeat, hb, &v, func() error {
		st := c.store.State()
		if _, ok := st.Nodes[hb.ID]; !ok && hb.ID != c.cfg.NodeID {
			return fmt.Errorf("%w: %s sent a heartbeat but is not registered: join it first",
				raftstore.ErrUnknownNode, hb.ID)
		}
		c.hb.record(hb)
		c.hb.observeApplied(hb.ID, hb.AppliedIndex, st.LastIndex) // follow.go
		v = c.views.leaderView()
		return nil
	})
	return v, err
}

// leaderView builds the view this node holds as leader.
func (vb *viewBuilder) leaderView() View {
	v := View{Leader: vb.self, Time: vb.now(), Nodes: vb.hb.snapshot()}
	if vb.source != nil {
		v.Source = vb.source()
	}
	if pb := vb.piggyback(); pb != nil {
		v.Payload = vb.merged(pb)
	}
	return v
}

// merged returns the piggyback merge, recomputed at most every half
// heartbeat interval: the leader answers one heartbeat per node per
// interval, and merging all payloads for each would grow with the square
// of the cluster size.
func (vb *viewBuilder) merged(pb Piggyback) json.RawMessage {
	vb.mergeMu.Lock()
	defer vb.mergeMu.Unlock()
	now := vb.now()
	if vb.mergeAt.IsZero() || now.Sub(vb.mergeAt) >= vb.interval/2 || now.Before(vb.mergeAt) {
		vb.mergeVal, vb.mergeAt = pb.Merge(vb.hb.payloadsWithin(PayloadTTL)), now
	}
	return vb.mergeVal
}

// View returns the leader's view: built now on the leader, the last one
// received with a heartbeat answer elsewhere (empty before the first).
func (c *Cluster) View() View {
	if c.store.IsLeader() {
		return c.views.leaderView()
	}
	return c.view.load()
}

// Required returns the nodes whose Ready the leader waits for before it
// activates a staged generation: the serving nodes, less those left
// behind (staging.go): the ones that reported they cannot load it, the
// ones that do not follow the raft log (follow.go), and, past the staging
// timeout, the ones that have not reported Ready while most others have.
func (c *Cluster) Required(st *raftstore.State) []string {
	return c.staging.dropLeftBehind(st, c.staging.serving(st)) // staging.go
}

// RunHeartbeats sends a heartbeat every interval until ctx ends. served
// returns the generation this node answers from. Failures are expected
// while there is no leader and are logged at debug level only.
func (c *Cluster) RunHeartbeats(ctx context.Context, served func() uint64) {
	t := time.NewTicker(c.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		c.beat(ctx, served())
		c.failures.checkFailures()
		c.holdSkewed(ctx) // version.go
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (c *Cluster) beat(ctx context.Context, served uint64) {
	ctx, cancel := context.WithTimeout(withLocal(ctx), 2*c.cfg.HeartbeatInterval)
	defer cancel()
	applied := c.store.State().LastIndex
	hb := Heartbeat{ID: c.cfg.NodeID, Generation: served, Status: c.views.status(), AppliedIndex: &applied}
	pb := c.views.piggyback()
	if pb != nil {
		hb.Payload = pb.Outgoing()
	}
	v, err := c.Heartbeat(ctx, hb)
	if err != nil {
		c.log.Debug("heartbeat not delivered", "error", err)
		return
	}
	if !c.store.IsLeader() {
		c.view.p.Store(&v)
	}
	if pb != nil && v.Payload != nil {
		pb.Adopt(v.Payload)
	}
}

// ResetLeadership clears the heartbeat table; call it when this node
// gains leadership.
func (c *Cluster) ResetLeadership() { c.hb.reset() }
