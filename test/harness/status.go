package harness

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"
)

// WaitLeader waits up to timeout until every running node names the same
// leader and that node, running, reports raftState Leader, and returns
// it; it fails the test if that does not happen. Killed and paused nodes
// are left out, so after killing the leader it waits for its successor.
func (c *Cluster) WaitLeader(timeout time.Duration) *Node {
	c.T.Helper()
	return c.Leader(timeout)
}

// Leader waits up to timeout until every node of among (the running,
// unpaused nodes when among is empty) names the same leader, which is one of them
// and reports raftState Leader, and returns it; it fails the test if that
// does not happen.
func (c *Cluster) Leader(timeout time.Duration, among ...*Node) *Node {
	c.T.Helper()
	var leader *Node
	err := Eventually(timeout, func() error {
		nodes := among
		if len(nodes) == 0 {
			nodes = c.Answering()
		}
		var err error
		leader, err = c.agreedLeader(nodes)
		return err
	})
	if err != nil {
		c.T.Fatalf("no leader among %s after %v: %v", IDs(among), timeout, err)
	}
	return leader
}

// agreedLeader checks once that nodes agree on a leader among them that
// says it leads.
func (c *Cluster) agreedLeader(nodes []*Node) (*Node, error) {
	if len(nodes) == 0 {
		return nil, errors.New("no node is running")
	}
	var id string
	for _, n := range nodes {
		s, err := c.Client.Status(n)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n.ID, err)
		}
		if s.Leader == "" || (id != "" && s.Leader != id) {
			return nil, fmt.Errorf("%s says the leader is %q (others: %q)", n.ID, s.Leader, id)
		}
		id = s.Leader
		if s.NodeID == id && s.RaftState != RaftLeader {
			return nil, fmt.Errorf("%s is named leader but is %s", n.ID, s.RaftState)
		}
	}
	for _, n := range nodes {
		if n.ID == id {
			return n, nil
		}
	}
	return nil, fmt.Errorf("the leader %q is not among %s", id, IDs(nodes))
}

// WaitReachable waits up to ReadyTimeout until the leader lists every node
// of nodes as reachable, so that it waits for their Ready on the next
// promotion.
func (c *Cluster) WaitReachable(nodes []*Node) {
	c.T.Helper()
	err := Eventually(ReadyTimeout, func() error {
		leader, err := c.agreedLeader(nodes)
		if err != nil {
			return err
		}
		s, err := c.Client.Status(leader)
		if err != nil {
			return err
		}
		for _, n := range nodes {
			if !slices.ContainsFunc(s.Nodes, func(ns NodeStatus) bool { return ns.ID == n.ID && ns.Reachable }) {
				return fmt.Errorf("leader %s does not list %s as reachable: %+v", leader.ID, n.ID, s.Nodes)
			}
		}
		return nil
	})
	if err != nil {
		c.T.Fatalf("nodes %s not all reachable after %v: %v", IDs(nodes), ReadyTimeout, err)
	}
}

// WaitConverged waits up to timeout until every node of nodes reports the
// same active generation (at least min), serves it, and shows the same
// policy etags in /v1/status; it returns one of the statuses.
func (c *Cluster) WaitConverged(nodes []*Node, min uint64, timeout time.Duration) *Status {
	c.T.Helper()
	var st *Status
	err := Eventually(timeout, func() error {
		var err error
		st, err = c.converged(nodes, min)
		return err
	})
	if err != nil {
		c.T.Fatalf("%s did not converge after %v: %v", IDs(nodes), timeout, err)
	}
	return st
}

func (c *Cluster) converged(nodes []*Node, min uint64) (*Status, error) {
	var first *Status
	for _, n := range nodes {
		s, err := c.Client.Status(n)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n.ID, err)
		}
		if s.ServedGeneration != 0 && s.ServedGeneration != s.ActiveGeneration {
			return nil, fmt.Errorf("%s: serves generation %d, active is %d", n.ID, s.ServedGeneration, s.ActiveGeneration)
		}
		if s.ActiveGeneration < min || len(s.Policies) == 0 {
			return nil, fmt.Errorf("%s: active generation %d (want >= %d), %d policies", n.ID, s.ActiveGeneration, min, len(s.Policies))
		}
		if first == nil {
			first = &s
			continue
		}
		if s.ActiveGeneration != first.ActiveGeneration || !maps.Equal(s.Etags(), first.Etags()) {
			return nil, fmt.Errorf("%s: generation %d etags %v; %s: generation %d etags %v",
				n.ID, s.ActiveGeneration, s.Etags(), first.NodeID, first.ActiveGeneration, first.Etags())
		}
	}
	return first, nil
}

// WaitActive waits up to timeout until every node of nodes (all when
// empty) reports gen as its active generation and serves it.
func (c *Cluster) WaitActive(gen uint64, timeout time.Duration, nodes ...*Node) {
	c.T.Helper()
	if len(nodes) == 0 {
		nodes = c.Nodes
	}
	for _, n := range nodes {
		// Served too: a node records the activation in its raft state a
		// moment before it swaps the bundle its decisions use.
		WaitFor(c.T, timeout, fmt.Sprintf("%s active and serving generation %d", n.ID, gen), func() error {
			s, err := c.Client.Status(n)
			if err == nil && (s.ActiveGeneration != gen || s.ServedGeneration != gen) {
				err = fmt.Errorf("active %d, serving %d", s.ActiveGeneration, s.ServedGeneration)
			}
			return err
		})
	}
}
