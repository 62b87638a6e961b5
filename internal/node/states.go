package node

import (
	"errors"
	"sync/atomic"

	"github.com/policyrollout/reconciler/internal/api"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// ErrTerminated is why a node stopped when an admin set it TERMINATED
// (POST /v1/nodes:changeState); `reconciler serve` exits 0 on it.
var ErrTerminated = errors.New("an admin set this node TERMINATED")

// nodeState is the state this node acts on: its entry in the replicated
// registry, as this node has applied it, kept in an atomic so the decision
// path reads it without touching the state (api.NodeState).
type nodeState struct {
	id string
	v  atomic.Pointer[raftstore.NodeState]
}

var _ api.NodeState = (*nodeState)(nil)

// NodeState returns the state, ACTIVE before this node is registered.
func (s *nodeState) NodeState() raftstore.NodeState {
	if p := s.v.Load(); p != nil {
		return *p
	}
	return raftstore.NodeActive
}

// follow takes this node's state from st; it reports the previous state
// and whether it changed.
func (s *nodeState) follow(st *raftstore.State) (from raftstore.NodeState, changed bool) {
	to := raftstore.NodeActive
	if n, ok := st.Nodes[s.id]; ok && n.State.Valid() {
		to = n.State
	}
	from = s.NodeState()
	if from == to {
		return from, false
	}
	s.v.Store(&to)
	return from, true
}

// frozen reports whether the loader must keep serving cur instead of
// switching to a newer active generation: a SAFE node stays on its
// generation until it leaves SAFE (it has one to stay on).
func (l *loader) frozen(cur *api.Snapshot, next uint64) bool {
	if l.state == nil || l.state.NodeState() != raftstore.NodeSafe || cur == nil {
		return false
	}
	if l.frozenAt != next {
		l.frozenAt = next
		l.log.Info("node is SAFE: staying on its generation", "generation", cur.Generation, "active", next)
	}
	return true
}

// followState updates the node's state from st and logs a change.
func (l *loader) followState(st *raftstore.State) {
	if l.state == nil {
		return
	}
	from, changed := l.state.follow(st)
	if !changed {
		return
	}
	to := l.state.NodeState()
	l.log.Info("node state changed", "from", from, "to", to)
	if to == raftstore.NodeTerminated && l.stop != nil {
		// A state read at start (Main.Run) never gets here: a node
		// restarted after TERMINATED rejoins as a new member instead.
		l.stop(ErrTerminated)
	}
}

// passive reports whether this node is PASSIVE: out of service, so a
// generation it cannot compile is its own problem, not the cluster's (a
// node held PASSIVE at join for a differing merge_default would otherwise
// put its errors on every generation; the leader does not count it).
func (l *loader) passive() bool {
	return l.state != nil && l.state.NodeState() == raftstore.NodePassive
}

// passiveFailed logs, once per generation, that a PASSIVE node does not
// report a generation it cannot compile.
func (l *loader) passiveFailed(n uint64, problems []string) {
	if l.heldBack == n {
		return
	}
	l.heldBack = n
	l.log.Error("staged generation does not compile on this node; not reported while the node is PASSIVE",
		"generation", n, "problems", len(problems), "first", problems[0])
}
