package system

import (
	"testing"
	"time"

	"github.com/policyrollout/reconciler/test/harness"
)

// TestRestartAllNodes kills every node with SIGKILL and starts them again
// on their data directories. A node started alone, with no leader
// possible, is ready and serves the last active generation at once; the
// full cluster then elects a leader and promotes again; finally every
// node stops gracefully on SIGTERM with exit status 0.
func TestRestartAllNodes(t *testing.T) {
	restartAllNodes(t, startSystem(t, 3))
}

// TestRestartAllNodesTLS is TestRestartAllNodes with mutual TLS between
// the nodes: raft and the node-to-node calls reconnect over TLS after the
// restarts, and a graceful stop closes the node port too.
func TestRestartAllNodesTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("system test: starts real processes; skipped by -short")
	}
	restartAllNodes(t, StartTLSCluster(t, 3))
}

func restartAllNodes(t *testing.T, c *Cluster) {
	chk := NewChecker()
	load := StartLoad(t, c, chk, DefaultLoad)
	c.Promote(1)
	c.WaitServing(1, c.Nodes, harness.PromoteTimeout)
	c.Promote(2)
	last := c.WaitServing(2, c.Nodes, harness.PromoteTimeout)
	c.WaitConverged(c.Nodes, last, harness.PromoteTimeout)

	for _, p := range c.Nodes {
		c.Kill(p)
	}
	alone := c.Nodes[1] // a node that joined, not the one that bootstrapped
	c.Restart(alone)
	if gen := c.WaitServing(2, []*harness.Node{alone}, 5*time.Second); gen != last {
		t.Errorf("%s restarted alone serves generation %d, want the last active %d", alone.ID, gen, last)
	}
	if s, err := c.Client.Status(alone); err != nil {
		t.Errorf("%s alone: GET /v1/status: %v", alone.ID, err)
	} else if s.RaftState == "Leader" || s.ActiveGeneration != last {
		t.Errorf("%s alone: raftState %s, activeGeneration %d (want no leader, generation %d)", alone.ID, s.RaftState, s.ActiveGeneration, last)
	} else {
		t.Logf("%s restarted alone: %s, leader %q, serving generation %d", alone.ID, s.RaftState, s.Leader, last)
	}

	for _, p := range c.Others(alone) {
		c.Start(p)
	}
	for _, p := range c.Others(alone) {
		c.WaitReady(p)
		if gen := c.WaitServing(2, []*harness.Node{p}, 5*time.Second); gen != last {
			t.Errorf("%s restarted serves generation %d, want %d", p.ID, gen, last)
		}
	}
	c.Leader(harness.LeaderTimeout)
	c.Promote(3)
	gen := c.WaitServing(3, c.Nodes, harness.PromoteTimeout)
	c.WaitConverged(c.Nodes, gen, harness.PromoteTimeout)
	finish(t, c, load, chk)

	for _, p := range c.Nodes {
		if err := p.Terminate(15 * time.Second); err != nil {
			t.Errorf("graceful stop: %v", err)
		} else if err := p.ExitErr(); err != nil {
			t.Errorf("%s: after SIGTERM: %v, want exit status 0", p.ID, err)
		}
	}
}
