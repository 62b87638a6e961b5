package cluster

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/policyrollout/reconciler/internal/raftstore"
)

// members changes the raft configuration and the node registry together,
// on the leader: joins, leaves, and the checks they need.
type members struct {
	store   Store
	probe   func(ctx context.Context, id, addr string) error // Config.Probe
	peerTLS bool
	admit   *admission
	log     hclog.Logger
}

// Join adds a node to the cluster through the leader: it checks the
// request, checks that the leader can reach the node's raft address, adds
// it to the raft configuration (voter or non-voter) and records it in the
// node registry. Joining again with the same id and raft address is a
// no-op apart from updating the HTTP address, which is how a restarted
// node rejoins. A different raft address for a known id (or a known raft
// address under another id) is refused with raftstore.ErrMembership and
// nothing changes.
func (c *Cluster) Join(ctx context.Context, req JoinRequest) (raftstore.Node, error) {
	var n raftstore.Node
	err := c.fwd.viaLeader(ctx, PathJoin, req, &n, func() error {
		var err error
		n, err = c.members.joinLocal(ctx, req)
		return err
	})
	return n, err
}

func (m *members) joinLocal(ctx context.Context, req JoinRequest) (raftstore.Node, error) {
	req = withDefaultGroups(req)
	if err := checkJoin(req); err != nil {
		return raftstore.Node{}, err
	}
	if err := checkOwn(ctx, req.ID, "join"); err != nil {
		return raftstore.Node{}, err
	}
	if err := m.checkAddressChange(ctx, req); err != nil {
		return raftstore.Node{}, err
	}
	if err := checkSettings(req.Settings); err != nil {
		return raftstore.Node{}, err
	}
	if old, ok := m.store.State().Nodes[req.ID]; ok && old.State != raftstore.NodeTerminated &&
		old.State != raftstore.NodePassive && (old.Group != req.Group || old.Subgroup != req.Subgroup) {
		// Refused before raft is touched; UpsertNode would refuse it too.
		return raftstore.Node{}, fmt.Errorf("%w: node %s is %s: set it PASSIVE before moving it from %s/%s to %s/%s",
			raftstore.ErrNodeState, req.ID, old.State, old.Group, old.Subgroup, req.Group, req.Subgroup)
	}
	servers, err := m.store.Servers()
	if err != nil {
		return raftstore.Node{}, err
	}
	exact, conflict := lookupServer(servers, req.ID, req.RaftAddr)
	if !exact && !conflict {
		if err := m.probe(ctx, req.ID, req.RaftAddr); err != nil {
			return raftstore.Node{}, fmt.Errorf("%w: %s at %s: %v: check node.raft_addr (and its advertised address) and the firewall",
				ErrRaftUnreachable, req.ID, req.RaftAddr, err)
		}
	}
	if _, err := m.admit.holdNewNode(ctx, req); err != nil { // consistency.go
		return raftstore.Node{}, err
	}
	if req.Voter {
		err = m.store.AddVoter(req.ID, req.RaftAddr)
	} else {
		err = m.store.AddNonvoter(req.ID, req.RaftAddr)
	}
	if err != nil {
		return raftstore.Node{}, err
	}
	voter, err := m.isVoter(req.ID)
	if err != nil {
		return raftstore.Node{}, err
	}
	_, err = m.store.Propose(ctx, &raftstore.UpsertNode{ID: req.ID, RaftAddr: req.RaftAddr, HTTPAddr: req.HTTPAddr,
		Group: req.Group, Subgroup: req.Subgroup, Voter: voter})
	if err != nil {
		return raftstore.Node{}, err
	}
	m.log.Info("node joined", "id", req.ID, "raft_addr", req.RaftAddr, "http_addr", req.HTTPAddr, "voter", voter)
	return m.store.State().Nodes[req.ID], nil
}

func withDefaultGroups(req JoinRequest) JoinRequest {
	if req.Group == "" {
		req.Group = "default"
	}
	if req.Subgroup == "" {
		req.Subgroup = defaultSubgroup
	}
	return req
}

func checkJoin(req JoinRequest) error {
	if req.ID == "" {
		return fmt.Errorf("%w: id is required", ErrBadRequest)
	}
	for _, a := range []struct{ name, addr string }{{"raftAddr", req.RaftAddr}, {"httpAddr", req.HTTPAddr}} {
		if _, _, err := net.SplitHostPort(a.addr); err != nil || a.addr == "" {
			return fmt.Errorf("%w: %s %q must be host:port", ErrBadRequest, a.name, a.addr)
		}
	}
	return nil
}

