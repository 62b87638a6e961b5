package harness

import (
	"errors"
	"fmt"
	"time"
)

// Promote writes tree k to c.Repo and asks a node (the first healthy one
// of via, or of the cluster) to reconcile now.
func (c *Cluster) Promote(k int, via ...*Node) {
	c.T.Helper()
	c.Repo.Write(k)
	c.Trigger(via...)
}

// Trigger asks a healthy node of via (of the cluster when empty) to
// reconcile now, retrying for up to LeaderTimeout (there is no leader
// during an election). Not getting 202 by then is a test error, though the
// poll would still pick the change up.
func (c *Cluster) Trigger(via ...*Node) {
	c.T.Helper()
	if len(via) == 0 {
		via = c.Nodes
	}
	err := Eventually(LeaderTimeout, func() error {
		for _, n := range via {
			if ok, _ := n.Healthy(); ok {
				return c.Client.Reconcile(n)
			}
		}
		return errors.New("no healthy node to ask")
	})
	if err != nil {
		c.T.Errorf("POST /v1/cluster:reconcile: %v (relying on the poll)", err)
	}
}

// WaitServing waits up to timeout until every node of nodes (all when
// nil) answers the probe from tree k at one and the same generation, and
// returns that generation.
func (c *Cluster) WaitServing(k int, nodes []*Node, timeout time.Duration) uint64 {
	c.T.Helper()
	if nodes == nil {
		nodes = c.Nodes
	}
	var gen uint64
	err := Eventually(timeout, func() error {
		var err error
		gen, err = c.ServingTree(k, nodes)
		return err
	})
	if err != nil {
		c.T.Fatalf("tree %d not served by %s after %v: %v", k, IDs(nodes), timeout, err)
	}
	return gen
}

// ServingTree checks once that every node of nodes answers the probe from
// tree k at one generation, and returns it.
func (c *Cluster) ServingTree(k int, nodes []*Node) (uint64, error) {
	var gen uint64
	for _, n := range nodes {
		d, err := c.Client.Probe(n)
		switch {
		case err != nil:
			return 0, err
		case d.Rule != ProbeRule(k):
			return 0, fmt.Errorf("%s answers with rule %q at generation %d", n.ID, d.Rule, d.Generation)
		case gen != 0 && d.Generation != gen:
			return 0, fmt.Errorf("%s serves tree %d at generation %d, another node at %d", n.ID, k, d.Generation, gen)
		}
		gen = d.Generation
	}
	return gen, nil
}
