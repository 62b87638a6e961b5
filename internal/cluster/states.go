package cluster

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"unicode/utf8"

	"github.com/policyrollout/reconciler/internal/raftstore"
)

// maxScopeLen bounds the names of a scope (node id, group, subgroup).
const maxScopeLen = 128

// ChangeStateRequest is the body of POST /v1/nodes:changeState: a state
// and its scope, as ONAP's PDP_STATE_CHANGE scopes it: one node by name,
// every node of a group, or every node of a group's subgroup.
type ChangeStateRequest struct {
	State    raftstore.NodeState `json:"state"`
	Group    string              `json:"group,omitempty"`
	Subgroup string              `json:"subgroup,omitempty"`
	Name     string              `json:"name,omitempty"`
}

// StateChange is one node a changeState changed.
type StateChange struct {
	ID   string              `json:"id"`
	From raftstore.NodeState `json:"from"`
	To   raftstore.NodeState `json:"to"`
}

// ChangeStateResponse answers a changeState: the nodes it changed, and the
// nodes in scope that already were in the state.
type ChangeStateResponse struct {
	Changed   []StateChange `json:"changed"`
	Unchanged []string      `json:"unchanged"`
}

// Validate checks the request on its own: a settable state and exactly
// one kind of scope.
func (r ChangeStateRequest) Validate() error {
	switch r.State {
	case raftstore.NodeActive, raftstore.NodeTest, raftstore.NodeSafe, raftstore.NodePassive, raftstore.NodeTerminated:
	default:
		return fmt.Errorf("%w: state %q: use ACTIVE, TEST, SAFE, PASSIVE or TERMINATED", ErrBadRequest, r.State)
	}
	for _, s := range []string{r.Name, r.Group, r.Subgroup} {
		if len(s) > maxScopeLen || !utf8.ValidString(s) {
			return fmt.Errorf("%w: a name, group or subgroup is at most %d bytes of UTF-8", ErrBadRequest, maxScopeLen)
		}
	}
	switch {
	case r.Name != "" && (r.Group != "" || r.Subgroup != ""):
		return fmt.Errorf("%w: give a node's name, or a group (and a subgroup), not both", ErrBadRequest)
	case r.Name == "" && r.Group == "":
		return fmt.Errorf("%w: give a scope: name, group, or group and subgroup", ErrBadRequest)
	}
	return nil
}

// inScope lists, sorted, the registered nodes r's scope names.
func (r ChangeStateRequest) inScope(st *raftstore.State) ([]string, error) {
	if r.Name != "" {
		if _, ok := st.Nodes[r.Name]; !ok {
			return nil, fmt.Errorf("%w: no node %q", raftstore.ErrUnknownNode, r.Name)
		}
		return []string{r.Name}, nil
	}
	var ids []string
	for _, id := range slices.Sorted(maps.Keys(st.Nodes)) {
		n := st.Nodes[id]
		if n.Group == r.Group && (r.Subgroup == "" || n.Subgroup == r.Subgroup) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("%w: no node in group %q subgroup %q", raftstore.ErrUnknownNode, r.Group, r.Subgroup)
	}
	return ids, nil
}

// ChangeState sets, on the leader, the state of every node in the
// request's scope, one replicated SetNodeState per node that is not in
// the state yet. A failure stops at the node that failed; the nodes
// changed before it stay changed (each change stands on its own).
//
// Another node answers raftstore.ErrNotLeader after checking the request:
// the API forwards the call through OnLeader, as every write, so that the
// node a client wrote through waits to show what the leader wrote. Losing
// the lead halfway is ErrNotLeader too: forwarded again, the changes made
// already are "unchanged" there.
func (c *Cluster) ChangeState(ctx context.Context, req ChangeStateRequest) (ChangeStateResponse, error) {
	if err := req.Validate(); err != nil {
		return ChangeStateResponse{}, err
	}
	if !c.store.IsLeader() {
		// Its own view of the scope may be stale: it must not answer
		// "unchanged" for a state the leader already changed back.
		return ChangeStateResponse{}, fmt.Errorf("%w: %s does not lead", raftstore.ErrNotLeader, c.cfg.NodeID)
	}
	return c.changeState(ctx, req)
}

func (c *Cluster) changeState(ctx context.Context, req ChangeStateRequest) (ChangeStateResponse, error) {
	st := c.store.State()
	ids, err := req.inScope(st)
	if err != nil {
		return ChangeStateResponse{}, err
	}
	res := ChangeStateResponse{Changed: []StateChange{}, Unchanged: []string{}}
	for _, id := range ids {
		from := st.Nodes[id].State
		if from == req.State {
			res.Unchanged = append(res.Unchanged, id)
			continue
		}
		if _, err := c.store.Propose(ctx, &raftstore.SetNodeState{ID: id, State: req.State}); err != nil {
			return res, fmt.Errorf("set %s %s: %w", id, req.State, err)
		}
		res.Changed = append(res.Changed, StateChange{ID: id, From: from, To: req.State})
		c.log.Info("node state changed", "node", id, "from", from, "to", req.State)
	}
	return res, nil
}

// waitsFor reports whether the leader waits for a node in state s before
// it activates a generation: not for SAFE (frozen on its generation on
// purpose), PASSIVE (out of service) or TERMINATED nodes.
func waitsFor(s raftstore.NodeState) bool {
	return s == raftstore.NodeActive || s == raftstore.NodeTest || s == ""
}
