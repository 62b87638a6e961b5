package harness

import (
	"fmt"
	"time"
)

// RaftLeader is the raftState a node's /v1/status shows while it leads
// (raft's state name, internal/cluster Cluster.RaftState).
const RaftLeader = "Leader"

// Status is the part of a node's GET /v1/status the tests read.
type Status struct {
	NodeID string `json:"nodeId"`
	// Leader is the id (not the address) of the node this one believes
	// leads, "" when it knows none.
	Leader string `json:"leader"`
	// RaftState is raft's state name: Leader, Follower, Candidate or
	// Shutdown.
	RaftState        string `json:"raftState"`
	ActiveGeneration uint64 `json:"activeGeneration"`
	ServedGeneration uint64 `json:"servedGeneration"`
}

// Status GETs n's /v1/status.
func (c *Client) Status(n *Node) (Status, error) {
	var s Status
	err := c.GetJSON(n.Base()+"/v1/status", &s)
	return s, err
}

// WaitLeader waits up to timeout until every running node names the same
// leader and that node, running, reports raftState Leader, and returns
// it; it fails the test if that does not happen. Killed nodes are left
// out, so after killing the leader it waits for its successor.
func (c *Cluster) WaitLeader(timeout time.Duration) *Node {
	c.T.Helper()
	cl := NewClient(10*time.Second, 0)
	cl.Token = c.opts.APIToken
	var leader *Node
	err := Eventually(timeout, func() error {
		var err error
		leader, err = c.agreedLeader(cl)
		return err
	})
	if err != nil {
		c.T.Fatalf("no leader after %v: %v", timeout, err)
	}
	return leader
}

// agreedLeader checks once that the running nodes agree on a leader that
// says it leads.
func (c *Cluster) agreedLeader(cl *Client) (*Node, error) {
	var id string
	var leader *Node
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		s, err := cl.Status(n)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n.ID, err)
		}
		if s.Leader == "" || (id != "" && s.Leader != id) {
			return nil, fmt.Errorf("%s says the leader is %q", n.ID, s.Leader)
		}
		id = s.Leader
		if s.NodeID == id && s.RaftState == RaftLeader {
			leader = n
		}
	}
	if leader == nil {
		return nil, fmt.Errorf("the running nodes name %q, which is not running as leader", id)
	}
	return leader, nil
}
