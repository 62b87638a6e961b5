package system

import (
	"testing"
	"time"

	"github.com/policyrollout/reconciler/test/harness"
)

// TestLeaderKilledBetweenStageAndActivate kills the leader with SIGKILL
// while a generation is STAGED (a paused follower holds up its readiness):
// a new leader takes over, the tree ends active on the survivors (the
// staged generation activated, or superseded by a newer one), no node
// served it before activation, and the killed node catches up on restart.
func TestLeaderKilledBetweenStageAndActivate(t *testing.T) {
	c := startSystem(t, 3)
	chk := NewChecker()
	load := StartLoad(t, c, chk, DefaultLoad)
	leader := c.Leader(harness.LeaderTimeout)
	followers := c.Others(leader)
	paused, other := followers[0], followers[1]
	active := activeGeneration(t, c, leader)

	// Pause just before the tree changes (the poll may see it before the
	// trigger): the leader counts a node reachable for a few heartbeats,
	// so it waits for this one's Ready a while.
	c.Pause(paused)
	c.Promote(1, leader)
	staged, err := findGeneration(c, leader, active, harness.PromoteTimeout, inState("STAGED", "ACTIVE"))
	if err != nil {
		t.Fatalf("tree 1 was never staged: %v", err)
	}
	if staged.State != "STAGED" {
		t.Fatalf("generation %d was %s (ready: %v) before the leader could be killed: the leader did not wait for paused %s's readiness",
			staged.Generation, staged.State, staged.ReadyNodes, paused.ID)
	}
	t.Logf("generation %d STAGED on %s (ready: %v); killing the leader", staged.Generation, leader.ID, staged.ReadyNodes)
	c.Kill(leader)
	c.Resume(paused)

	survivors := []*harness.Node{paused, other}
	killedAt := time.Now()
	next := c.Leader(harness.LeaderTimeout, survivors...)
	t.Logf("new leader %s after %v", next.ID, time.Since(killedAt).Round(time.Millisecond))
	gen := c.WaitServing(1, survivors, harness.PromoteTimeout)
	t.Logf("tree 1 active on the survivors at generation %d, %v after the kill", gen, time.Since(killedAt).Round(time.Millisecond))
	checkStagedOutcome(t, c, staged.Generation, gen)

	c.Restart(leader)
	c.WaitServing(1, c.Nodes, harness.PromoteTimeout)
	c.WaitConverged(c.Nodes, gen, harness.PromoteTimeout)
	c.Promote(2)
	c.WaitServing(2, c.Nodes, harness.PromoteTimeout)
	finish(t, c, load, chk)
}

// checkStagedOutcome: the generation staged when the leader died is now
// ACTIVE (it is gen) or was superseded by gen, a newer one.
func checkStagedOutcome(t *testing.T, c *Cluster, staged, gen uint64) {
	t.Helper()
	g, err := c.generation(staged)
	if err != nil {
		t.Errorf("GET /v1/generations/%d: %v", staged, err)
		return
	}
	switch {
	case staged == gen && g.State == "ACTIVE":
	case staged < gen && g.State == "SUPERSEDED" && !g.Activated():
	default:
		t.Errorf("the generation staged at the kill (%d) is %s (activateTime %q); tree 1 is served at generation %d",
			staged, g.State, g.ActivateTime, gen)
	}
}

// TestFollowerPausedAcrossPromotion freezes a follower with SIGSTOP while
// a tree is promoted, then continues it: it converges to the generation
// the others serve, and no decision failed on the others meanwhile.
func TestFollowerPausedAcrossPromotion(t *testing.T) {
	c := startSystem(t, 3)
	chk := NewChecker()
	load := StartLoad(t, c, chk, DefaultLoad)
	leader := c.Leader(harness.LeaderTimeout)
	paused := c.Others(leader)[0]
	running := c.Others(paused)

	c.Pause(paused)
	start := time.Now()
	c.Promote(1, leader)
	err := harness.Eventually(10*time.Second, func() error { _, err := c.ServingTree(1, running); return err })
	if err != nil {
		t.Logf("with %s paused, tree 1 was not activated on %s within 10s (the leader waits for it): %v", paused.ID, harness.IDs(running), err)
	} else {
		t.Logf("with %s paused, tree 1 became active on %s after %v", paused.ID, harness.IDs(running), time.Since(start).Round(time.Millisecond))
	}
	c.Resume(paused)
	gen := c.WaitServing(1, c.Nodes, harness.PromoteTimeout)
	c.WaitConverged(c.Nodes, gen, harness.PromoteTimeout)
	t.Logf("%s converged on generation %d", paused.ID, gen)

	c.Promote(2)
	c.WaitServing(2, c.Nodes, harness.PromoteTimeout)
	finish(t, c, load, chk)
}

