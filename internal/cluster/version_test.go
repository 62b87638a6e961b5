package cluster_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/cluster"
	"github.com/policyrollout/reconciler/internal/logging/testlog"
	"github.com/policyrollout/reconciler/internal/raftstore"
	"github.com/policyrollout/reconciler/internal/version"
)

// versionFixture is a leader L of this release with voters A and B and a
// read replica R.
func versionFixture(t *testing.T) (*cluster.Cluster, *fakeStore, func(id, v string)) {
	store := newFakeStore(true, "L")
	c, err := cluster.New(cluster.Config{NodeID: "L", Store: store, Logger: testlog.New(t), HeartbeatTimeout: time.Minute,
		Status: func() cluster.NodeStatus { return cluster.NodeStatus{Version: version.Current} }})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"L", "A", "B", "R"} {
		add := store.AddVoter
		if id == "R" {
			add = store.AddNonvoter
		}
		if err := add(id, id+":8300"); err != nil {
			t.Fatal(err)
		}
		store.State().Nodes[id] = raftstore.Node{ID: id, State: raftstore.NodeActive}
	}
	c.ResetLeadership()
	beat := func(id, v string) {
		t.Helper()
		hb := cluster.Heartbeat{ID: id, Status: &cluster.NodeStatus{Version: v, State: raftstore.NodeActive}}
		if _, err := c.Heartbeat(context.Background(), hb); err != nil {
			t.Fatal(err)
		}
	}
	return c, store, beat
}

// The cluster version is the members' lowest release, read replicas
// included (they apply the log too); a member not heard from, or that
// reports no semantic version (1.0.0 sent "dev" or a commit), counts as
// 1.0.0.
func TestVersionIsTheVotersLowest(t *testing.T) {
	c, _, beat := versionFixture(t)
	oldest, current := version.Must(version.Oldest), version.This()
	steps := []struct {
		id, v string
		want  version.V
	}{
		{"A", "1.1.0", oldest}, // B and R not heard from yet
		{"B", "fca736b", oldest},
		{"B", "dev", oldest},
		{"B", "1.1.0", oldest},
		{"R", "dev", oldest}, // a read replica of 1.0.0 would refuse what 1.1.0 adds
		{"R", "1.1.0", current},
	}
	for _, s := range steps {
		beat(s.id, s.v)
		if got := c.Version(); got != s.want {
			t.Fatalf("after %s reported %q: cluster version %v, want %v", s.id, s.v, got, s.want)
		}
	}
}

// A node more than one minor release ahead of the voters, or on another
// major release, is set PASSIVE at the leader's next tick, with the
// reason in HeldReasons; the last node of a rolling upgrade (one minor
// behind) is not.
func TestNodeOfAnotherReleaseIsHeldPassive(t *testing.T) {
	c, store, beat := versionFixture(t)
	beat("A", "1.0.0")
	beat("B", "1.2.0")
	beat("R", "2.0.0")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c.RunHeartbeats(ctx, func() uint64 { return 0 }) // one tick
	st := store.State()
	for id, want := range map[string]raftstore.NodeState{"A": raftstore.NodeActive, "B": raftstore.NodePassive, "R": raftstore.NodePassive} {
		if got := st.Nodes[id].State; got != want {
			t.Errorf("%s: %s, want %s", id, got, want)
		}
	}
	v := c.View()
	for _, id := range []string{"B", "R"} {
		reasons := strings.Join(c.HeldReasons(st.Nodes[id], v), "; ")
		if !strings.Contains(reasons, "version: runs") {
			t.Errorf("%s held for %q, want its release named", id, reasons)
		}
		t.Logf("%s: %s", id, reasons)
	}
}
