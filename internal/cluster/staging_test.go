package cluster_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

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