// lookupServer reports whether id is a member at addr (exact), or whether
// id or addr belong to another member (conflict, which AddVoter refuses).
func lookupServer(servers []raft.Server, id, addr string) (exact, conflict bool) {
	for _, s := range servers {
		sameID, sameAddr := string(s.ID) == id, string(s.Address) == addr
		switch {
		case sameID && sameAddr:
			return true, false
		case sameID || sameAddr:
			conflict = true
		}
	}
	return false, conflict
}

func (m *members) isVoter(id string) (bool, error) {
	servers, err := m.store.Servers()
	if err != nil {
		return false, err
	}
	for _, s := range servers {
		if string(s.ID) == id {
			return s.Suffrage == raft.Voter, nil
		}
	}
	return false, fmt.Errorf("%w: %s is not in the raft configuration after being added", raftstore.ErrMembership, id)
}

// Leave removes a node from the registry and the raft configuration,
// through the leader. Stopping a node (SIGTERM) never does this: a
// restarted node is the same member. Removing the last voter is refused.
func (c *Cluster) Leave(ctx context.Context, req LeaveRequest) error {
	return c.fwd.viaLeader(ctx, PathLeave, req, nil, func() error { return c.members.leaveLocal(ctx, req.ID) })
}

func (m *members) leaveLocal(ctx context.Context, id string) error {
	if id == "" {
		return fmt.Errorf("%w: id is required", ErrBadRequest)
	}
	if err := checkOwn(ctx, id, "leave"); err != nil {
		return err
	}
	servers, err := m.store.Servers()
	if err != nil {
		return err
	}
	member, voters := false, countVoters(servers)
	for _, s := range servers {
		if string(s.ID) != id {
			continue
		}
		member = true
		if s.Suffrage == raft.Voter && voters == 1 {
			return fmt.Errorf("%w: %s is the only voter; add another voter first", ErrLastVoter, id)
		}
	}
	_, registered := m.store.State().Nodes[id]
	if !registered && !member {
		return fmt.Errorf("%w: %s is not a member", raftstore.ErrUnknownNode, id)
	}
	// The registry first: the leader may be removing itself, and after
	// RemoveServer it can no longer propose.
	if registered {
		if _, err := m.store.Propose(ctx, &raftstore.RemoveNode{ID: id}); err != nil {
			return err
		}
	}
	if member {
		if err := m.store.RemoveServer(id); err != nil {
			return err
		}
	}
	m.log.Info("node left", "id", id)
	return nil
}

func countVoters(servers []raft.Server) int {
	n := 0
	for _, s := range servers {
		if s.Suffrage == raft.Voter {
			n++
		}
	}
	return n
}

// Register makes sure this node is a member at its current addresses,
// joining (or rejoining after an address change) through the leader or a
// join address. It retries with backoff while no leader can be reached and
// returns nil once registered, ctx.Err() when ctx ends, or the first
// permanent refusal (see Permanent), which the node cannot fix by waiting.
// On the leader the leadership hook (RegisterSelf) registers the node.
func (c *Cluster) Register(ctx context.Context, self JoinRequest) error {
	ctx = withLocal(ctx)
	self = withDefaultGroups(self)
	delay, waited := 100*time.Millisecond, time.Duration(0)
	for !c.members.registered(self) {
		if !c.store.IsLeader() {
			_, err := c.Join(ctx, self)
			switch {
			case err == nil:
				return nil
			case Permanent(err):
				return fmt.Errorf("join refused: %w", err)
			case waited >= 10*time.Second && waited-delay < 10*time.Second:
				c.log.Warn("still not a cluster member; retrying", "join", c.cfg.JoinAddrs, "error", err,
					"hint", "start the first node with --bootstrap and the others with --join ADDR of a member")
			default:
				c.log.Debug("join failed; retrying", "error", err)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		waited += delay
		delay = min(2*delay, 5*time.Second)
	}
	return nil
}

// registered reports whether the registry and the raft configuration
// already hold this node as it is now.
func (m *members) registered(self JoinRequest) bool {
	n, ok := m.store.State().Nodes[self.ID]
	if !ok || n.RaftAddr != self.RaftAddr || n.HTTPAddr != self.HTTPAddr || n.Group != self.Group ||
		n.Subgroup != self.Subgroup || n.State == raftstore.NodeTerminated {
		return false
	}
	servers, err := m.store.Servers()
	if err != nil {
		return false
	}
	exact, _ := lookupServer(servers, self.ID, self.RaftAddr)
	return exact
}

// RegisterSelf records the leader itself in the registry (UpsertNode via
// the same path as a join). The leadership hook calls it first: the
// command also serves as a barrier, since once it is applied every entry
// of earlier terms is applied too and the leader loop reads a current
// state.
func (c *Cluster) RegisterSelf(ctx context.Context, self JoinRequest) error {
	_, err := c.members.joinLocal(withLocal(ctx), self)
	return err
}
