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

// followFixture is a leader L with nodes A, S (the one that stalls) and O
// (an older build: no applied index in its heartbeats), a clock the test
// moves, and the leader's applied index the test sets.
type followFixture struct {
	t     *testing.T
	mu    sync.Mutex
	now   time.Time
	store *fakeStore
	c     *cluster.Cluster
	logs  *strings.Builder
}

func newFollowFixture(t *testing.T, staging, follow time.Duration) *followFixture {
	f := &followFixture{t: t, now: time.Unix(1000, 0), store: newFakeStore(true, "L"), logs: &strings.Builder{}}
	c, err := cluster.New(cluster.Config{NodeID: "L", Store: f.store, Now: f.clock, StagingTimeout: staging,
		HeartbeatTimeout: time.Minute, // the test beats every few seconds
		FollowTimeout:    follow, Logger: hclog.New(&hclog.LoggerOptions{Output: f.logs})})
	if err != nil {
		t.Fatal(err)
	}
	f.c = c
	st := f.store.State()
	for _, id := range []string{"L", "A", "S", "O"} {
		st.Nodes[id] = raftstore.Node{ID: id, State: raftstore.NodeActive}
	}
	c.ResetLeadership()
	return f
}

func (f *followFixture) clock() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.now }

func (f *followFixture) advance(d time.Duration) { f.mu.Lock(); f.now = f.now.Add(d); f.mu.Unlock() }

// beat sends the heartbeats of A and O (at the leader's index) and of S
// at applied.
func (f *followFixture) beat(applied uint64) {
	f.t.Helper()
	lead := f.store.State().LastIndex
	for _, hb := range []cluster.Heartbeat{{ID: "A", AppliedIndex: &lead}, {ID: "S", AppliedIndex: &applied}, {ID: "O"}} {
		if _, err := f.c.Heartbeat(context.Background(), hb); err != nil {
			f.t.Fatal(err)
		}
	}
}

// stage makes generation n the staged one, created now, Ready on ready.
func (f *followFixture) stage(n uint64, ready ...string) {
	st := f.store.State()
	st.LastIndex++
	st.Staged = n
	g := raftstore.Generation{Number: n, State: raftstore.GenerationStaged, CreateTime: f.clock(),
		ReadyNodes: map[string]time.Time{}}
	for _, id := range ready {
		g.ReadyNodes[id] = f.clock()
	}
	st.Generations[n] = g
}

func (f *followFixture) required() string {
	return strings.Join(f.c.Required(f.store.State()), ",")
}

// TestNodeNotFollowingIsLeftBehind: a node that heartbeats but stopped
// applying the log is left behind once it has not reached an entry the
// leader had for the follow timeout, counted from when it stopped: a
// generation staged a moment ago does not wait for it, although its own
// staging timeout is far away. Not while the Ready nodes are no majority,
// not for a node of an older build (no applied index), and no more once
// it catches up.
func TestNodeNotFollowingIsLeftBehind(t *testing.T) {
	f := newFollowFixture(t, time.Minute, 10*time.Second)
	f.store.State().LastIndex = 10
	f.beat(10)
	f.stage(2, "L", "A", "O")
	f.beat(10) // S saw index 10, the leader is at 11: S's mark is 11 from now
	stopped := f.clock()
	f.advance(6 * time.Second)
	f.beat(10)
	if got := f.required(); got != "A,L,O,S" {
		t.Fatalf("within the follow timeout: %v, want S waited for", got)
	}
	// Commits keep coming: generation 3 supersedes 2 and is 5 s old when S
	// has not followed for 11 s.
	f.stage(3, "L", "A", "O")
	f.advance(5 * time.Second)
	f.beat(10)
	if got := f.required(); got != "A,L,O" {
		t.Fatalf("S has not followed for 11 s, generation 3 is 5 s old: %v, want S left behind", got)
	}
	lag := f.c.View().Nodes["S"].NotFollowing
	if lag == nil || !lag.Since.Equal(stopped) || lag.AppliedIndex != 10 || lag.LeaderIndex != 11 ||
		!strings.Contains(lag.Reason(), "not following the raft log since 1970-01-01T00:16:40Z") {
		t.Fatalf("view of S: %+v", lag)
	}
	if !strings.Contains(f.logs.String(), `promoting without the nodes that do not follow the raft log: generation=3 nodes=["S"]`) {
		t.Errorf("log: %s", f.logs)
	}
	if v := f.c.View().Nodes["O"]; v.NotFollowing != nil {
		t.Errorf("an older build's node is judged: %+v", v)
	}

	g := f.store.State().Generations[3]
	g.ReadyNodes = map[string]time.Time{"L": f.clock()}
	f.store.State().Generations[3] = g
	if got := f.required(); got != "A,L,O,S" {
		t.Fatalf("1 of 4 Ready: %v, want everyone waited for", got)
	}
	g.ReadyNodes["A"], g.ReadyNodes["O"] = f.clock(), f.clock()

	f.beat(f.store.State().LastIndex) // S caught up (the disk was freed)
	if got := f.required(); got != "A,L,O,S" {
		t.Fatalf("S caught up: %v, want it waited for again", got)
	}
	if v := f.c.View().Nodes["S"]; v.NotFollowing != nil || v.AppliedIndex != 12 {
		t.Fatalf("S caught up, view %+v", v)
	}
}

// TestFollowTimeoutIsCappedByStagingTimeout: a node behind is also a node
// not Ready, so it is never waited for longer than the staging timeout.
func TestFollowTimeoutIsCappedByStagingTimeout(t *testing.T) {
	f := newFollowFixture(t, 3*time.Second, time.Hour)
	f.store.State().LastIndex = 10
	f.beat(10)
	f.stage(2, "L", "A", "O")
	f.beat(10)
	f.advance(2 * time.Second)
	f.stage(3, "L", "A", "O") // a fresh generation: its own staging timeout is 3 s away
	f.advance(2 * time.Second)
	f.beat(10)
	if got := f.required(); got != "A,L,O" {
		t.Fatalf("S has not followed for 4 s, staging_timeout 3 s: %v, want S left behind", got)
	}
}
