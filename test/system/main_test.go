package system

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/test/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }

// startSystem skips under -short (the only reason a system test skips)
// and starts an n-node cluster serving tree 0.
func startSystem(t *testing.T, n int) *Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("system test: starts real processes; skipped by -short")
	}
	return StartCluster(t, n)
}

// findGeneration waits until a generation numbered above after satisfies
// pred, as read from node, and returns it. It reads GET /v1/generations
// when the node offers it, else the next few numbers one by one.
func findGeneration(c *Cluster, p *harness.Node, after uint64, timeout time.Duration, pred func(*harness.Generation) bool) (*harness.Generation, error) {
	var found *harness.Generation
	err := harness.Eventually(timeout, func() error {
		gens, err := c.Client.Generations(p)
		if err != nil {
			gens = nil
			for n := after + 1; n <= after+3; n++ {
				if g, err := c.Client.Generation(p, n); err == nil {
					gens = append(gens, *g)
				}
			}
		}
		for i := range gens {
			if g := &gens[i]; g.Generation > after && pred(g) {
				found = g
				return nil
			}
		}
		return fmt.Errorf("no matching generation above %d among %d read from %s", after, len(gens), p.ID)
	})
	return found, err
}

func inState(states ...string) func(*harness.Generation) bool {
	return func(g *harness.Generation) bool {
		for _, s := range states {
			if g.State == s {
				return true
			}
		}
		return false
	}
}

// activeGeneration is the active generation p reports in /v1/status.
func activeGeneration(t *testing.T, c *Cluster, p *harness.Node) uint64 {
	t.Helper()
	s, err := c.Client.Status(p)
	if err != nil {
		t.Fatalf("%s: GET /v1/status: %v", p.ID, err)
	}
	return s.ActiveGeneration
}

// finish stops the load, checks that the healed cluster agrees (same
// active generation, same etags, served = active on every node) and checks
// the invariants of what the load saw.
func finish(t *testing.T, c *Cluster, load *Load, chk *Checker) {
	t.Helper()
	n := load.Stop()
	if n == 0 {
		t.Error("the load sent no request")
	}
	st := c.WaitConverged(c.Nodes, 1, harness.PromoteTimeout)
	t.Logf("healed: %d nodes at generation %d, etags %v", len(c.Nodes), st.ActiveGeneration, st.Etags())
	checkPinned(t, c, st.ActiveGeneration)
	chk.Verify(t, c)
}

// checkPinned checks that every node answers decisions pinned to the
// active generation and to the one active before it (CONTRACT §4 keeps
// both), each from the same tree on every node.
func checkPinned(t *testing.T, c *Cluster, active uint64) {
	t.Helper()
	gens := []uint64{active}
	if prev := previousActive(c, active); prev != 0 {
		gens = append(gens, prev)
	}
	for _, gen := range gens {
		rules := map[string]string{}
		for _, p := range c.Nodes {
			d, err := c.Client.EvaluatePinned(p, gen, harness.Policy, harness.ProbeRequest)
			if err != nil {
				t.Errorf("%s: decision pinned to generation %d: %v", p.ID, gen, err)
				continue
			}
			if d.Generation != gen {
				t.Errorf("%s: decision pinned to generation %d answered from generation %d", p.ID, gen, d.Generation)
			}
			rules[p.ID] = d.Rule
		}
		if vals := slices.Compact(slices.Sorted(maps.Values(rules))); len(vals) > 1 {
			t.Errorf("decisions pinned to generation %d differ between nodes: %v", gen, rules)
		}
	}
}

// previousActive is the generation that was active before active, 0 if
// none or unknown.
func previousActive(c *Cluster, active uint64) uint64 {
	var prev uint64
	for _, p := range c.Nodes {
		gens, err := c.Client.Generations(p)
		if err != nil {
			continue
		}
		for _, g := range gens {
			if n := g.Generation; n < active && n > prev && !g.ActivatedAt().IsZero() {
				prev = n
			}
		}
		return prev
	}
	return 0
}
