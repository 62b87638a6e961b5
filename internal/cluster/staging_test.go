package cluster_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/policyrollout/reconciler/internal/cluster"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// TestStagingTimeoutLeavesANodeBehind: a node that heartbeats but never
// reports Ready is waited for until the staging timeout, then left behind
// while the others are Ready; not when most nodes are not Ready.
func TestStagingTimeoutLeavesANodeBehind(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	store := newFakeStore(true, "L")
	c, err := cluster.New(cluster.Config{NodeID: "L", Store: store, Now: clock, StagingTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	st := store.State()
	for _, id := range []string{"L", "A", "B", "H"} {
		st.Nodes[id] = raftstore.Node{ID: id, State: raftstore.NodeActive}
	}
	st.Staged = 2
	st.Generations[2] = raftstore.Generation{Number: 2, State: raftstore.GenerationStaged, CreateTime: now,
		ReadyNodes: map[string]time.Time{"L": now, "A": now, "B": now}}
	c.ResetLeadership()
	if got := c.Required(st); strings.Join(got, ",") != "A,B,H,L" {
		t.Fatalf("within the timeout: %v", got)
	}
	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	for _, id := range []string{"A", "B", "H"} { // all alive: H heartbeats but never reports
		if _, err := c.Heartbeat(context.Background(), cluster.Heartbeat{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	if got := c.Required(st); strings.Join(got, ",") != "A,B,L" {
		t.Fatalf("past the timeout: %v", got)
	}
	g := st.Generations[2]
	g.ReadyNodes = map[string]time.Time{"L": now}
	st.Generations[2] = g
	if got := c.Required(st); strings.Join(got, ",") != "A,B,H,L" {
		t.Fatalf("most nodes not Ready: %v", got)
	}
}

// TestFailedNodesAreLeftBehind: a serving node that reported the staged
// generation failed is not waited for, at once, while the others are a
// majority able to load it; when failures leave no such majority the
// generation is unloadable, naming the nodes and their errors, and every
// node stays required so it is never activated.
func TestFailedNodesAreLeftBehind(t *testing.T) {
	now := time.Unix(1000, 0)
	store := newFakeStore(true, "L")
	var logs strings.Builder
	c, err := cluster.New(cluster.Config{NodeID: "L", Store: store, Now: func() time.Time { return now },
		Logger: hclog.New(&hclog.LoggerOptions{Output: &logs})})
	if err != nil {
		t.Fatal(err)
	}
	st := store.State()
	for _, id := range []string{"L", "A", "B", "P"} {
		st.Nodes[id] = raftstore.Node{ID: id, State: raftstore.NodeActive}
	}
	st.Nodes["P"] = raftstore.Node{ID: "P", State: raftstore.NodePassive}
	st.Staged = 2
	g := raftstore.Generation{Number: 2, State: raftstore.GenerationStaged, CreateTime: now,
		ReadyNodes: map[string]time.Time{"A": now},
		NodeErrors: map[string][]string{"B": {"web/policy.toml:7: rule \"r\" is already defined", "second"},
			"P": {"not serving: does not count"}}}
	st.Generations[2] = g
	c.ResetLeadership()
	for range 3 {
		if got := c.Required(st); strings.Join(got, ",") != "A,L" {
			t.Fatalf("one of three failed: required %v, want A,L (B left behind)", got)
		}
	}
	if u := c.Unloadable(st); u != nil {
		t.Fatalf("two of three can load it: unloadable %v", u)
	}
	if n := strings.Count(logs.String(), "cannot load the staged generation"); n != 1 || !strings.Contains(logs.String(), "already defined") {
		t.Errorf("logged %d times, want once with the error:\n%s", n, logs.String())
	}

	g.NodeErrors["A"] = []string{"etag differs"}
	delete(g.ReadyNodes, "A")
	u := c.Unloadable(st)
	if len(u) != 3 || !strings.Contains(u[0], "2 of 3 (A, B)") || u[1] != "node A: etag differs" ||
		u[2] != `node B: web/policy.toml:7: rule "r" is already defined (and 1 more)` {
		t.Fatalf("two of three failed: unloadable %q", u)
	}
	if got := c.Required(st); strings.Join(got, ",") != "A,B,L" {
		t.Fatalf("unloadable: required %v, want every serving node", got)
	}

	// Two serving nodes, one failed: no majority can load it.
	delete(st.Nodes, "A")
	delete(g.NodeErrors, "A")
	if u := c.Unloadable(st); u == nil {
		t.Fatal("one of two failed: not unloadable")
	}
}

// TestOldNodesFailureReportIsRelabelled: a node of an older build sends
// ReportFailed version 1 (which made the generation INVALID for all);
// the leader records it as this build's version, so the node is left
// behind and the generation stays STAGED.
func TestOldNodesFailureReportIsRelabelled(t *testing.T) {
	p := newPair(t, "", "")
	p.leaderStore.state.Staged = 3
	p.leaderStore.state.Generations[3] = raftstore.Generation{Number: 3, State: raftstore.GenerationStaged,
		ReadyNodes: map[string]time.Time{}, NodeErrors: map[string][]string{}}
	cmd, err := raftstore.NewCommand(&raftstore.ReportFailed{Generation: 3, NodeID: "F", Errors: []string{"old build"},
		Time: time.Unix(9, 0)})
	if err != nil {
		t.Fatal(err)
	}
	cmd.Version = 1
	if _, err := p.follower.ProposeCommand(context.Background(), cmd); err != nil {
		t.Fatal(err)
	}
	st := p.leaderStore.State()
	if g := st.Generations[3]; g.State != raftstore.GenerationStaged || st.Staged != 3 || g.NodeErrors["F"][0] != "old build" {
		t.Fatalf("generation 3 = %s %v", g.State, g.NodeErrors)
	}
	if v := p.leaderStore.applied[len(p.leaderStore.applied)-1].Version; v != raftstore.ReportFailedVersion {
		t.Fatalf("logged at version %d", v)
	}
}

// TestFailedAndLateNodesTogether: a node that failed is left behind at
// once, one that does not answer only past the staging timeout and only
// while the Ready nodes are a majority of all the serving ones (the
// failed one included).
func TestFailedAndLateNodesTogether(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	store := newFakeStore(true, "L")
	c, err := cluster.New(cluster.Config{NodeID: "L", Store: store, Now: clock, StagingTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	st := store.State()
	for _, id := range []string{"L", "A", "B", "F", "H"} {
		st.Nodes[id] = raftstore.Node{ID: id, State: raftstore.NodeActive}
	}
	st.Staged = 2
	g := raftstore.Generation{Number: 2, State: raftstore.GenerationStaged, CreateTime: now,
		ReadyNodes: map[string]time.Time{"A": now, "B": now}, NodeErrors: map[string][]string{"F": {"boom"}}}
	st.Generations[2] = g
	c.ResetLeadership()
	if got := c.Required(st); strings.Join(got, ",") != "A,B,H,L" {
		t.Fatalf("within the timeout: %v", got)
	}
	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	for _, id := range []string{"A", "B", "F", "H"} { // all alive
		if _, err := c.Heartbeat(context.Background(), cluster.Heartbeat{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	if got := c.Required(st); strings.Join(got, ",") != "A,B,H,L" {
		t.Fatalf("2 of 5 Ready past the timeout: %v, want H still waited for", got)
	}
	g.ReadyNodes["L"] = now
	if got := c.Required(st); strings.Join(got, ",") != "A,B,L" {
		t.Fatalf("3 of 5 Ready past the timeout: %v, want F and H left behind", got)
	}
	if u := c.Unloadable(st); u != nil {
		t.Fatalf("unloadable %v", u)
	}
}