// TestLeaderPausedBetweenStageAndActivate freezes the leader with SIGSTOP
// while a generation is STAGED, lets the others elect a leader and promote
// another tree, then continues the old leader: it must step down, never
// activate its stale staged generation, and catch up.
func TestLeaderPausedBetweenStageAndActivate(t *testing.T) {
	c := startSystem(t, 3)
	chk := NewChecker()
	load := StartLoad(t, c, chk, DefaultLoad)
	leader := c.Leader(harness.LeaderTimeout)
	holder := c.Others(leader)[0] // paused to hold the generation STAGED
	survivors := c.Others(leader)
	active := activeGeneration(t, c, leader)

	c.Pause(holder)
	c.Promote(1, leader)
	staged, err := findGeneration(c, leader, active, harness.PromoteTimeout, inState("STAGED", "ACTIVE"))
	if err != nil {
		t.Fatalf("tree 1 was never staged: %v", err)
	}
	if staged.State != "STAGED" {
		t.Fatalf("generation %d was %s (ready: %v) before the leader could be paused: the leader did not wait for paused %s's readiness",
			staged.Generation, staged.State, staged.ReadyNodes, holder.ID)
	}
	c.Pause(leader)
	c.Resume(holder)
	next := c.Leader(harness.LeaderTimeout, survivors...)
	t.Logf("leader %s frozen with generation %d STAGED; new leader %s", leader.ID, staged.Generation, next.ID)
	c.WaitServing(1, survivors, harness.PromoteTimeout)
	c.Promote(2, survivors...)
	gen := c.WaitServing(2, survivors, harness.PromoteTimeout)

	c.Resume(leader)
	c.WaitServing(2, c.Nodes, harness.PromoteTimeout)
	c.WaitConverged(c.Nodes, gen, harness.PromoteTimeout)
	if s, err := c.Client.Status(leader); err == nil {
		t.Logf("old leader %s after SIGCONT: %s, leader %q", leader.ID, s.RaftState, s.Leader)
	}
	finish(t, c, load, chk)
}

// TestRestartRightAfterSwap kills a follower with SIGKILL the moment it
// answers from a new generation and restarts it while the other two are
// frozen, so it cannot learn anything from them: its first answers come
// from its own data directory and must not be older than the generation it
// served when it was killed. Eight rounds.
func TestRestartRightAfterSwap(t *testing.T) {
	c := startSystem(t, 3)
	chk := NewChecker()
	load := StartLoad(t, c, chk, DefaultLoad)
	leader := c.Leader(harness.LeaderTimeout)
	victim := c.Others(leader)[0]
	others := c.Others(victim)
	for k := 1; k <= 8; k++ {
		c.Promote(k, leader)
		gen := waitNodeServes(t, c, victim, k)
		c.Kill(victim)
		for _, p := range others {
			c.Pause(p)
		}
		c.Restart(victim)
		d := probe(t, c, victim)
		if d.Generation < gen || d.Rule != harness.ProbeRule(k) {
			t.Errorf("round %d: %s served generation %d (tree %d) when killed; after the restart it answers generation %d with %q",
				k, victim.ID, gen, k, d.Generation, d.Rule)
		}
		for _, p := range others {
			c.Resume(p)
		}
		c.WaitServing(k, c.Nodes, harness.PromoteTimeout)
		leader = c.Leader(harness.LeaderTimeout)
	}
	finish(t, c, load, chk)
}

// waitNodeServes polls p (every millisecond) until it answers from tree k,
// and returns the generation.
func waitNodeServes(t *testing.T, c *Cluster, p *harness.Node, k int) uint64 {
	t.Helper()
	deadline := time.Now().Add(harness.PromoteTimeout)
	for time.Now().Before(deadline) {
		if d, err := c.Client.Probe(p); err == nil && d.Rule == harness.ProbeRule(k) {
			return d.Generation
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("%s does not serve tree %d after %v", p.ID, k, harness.PromoteTimeout)
	return 0
}

// probe is one probe decision from p; a failure ends the test.
func probe(t *testing.T, c *Cluster, p *harness.Node) *harness.Decision {
	t.Helper()
	d, err := c.Client.Probe(p)
	if err != nil {
		t.Fatalf("%s: probe decision: %v", p.ID, err)
	}
	return d
}
