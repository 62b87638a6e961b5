package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/policyrollout/reconciler/internal/errs"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// The raft operator calls (Consul's `operator raft list-peers |
// remove-peer | transfer-leader`): each runs on the leader, whose raft
// configuration is the one that counts, and answers raftstore.ErrNotLeader
// elsewhere so that the API forwards it (OnLeader).

// ErrPeerAlive refuses to remove a voter the leader still hears from:
// removing a live voter is a membership change (`:leave`), not repair.
var ErrPeerAlive = errs.Sentinel(errs.FailedPrecondition, "the peer is alive")

// transferWait bounds how long TransferLeadership waits to see the new
// leader after raft started the election.
const transferWait = 5 * time.Second

// RaftPeer is one server of the raft configuration.
type RaftPeer struct {
	ID       string `json:"id"`
	Address  string `json:"address"`
	Suffrage string `json:"suffrage"` // VOTER, NONVOTER or STAGING
	Leader   bool   `json:"leader"`
	// Reachable: the leader heard a heartbeat recently (always true for
	// the leader itself).
	Reachable bool `json:"reachable"`
}

// RaftPeersResponse is GET /v1/raft/peers.
type RaftPeersResponse struct {
	Leader string     `json:"leader"`
	Peers  []RaftPeer `json:"peers"`
}

// TransferRequest is POST /v1/raft:transferLeadership; ID "" lets raft
// pick the most up-to-date voter.
type TransferRequest struct {
	ID string `json:"id"`
}

// TransferResponse names the leader after the transfer.
type TransferResponse struct {
	From   string `json:"from"`
	Leader string `json:"leader"`
}

// RemovePeerRequest is POST /v1/raft:removePeer.
type RemovePeerRequest struct {
	ID string `json:"id"`
	// Force removes a voter the leader still hears from.
	Force bool `json:"force"`
}

// leadershipTransferer is the part of the store that hands leadership on.
type leadershipTransferer interface {
	TransferLeadership(id string) error
}

// RaftPeers lists the leader's raft configuration.
func (c *Cluster) RaftPeers(ctx context.Context) (RaftPeersResponse, error) {
	if !c.store.IsLeader() {
		return RaftPeersResponse{}, raftstore.ErrNotLeader
	}
	servers, err := c.store.Servers()
	if err != nil {
		return RaftPeersResponse{}, err
	}
	view := c.View()
	out := RaftPeersResponse{Leader: c.cfg.NodeID, Peers: make([]RaftPeer, 0, len(servers))}
	for _, s := range servers {
		id := string(s.ID)
		out.Peers = append(out.Peers, RaftPeer{ID: id, Address: string(s.Address),
			Suffrage: strings.ToUpper(s.Suffrage.String()), Leader: id == c.cfg.NodeID,
			Reachable: id == c.cfg.NodeID || view.Nodes[id].Reachable})
	}
	return out, nil
}

// TransferLeadership hands leadership to req.ID (a voter other than this
// node) or, for "", to the voter raft finds most up to date, and waits
// (bounded) until another node leads.
func (c *Cluster) TransferLeadership(ctx context.Context, req TransferRequest) (TransferResponse, error) {
	if !c.store.IsLeader() {
		return TransferResponse{}, raftstore.ErrNotLeader
	}
	t, ok := c.store.(leadershipTransferer)
	if !ok {
		return TransferResponse{}, errors.New("this node's store cannot transfer leadership")
	}
	if req.ID == c.cfg.NodeID {
		return TransferResponse{}, fmt.Errorf("%w: %s leads already", ErrBadRequest, req.ID)
	}
	if req.ID != "" {
		if err := c.members.checkVoter(req.ID); err != nil {
			return TransferResponse{}, err
		}
	}
	if err := t.TransferLeadership(req.ID); err != nil {
		return TransferResponse{}, err
	}
	res := TransferResponse{From: c.cfg.NodeID}
	ctx, cancel := context.WithTimeout(ctx, transferWait)
	defer cancel()
	for {
		if id, _ := c.store.Leader(); id != "" && id != c.cfg.NodeID {
			res.Leader = id
			c.log.Info("leadership transferred", "to", id)
			return res, nil
		}
		select {
		case <-ctx.Done():
			return res, nil // raft moved on; the new leader is not known here yet
		case <-time.After(leaderPoll):
		}
	}
}

// checkVoter refuses an id that is not a voter of the configuration.
func (m *members) checkVoter(id string) error {
	servers, err := m.store.Servers()
	if err != nil {
		return err
	}
	for _, s := range servers {
		if string(s.ID) == id {
			if s.Suffrage != raft.Voter {
				return fmt.Errorf("%w: %s is a %s, not a voter", ErrBadRequest, id, s.Suffrage)
			}
			return nil
		}
	}
	return fmt.Errorf("%w: %s is not in the raft configuration", raftstore.ErrUnknownNode, id)
}

// RemovePeer removes a dead member from the raft configuration and the
// node registry (what `:leave` does), refusing the leader itself and,
// unless req.Force, a member that is alive: one the leader heard a
// heartbeat from recently, or whose raft address answers a probe (a new
// leader has heard no heartbeat yet).
func (c *Cluster) RemovePeer(ctx context.Context, req RemovePeerRequest) error {
	if !c.store.IsLeader() {
		return raftstore.ErrNotLeader
	}
	switch {
	case req.ID == "":
		return fmt.Errorf("%w: id is required", ErrBadRequest)
	case req.ID == c.cfg.NodeID:
		return fmt.Errorf("%w: %s is the leader: transfer leadership first", ErrBadRequest, req.ID)
	}
	if !req.Force {
		if err := c.checkDead(ctx, req.ID); err != nil {
			return err
		}
	}
	return c.members.leaveLocal(ctx, req.ID)
}

// checkDead refuses a member the leader hears from or reaches.
func (c *Cluster) checkDead(ctx context.Context, id string) error {
	if c.View().Nodes[id].Reachable {
		return fmt.Errorf("%w: the leader heard a heartbeat from %s recently: stop it first, or use :leave", ErrPeerAlive, id)
	}
	servers, err := c.store.Servers()
	if err != nil {
		return err
	}
	for _, s := range servers {
		if string(s.ID) == id && c.cfg.Probe(ctx, id, string(s.Address)) == nil {
			return fmt.Errorf("%w: %s answers at %s: stop it first, or use :leave", ErrPeerAlive, id, s.Address)
		}
	}
	return nil
}
