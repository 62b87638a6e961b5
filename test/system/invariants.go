package system

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/test/harness"
)

// Result is one decision request as the load saw it.
type Result struct {
	Node       string
	Req        int // index into harness.Requests
	Floor      uint64
	Start, End time.Time
	Decision   *harness.Decision
	Err        error
	// Tolerated: the node was paused, killed or restarting during the
	// request, so a failure is expected.
	Tolerated bool
}

type outcome struct {
	node     string
	gen      uint64
	req      int
	decision string
	rule     string
}

// Checker holds the invariants of the answers the load saw:
//   - a node's generation never decreases (Floor: the highest generation
//     it had answered with before the request was sent);
//   - every generation served was activated, and served only after its
//     activateTime;
//   - at one generation, a request gets the same decision and rule from
//     every node, and that is what the tree of that generation says;
//   - a healthy node never fails a decision, promotions and swaps included.
type Checker struct {
	mu         sync.Mutex
	floors     map[string]uint64
	firstSeen  map[outcome]time.Time
	ok         map[string]int64
	tolerated  map[string]int64
	failed     map[string]int64
	slowest    map[string]time.Duration
	violations []violation
}

// NewChecker returns an empty Checker.
func NewChecker() *Checker {
	return &Checker{
		floors: map[string]uint64{}, firstSeen: map[outcome]time.Time{},
		ok: map[string]int64{}, tolerated: map[string]int64{}, failed: map[string]int64{},
		slowest: map[string]time.Duration{},
	}
}

// Floor is the highest generation node has answered with so far.
func (c *Checker) Floor(node string) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.floors[node]
}

// Record takes one result.
func (c *Checker) Record(r Result) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.Err != nil {
		if r.Tolerated {
			c.tolerated[r.Node]++
			return
		}
		c.failed[r.Node]++
		c.violatef("%s failed a decision (%s, sent %s): %v", r.Node, harness.RequestPaths[r.Req], stamp(r.Start), r.Err)
		return
	}
	c.ok[r.Node]++
	c.slowest[r.Node] = max(c.slowest[r.Node], r.End.Sub(r.Start))
	gen := r.Decision.Generation
	if gen < r.Floor {
		c.violatef("%s went back from generation %d to %d (%s, sent %s)", r.Node, r.Floor, gen, harness.RequestPaths[r.Req], stamp(r.Start))
	}
	c.floors[r.Node] = max(c.floors[r.Node], gen)
	o := outcome{r.Node, gen, r.Req, r.Decision.Decision, r.Decision.Rule}
	if t, seen := c.firstSeen[o]; !seen || r.End.Before(t) {
		c.firstSeen[o] = r.End
	}
}

// violatef records a violation. Violations are grouped by node and
// format, keeping the first of each group and a count, so a node that goes
// back once does not bury the log under every answer that follows.
func (c *Checker) violatef(format string, args ...any) {
	key := format
	if len(args) > 0 {
		key = fmt.Sprint(args[0]) + ": " + format
	}
	for i := range c.violations {
		if c.violations[i].key == key {
			c.violations[i].count++
			return
		}
	}
	c.violations = append(c.violations, violation{key: key, first: fmt.Sprintf(format, args...), count: 1})
}

// violation is a group of broken invariants of one kind on one node.
type violation struct {
	key   string
	first string
	count int
}

func (v violation) String() string {
	if v.count == 1 {
		return v.first
	}
	return fmt.Sprintf("%s (and %d more like it)", v.first, v.count-1)
}

// Counts returns answered, tolerated-failed and failed requests per node.
func (c *Checker) Counts() (ok, tolerated, failed map[string]int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.ok), maps.Clone(c.tolerated), maps.Clone(c.failed)
}

// Generations returns the generations answers came from, ascending.
func (c *Checker) Generations() []uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	set := map[uint64]bool{}
	for o := range c.firstSeen {
		set[o.gen] = true
	}
	return slices.Sorted(maps.Keys(set))
}

// Verify reports every broken invariant as a test error. It reads the
// generations from a running node of cl, so call it before teardown.
func (c *Checker) Verify(t testing.TB, cl *Cluster) {
	t.Helper()
	c.verify(t, cl.Repo.Written(), cl.generation)
}

// verify is Verify with the trees written and the generation lookup
// passed in, so the checker itself is tested without processes.
func (c *Checker) verify(t testing.TB, written map[int]bool, lookup func(uint64) (*harness.Generation, error)) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, v := range c.violations {
		t.Error(v)
	}
	trees := c.checkAgreement(t, written)
	c.checkActivation(t, lookup)
	t.Logf("checker: answers %v, tolerated failures (node disrupted) %v, failures %v, slowest answer %v, generations %v",
		c.ok, c.tolerated, c.failed, c.slowest, slices.Sorted(maps.Keys(trees)))
}

