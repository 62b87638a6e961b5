package raftstore

import (
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// testTimeouts survive -race on two busy cores: raft's own 50 ms test
// values, and even 200 ms, made leaders step down there.
var testTimeouts = Timeouts{Heartbeat: 500 * time.Millisecond, Election: 500 * time.Millisecond,
	LeaderLease: 500 * time.Millisecond, Commit: 10 * time.Millisecond}

// cluster is n in-process Stores over raft.InmemTransport, in the manner
// of hashicorp/raft's testing.go: transports can be cut and rejoined.
type cluster struct {
	t      *testing.T
	stores []*Store
	trans  []*raft.InmemTransport
	addrs  []raft.ServerAddress
	tweak  func(*Config)
}

func newCluster(t *testing.T, n int, tweak func(*Config)) *cluster {
	c := &cluster{t: t, stores: make([]*Store, n), trans: make([]*raft.InmemTransport, n),
		addrs: make([]raft.ServerAddress, n), tweak: tweak}
	for i := range n {
		c.addrs[i], c.trans[i] = raft.NewInmemTransport("")
	}
	c.connectAll()
	for i := range n {
		c.stores[i] = c.open(i, i == 0)
	}
	for i := 1; i < n; i++ {
		if err := c.leader().AddVoter(c.id(i), string(c.addrs[i])); err != nil {
			t.Fatalf("add voter %d: %v", i, err)
		}
	}
	return c
}

func (c *cluster) id(i int) string { return "node" + strconv.Itoa(i) }

func (c *cluster) open(i int, bootstrap bool) *Store {
	cfg := Config{NodeID: c.id(i), Transport: c.trans[i], InMemory: true, Bootstrap: bootstrap,
		Timeouts: testTimeouts, Logger: testLogger(c.t, c.id(i))}
	if c.tweak != nil {
		c.tweak(&cfg)
	}
	s, err := Open(cfg)
	if err != nil {
		c.t.Fatalf("open %s: %v", c.id(i), err)
	}
	c.t.Cleanup(func() { _ = s.Close() })
	return s
}

func (c *cluster) connectAll() {
	for i := range c.trans {
		for j := range c.trans {
			if i != j {
				c.trans[i].Connect(c.addrs[j], c.trans[j])
			}
		}
	}
}

// isolate cuts node i off from everyone, both directions.
func (c *cluster) isolate(i int) {
	c.trans[i].DisconnectAll()
	for j := range c.trans {
		if j != i {
			c.trans[j].Disconnect(c.addrs[i])
		}
	}
}

// leader waits for a leader among the open, connected stores.
func (c *cluster) leader(except ...int) *Store {
	c.t.Helper()
	var found *Store
	eventually(c.t, 10*time.Second, "a leader", func() bool {
		for i, s := range c.stores {
			if s != nil && !contains(except, i) && s.IsLeader() {
				found = s
				return true
			}
		}
		return false
	})
	return found
}

func (c *cluster) followers(leader *Store) []*Store {
	var out []*Store
	for _, s := range c.stores {
		if s != nil && s != leader {
			out = append(out, s)
		}
	}
	return out
}

// converged waits until every listed store holds the same state as want.
func (c *cluster) converged(want *Store, stores ...*Store) {
	c.t.Helper()
	eventually(c.t, 10*time.Second, "followers to converge", func() bool {
		w := jsonOf(c.t, want.State())
		for _, s := range stores {
			if jsonOf(c.t, s.State()) != w {
				return false
			}
		}
		return true
	})
}

func contains(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func propose(t *testing.T, s *Store, p Payload) Result {
	t.Helper()
	res, err := s.Propose(ctxT(t), p)
	if err != nil {
		t.Fatalf("propose %T: %v", p, err)
	}
	return res
}

// proposeVia sends p to whoever leads, retrying when leadership moved
// before the command entered the log (ErrNotLeader: nothing was applied),
// as the forwarding layer will.
func proposeVia(t *testing.T, leader func() *Store, p Payload) Result {
	t.Helper()
	for {
		res, err := leader().Propose(ctxT(t), p)
		if errors.Is(err, ErrNotLeader) {
			continue
		}
		if err != nil {
			t.Fatalf("propose %T: %v", p, err)
		}
		return res
	}
}

func (c *cluster) propose(p Payload) Result {
	c.t.Helper()
	return proposeVia(c.t, func() *Store { return c.leader() }, p)
}

// promote runs the two-phase promotion as the leader loop will.
func promote(t *testing.T, leader func() *Store, gen uint64, nodes ...string) Result {
	t.Helper()
	proposeVia(t, leader, stage(gen, int(gen)))
	for _, n := range nodes {
		proposeVia(t, leader, &ReportReady{Generation: gen, NodeID: n})
	}
	return proposeVia(t, leader, &ActivateGeneration{Generation: gen})
}

func (c *cluster) promote(gen uint64, nodes ...string) Result {
	c.t.Helper()
	return promote(c.t, func() *Store { return c.leader() }, gen, nodes...)
}

// applied waits until every listed store has applied index.
func applied(t *testing.T, index uint64, stores ...*Store) {
	t.Helper()
	for _, s := range stores {
		if err := s.WaitForIndex(ctxT(t), index); err != nil {
			t.Fatalf("%s: %v", s.ID(), err)
		}
	}
}

func TestClusterReplicatesPromotion(t *testing.T) {
	c := newCluster(t, 3, nil)
	res := c.promote(1, "node0", "node1", "node2")
	applied(t, res.Index, c.stores...)
	want := jsonOf(t, c.stores[0].State())
	for _, s := range c.stores {
		g, ok := s.State().ActiveGeneration()
		if !ok || g.Number != 1 || len(g.ReadyNodes) != 3 || string(g.Files["root.toml"]) != "\x01" {
			t.Fatalf("%s: active generation = %+v", s.ID(), g)
		}
		if jsonOf(t, s.State()) != want {
			t.Fatalf("%s: state differs", s.ID())
		}
	}
	// A rejection comes back to the proposer with its index.
	res, err := c.leader().Propose(ctxT(t), stage(1, 9))
	if !errors.Is(err, ErrGenerationNotNewer) || res.Index == 0 {
		t.Fatalf("stale stage: res=%+v err=%v", res, err)
	}
}

func TestClusterFollowerApplyIsNotLeader(t *testing.T) {
	c := newCluster(t, 3, nil)
	leader := c.leader()
	f := c.followers(leader)[0]
	_, err := f.Propose(ctxT(t), stage(1, 1))
	if !errors.Is(err, ErrNotLeader) || !errors.Is(err, raft.ErrNotLeader) {
		t.Fatalf("follower apply: %v", err)
	}
	eventually(t, 10*time.Second, "the follower to know the leader", func() bool {
		id, addr := f.Leader()
		return id != "" && addr != "" && id == c.leader().ID()
	})
	res := c.propose(stage(1, 1))
	applied(t, res.Index, f)
	if f.State().Staged != 1 {
		t.Fatal("follower did not apply the staged generation")
	}
}

func TestClusterPartitionedFollowerCatchesUp(t *testing.T) {
	c := newCluster(t, 3, nil)
	res := c.promote(1, "node0")
	applied(t, res.Index, c.stores...)

	lagging := c.followers(c.leader())[0]
	c.isolate(indexOf(c, lagging))
	c.promote(2, "node0")
	c.propose(stage(3, 3))
	if lagging.State().Active != 1 {
		t.Fatal("isolated follower received entries")
	}
	c.connectAll()
	c.converged(c.leader(), lagging)
	if s := lagging.State(); s.Active != 2 || s.Previous != 1 || s.Staged != 3 {
		t.Fatalf("after healing: active=%d previous=%d staged=%d", s.Active, s.Previous, s.Staged)
	}
}

func TestClusterLeaderLossKeepsStagedGeneration(t *testing.T) {
	c := newCluster(t, 3, nil)
	c.promote(1, "node0")
	res := c.propose(stage(2, 2))
	applied(t, res.Index, c.stores...)
	old := c.leader()
	oldIdx := indexOf(c, old)
	c.isolate(oldIdx)
	next := c.leader(oldIdx)
	if g, ok := next.State().StagedGeneration(); !ok || g.Number != 2 || g.Files == nil {
		t.Fatalf("new leader lost the staged generation: %+v", g)
	}
	proposeVia(t, func() *Store { return c.leader(oldIdx) }, &ActivateGeneration{Generation: 2})
	c.connectAll()
	c.converged(c.leader(), c.stores...)
	if old.State().Active != 2 {
		t.Fatalf("old leader after rejoin: active=%d", old.State().Active)
	}
}

func TestClusterSnapshotCatchUpOfWipedNode(t *testing.T) {
	c := newCluster(t, 3, func(cfg *Config) {
		cfg.SnapshotThreshold, cfg.TrailingLogs = 4, 2
	})
	wiped := c.followers(c.leader())[0]
	idx := indexOf(c, wiped)
	if err := wiped.Close(); err != nil {
		t.Fatal(err)
	}
	for gen := uint64(1); gen <= 5; gen++ {
		c.promote(gen, "node0")
	}
	// Snapshot (and compact) on both survivors, so whichever leads must
	// send a snapshot rather than log entries.
	for i, s := range c.stores {
		if i != idx {
			if err := s.Snapshot(); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Reinstall: same id and address, empty storage.
	c.addrs[idx], c.trans[idx] = raft.NewInmemTransport(c.addrs[idx])
	c.connectAll()
	c.stores[idx] = c.open(idx, false)
	c.converged(c.leader(), c.stores[idx])
	// The FSM has the state once Restore returns; raft records the
	// installed snapshot just after, so its stats may lag a moment.
	eventually(t, 10*time.Second, "the wiped node to record the installed snapshot", func() bool {
		return c.stores[idx].Stats()["last_snapshot_index"] != "0"
	})
	if s := c.stores[idx].State(); s.Active != 5 || s.Previous != 4 {
		t.Fatalf("wiped node: active=%d previous=%d", s.Active, s.Previous)
	}
}

func TestClusterMembership(t *testing.T) {
	c := newCluster(t, 3, nil)
	leader := c.leader()
	before, _ := leader.Servers()
	for i := range c.stores { // same id and address: no-op
		if err := leader.AddVoter(c.id(i), string(c.addrs[i])); err != nil {
			t.Fatalf("re-adding %s: %v", c.id(i), err)
		}
	}
	if err := leader.AddNonvoter("node1", string(c.addrs[1])); err != nil {
		t.Fatalf("nonvoter for an existing voter: %v", err)
	}
	conflicts := [][2]string{{"node1", "elsewhere:1"}, {"node9", string(c.addrs[2])}}
	for _, cf := range conflicts {
		if err := leader.AddVoter(cf[0], cf[1]); !errors.Is(err, ErrMembership) {
			t.Fatalf("AddVoter(%s, %s): %v", cf[0], cf[1], err)
		}
	}
	after, _ := leader.Servers()
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Fatalf("configuration changed: %v -> %v", before, after)
	}
	if err := leader.RemoveServer("not-a-member"); err != nil {
		t.Fatal(err)
	}
	follower := c.followers(leader)[0]
	if err := follower.AddVoter("x", "y"); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("AddVoter on follower: %v", err)
	}
	if err := leader.RemoveServer(follower.ID()); err != nil {
		t.Fatal(err)
	}
	if servers, _ := leader.Servers(); len(servers) != 2 {
		t.Fatalf("after remove: %v", servers)
	}
	// The cluster still commits with two voters.
	c.stores[indexOf(c, follower)] = nil
	c.propose(stage(1, 1))
}

func indexOf(c *cluster, s *Store) int {
	for i, x := range c.stores {
		if x == s {
			return i
		}
	}
	c.t.Fatalf("store %s not in cluster", s.ID())
	return -1
}

// TestClusterSendCommitReachesFollowers: a follower learns that an entry
// is committed from the leader's next AppendEntries, which raft sends
// for a new entry or at the commit timeout, never with a heartbeat.
// With a commit timeout of an hour, the followers apply the leader's
// last write only because SendCommit had raft send its commit index
// with a barrier; the barrier itself is no command (LastIndex stays the
// write's), and on a follower SendCommit does nothing.
func TestClusterSendCommitReachesFollowers(t *testing.T) {
	c := newCluster(t, 3, func(cfg *Config) { cfg.Timeouts.Commit = time.Hour })
	leader := c.leader()
	c.followers(leader)[0].SendCommit()
	res := propose(t, leader, stage(1, 1))
	leader.SendCommit()
	applied(t, res.Index, c.stores...)
	for _, s := range c.stores {
		if got := s.State().LastIndex; got != res.Index {
			t.Errorf("%s: LastIndex %d, want the write's %d", s.ID(), got, res.Index)
		}
	}
}
