package system

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/test/harness"
)

// TestPromotionRightAfterJoin freezes a node (SIGSTOP) the moment the
// leader has registered it, and promotes a tree at once. The leader has
// known the node for less than one heartbeat, so it has no grounds to call
// it unreachable: like a new leader (which requires every registered node
// for one reachability window), it must wait for the node's Ready for a
// window before activating without it. Activating within a second of the
// registration means it skipped a member it had just added.
func TestPromotionRightAfterJoin(t *testing.T) {
	if testing.Short() {
		t.Skip("system test: starts real processes; skipped by -short")
	}
	c := NewCluster(t, 3)
	first, second, joiner := c.Nodes[0], c.Nodes[1], c.Nodes[2]
	for _, p := range []*harness.Node{first, second} {
		c.Start(p)
		c.WaitReady(p)
	}
	c.WaitServing(0, []*harness.Node{first, second}, harness.ReadyTimeout)
	c.WaitReachable([]*harness.Node{first, second})
	leader := c.Leader(harness.LeaderTimeout, first, second)
	// A leader requires every registered node during its first
	// reachability window (1.5 s); past it, only the ones it heard from.
	time.Sleep(2 * time.Second)
	c.Start(joiner)
	registered := waitRegistered(t, c, leader, joiner)
	c.Pause(joiner) // two of three voters keep the quorum
	c.Promote(1, leader)
	gen := c.WaitServing(1, []*harness.Node{first, second}, harness.PromoteTimeout)
	g, err := c.generation(gen)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s registered at %s; generation %d created %s, activated %s, readyNodes %v",
		joiner.ID, stamp(registered), gen, g.CreateTime, g.ActivateTime, g.ReadyNodes)
	if !slices.Contains(g.ReadyNodes, joiner.ID) && g.ActivatedAt().Sub(registered) < time.Second {
		t.Errorf("generation %d was activated %v after %s was registered, without its Ready and without waiting for a heartbeat window",
			gen, g.ActivatedAt().Sub(registered).Round(time.Millisecond), joiner.ID)
	}
	c.Resume(joiner)
	c.WaitReady(joiner)
	c.WaitServing(1, c.Nodes, harness.PromoteTimeout)
}

// waitRegistered polls leader's status until it lists p, and returns when
// the leader registered it, by the leader's clock: the test's own clock
// would see it late on a loaded machine and blame the leader for it.
func waitRegistered(t *testing.T, c *Cluster, leader, p *harness.Node) time.Time {
	t.Helper()
	var joined time.Time
	err := harness.Eventually(harness.ReadyTimeout, func() error {
		s, err := c.Client.Status(leader)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(s.Nodes, func(n harness.NodeStatus) bool { return n.ID == p.ID })
		if i < 0 || s.Nodes[i].JoinTime.IsZero() {
			return fmt.Errorf("%s not registered yet", p.ID)
		}
		joined = s.Nodes[i].JoinTime
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return joined
}
