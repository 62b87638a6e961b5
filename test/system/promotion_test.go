package system

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/test/harness"
)

// TestPromotionHappyPath promotes five trees on a healthy 3-node cluster
// under load: each becomes active on every node at one generation, numbers
// grow, every node is Ready before activation, the unchanged policy keeps
// its etag, and no decision fails or goes back.
func TestPromotionHappyPath(t *testing.T) {
	c := startSystem(t, 3)
	chk := NewChecker()
	load := StartLoad(t, c, chk, DefaultLoad)
	first := c.WaitConverged(c.Nodes, 1, harness.ReadyTimeout)
	prev := first.ActiveGeneration
	for k := 1; k <= 5; k++ {
		start := time.Now()
		c.Promote(k)
		gen := c.WaitServing(k, c.Nodes, harness.PromoteTimeout)
		t.Logf("tree %d active on all nodes at generation %d after %v", k, gen, time.Since(start).Round(time.Millisecond))
		if gen <= prev {
			t.Errorf("tree %d got generation %d, not above %d", k, gen, prev)
		}
		st := c.WaitConverged(c.Nodes, gen, harness.PromoteTimeout)
		checkReadyNodes(t, c, gen)
		if was, is := first.Etag(harness.StablePolicy), st.Etag(harness.StablePolicy); was == "" || was != is {
			t.Errorf("the etag of the unchanged policy %s changed: %q -> %q", harness.StablePolicy, was, is)
		}
		if was, is := first.Etag(harness.Policy), st.Etag(harness.Policy); was == is {
			t.Errorf("the etag of policy %s did not change with tree %d: %q", harness.Policy, k, is)
		}
		prev = gen
		time.Sleep(300 * time.Millisecond) // let the load see this generation
	}
	finish(t, c, load, chk)
}

// checkReadyNodes checks that generation gen is ACTIVE and lists every node
// of c as Ready.
func checkReadyNodes(t *testing.T, c *Cluster, gen uint64) {
	t.Helper()
	g, err := c.generation(gen)
	if err != nil {
		t.Errorf("GET /v1/generations/%d: %v", gen, err)
		return
	}
	if g.State != "ACTIVE" {
		t.Errorf("generation %d is %s, want ACTIVE", gen, g.State)
	}
	for _, p := range c.Nodes {
		if !slices.Contains(g.ReadyNodes, p.ID) {
			t.Errorf("generation %d: readyNodes %v lacks %s", gen, g.ReadyNodes, p.ID)
		}
	}
}

// TestInvalidTreeKeepsServing pushes a tree with a CEL typo: its
// generation is INVALID, never activated, the previous generation keeps
// serving on every node, status says Invalid, and the next valid tree is
// promoted as usual.
func TestInvalidTreeKeepsServing(t *testing.T) {
	c := startSystem(t, 3)
	chk := NewChecker()
	load := StartLoad(t, c, chk, DefaultLoad)
	c.Promote(1)
	good := c.WaitServing(1, c.Nodes, harness.PromoteTimeout)

	c.Repo.WriteInvalid()
	c.Trigger()
	bad, err := findGeneration(c, c.Nodes[0], good, harness.PromoteTimeout, inState("INVALID"))
	if err != nil {
		t.Fatalf("the invalid tree never made an INVALID generation: %v", err)
	}
	t.Logf("generation %d is INVALID: errors %q", bad.Generation, bad.Errors)
	if !strings.Contains(strings.Join(bad.Errors, "\n"), "pth") {
		t.Errorf("generation %d: errors %q do not name the typo request.pth", bad.Generation, bad.Errors)
	}
	// Several polls later, every node still serves the previous generation.
	time.Sleep(2500 * time.Millisecond)
	if gen := c.WaitServing(1, c.Nodes, time.Second); gen != good {
		t.Errorf("after the invalid tree, the nodes serve generation %d, want %d", gen, good)
	}
	checkInvalidCondition(t, c)

	c.Promote(2)
	next := c.WaitServing(2, c.Nodes, harness.PromoteTimeout)
	if next <= bad.Generation {
		t.Errorf("the tree after the invalid one got generation %d, not above %d", next, bad.Generation)
	}
	finish(t, c, load, chk)
}

// checkInvalidCondition checks that every node's status shows the Invalid
// condition on the policy whose tree failed.
func checkInvalidCondition(t *testing.T, c *Cluster) {
	t.Helper()
	for _, p := range c.Nodes {
		s, err := c.Client.Status(p)
		if err != nil {
			t.Errorf("%s: GET /v1/status: %v", p.ID, err)
			continue
		}
		found := false
		for _, ps := range s.Policies {
			for _, cond := range ps.Conditions {
				found = found || (strings.HasSuffix(ps.Name, harness.Policy) && (cond.Type == "Invalid" || strings.Contains(cond.Message, "Invalid")))
			}
		}
		if !found {
			t.Errorf("%s: status of policy %s has no Invalid condition: %+v", p.ID, harness.Policy, s.Policies)
		}
	}
}