// checkAgreement checks that nodes agree per generation and that answers
// match the tree the probe names; it returns generation → tree.
func (c *Checker) checkAgreement(t testing.TB, written map[int]bool) map[uint64]int {
	type key struct {
		gen uint64
		req int
	}
	answers := map[key]outcome{}
	trees := map[uint64]int{}
	for o := range c.firstSeen {
		k := key{o.gen, o.req}
		if prev, ok := answers[k]; ok && (prev.decision != o.decision || prev.rule != o.rule) {
			t.Errorf("generation %d, %s: %s answered %s/%q, %s answered %s/%q",
				o.gen, harness.RequestPaths[o.req], prev.node, prev.decision, prev.rule, o.node, o.decision, o.rule)
		}
		answers[k] = o
		if o.req == 0 {
			tree, ok := harness.TreeOf(o.rule)
			if !ok || !written[tree] {
				t.Errorf("%s answered the probe at generation %d with rule %q: not a tree this test wrote", o.node, o.gen, o.rule)
			}
			trees[o.gen] = tree
		}
	}
	for k, o := range answers {
		tree, ok := trees[k.gen]
		if !ok {
			continue // the probe was not sent at this generation
		}
		if d, r := harness.Expect(tree, harness.RequestPaths[k.req]); d != o.decision || r != o.rule {
			t.Errorf("generation %d (tree %d), %s: %s answered %s/%q, the tree says %s/%q",
				k.gen, tree, harness.RequestPaths[k.req], o.node, o.decision, o.rule, d, r)
		}
	}
	gens := slices.Sorted(maps.Keys(trees))
	for i := 1; i < len(gens); i++ {
		if trees[gens[i]] < trees[gens[i-1]] {
			t.Errorf("generation %d serves tree %d, older than tree %d of generation %d", gens[i], trees[gens[i]], trees[gens[i-1]], gens[i-1])
		}
	}
	return trees
}

// checkActivation checks every generation served was activated, and
// answered from only after its activateTime (all nodes share one clock).
func (c *Checker) checkActivation(t testing.TB, lookup func(uint64) (*harness.Generation, error)) {
	first := map[uint64]outcome{}
	firstAt := map[uint64]time.Time{}
	for o, at := range c.firstSeen {
		if prev, ok := firstAt[o.gen]; !ok || at.Before(prev) {
			first[o.gen], firstAt[o.gen] = o, at
		}
	}
	for gen, at := range firstAt {
		g, err := lookup(gen)
		if err != nil {
			t.Errorf("generation %d was served (first by %s at %s) but cannot be read: %v", gen, first[gen].node, stamp(at), err)
			continue
		}
		if !g.Activated() {
			t.Errorf("generation %d was served (first by %s at %s) but is %s and was never activated", gen, first[gen].node, stamp(at), g.State)
			continue
		}
		if act := g.ActivatedAt(); !act.IsZero() && at.Before(act.Add(-time.Millisecond)) {
			t.Errorf("generation %d was served by %s at %s, before its activateTime %s", gen, first[gen].node, stamp(at), stamp(act))
		}
	}
}

// generation reads /v1/generations/{n} from the first node that answers.
// A generation the cluster no longer keeps (it keeps the last 50) comes
// from what the harness read of it before, if anything.
func (cl *Cluster) generation(n uint64) (*harness.Generation, error) {
	var err error
	for _, p := range cl.Nodes {
		if ok, _ := p.Healthy(); !ok {
			continue
		}
		var g *harness.Generation
		if g, err = cl.Client.Generation(p, n); err == nil {
			cl.remember(*g)
			return g, nil
		}
	}
	if g, ok := cl.seen.Load(n); ok {
		gen := g.(harness.Generation)
		return &gen, nil
	}
	if err == nil {
		err = fmt.Errorf("no healthy node")
	}
	return nil, err
}

func (cl *Cluster) remember(g harness.Generation) { cl.seen.Store(g.Generation, g) }

// watchGenerations reads GET /v1/generations from a healthy node every
// 250 ms until ctx ends, so that generations pruned from the cluster's
// history can still be checked.
func (cl *Cluster) watchGenerations(ctx context.Context) {
	for ctx.Err() == nil {
		for _, p := range cl.Nodes {
			if ok, _ := p.Healthy(); !ok {
				continue
			}
			if gens, err := cl.Client.Generations(p); err == nil {
				for _, g := range gens {
					cl.remember(g)
				}
				break
			}
		}
		sleepCtx(ctx, 250*time.Millisecond)
	}
}

func stamp(t time.Time) string { return t.Format("15:04:05.000000") }
