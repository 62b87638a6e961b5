package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/policyrollout/reconciler/internal/cluster"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// TestForwardedWriteWaitsForTheFollowerToApplyIt: the follower answers a
// forwarded write only once it has applied the index the leader reached,
// so its client reads the write back from it. Raft may deliver the entry
// to the follower after the leader answered (one logical write is one log
// entry); here it arrives at the second look after the leader's answer.
func TestForwardedWriteWaitsForTheFollowerToApplyIt(t *testing.T) {
	leaderState := clusterState()
	leaderState.LastIndex = 40
	leader := newTestEnv(t, Config{Cluster: &fakeCluster{state: leaderState}, Rollback: &rollbackFunc{
		fn: func(RollbackRequest) (RollbackResult, error) {
			return RollbackResult{Target: 5, Commit: "c9", Generation: 9, State: raftstore.GenerationActive}, nil
		}}})
	st := clusterState()
	st.LastIndex = 30
	fc := &lateFollower{fakeCluster: &fakeCluster{state: st}, index: 40}
	raft := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		leader.srv.ServeHTTP(w, r)
		fc.armed.Store(true)
	}))
	t.Cleanup(raft.Close)
	n1 := st.Nodes["n1"]
	n1.HTTPAddr = strings.TrimPrefix(raft.URL, "http://")
	st.Nodes["n1"] = n1
	follower := newTestEnv(t, Config{Cluster: fc, Rollback: &rollbackFunc{fn: notLeader}})
	a := follower.do(http.MethodPost, "/v1/generations:rollback", strings.NewReader(`{"generation":5}`), nil)
	if a.code != 200 {
		t.Fatalf("forwarded rollback = %d %s", a.code, a.body)
	}
	if got := fc.State().LastIndex; got < 40 {
		t.Fatalf("the follower answered at index %d, before the leader's write at 40", got)
	}
	if a.header.Get(cluster.AppliedIndexHeader) != "" {
		t.Error("the leader's index leaked to the client")
	}
}

// lateFollower applies index at the second State call once armed.
type lateFollower struct {
	*fakeCluster
	index uint64
	armed atomic.Bool
	calls atomic.Int32
}

func (f *lateFollower) State() *raftstore.State {
	if f.armed.Load() && f.calls.Add(1) == 2 {
		f.applied(f.index)
	}
	return f.fakeCluster.State()
}

// TestForwardedWriteWaitIsBounded: a follower that never reaches the
// index the leader reported (cut off from the log) still answers its
// client, after maxCatchUp, with the leader's answer.
func TestForwardedWriteWaitIsBounded(t *testing.T) {
	leaderState := clusterState()
	leaderState.LastIndex = 1 << 62
	leader := newTestEnv(t, Config{Cluster: &fakeCluster{state: leaderState}, Rollback: &rollbackFunc{
		fn: func(RollbackRequest) (RollbackResult, error) {
			return RollbackResult{Target: 5, Commit: "c9", Generation: 9, State: raftstore.GenerationActive}, nil
		}}})
	raft := httptest.NewServer(leader.srv)
	t.Cleanup(raft.Close)
	st := clusterState()
	st.LastIndex = 30
	n1 := st.Nodes["n1"]
	n1.HTTPAddr = strings.TrimPrefix(raft.URL, "http://")
	st.Nodes["n1"] = n1
	fc := &fakeCluster{state: st}
	follower := newTestEnv(t, Config{Cluster: fc, Rollback: &rollbackFunc{fn: notLeader}})
	a := follower.do(http.MethodPost, "/v1/generations:rollback", strings.NewReader(`{"generation":5}`), nil)
	if a.code != 200 || !strings.Contains(string(a.body), `"generation":9`) {
		t.Fatalf("forwarded rollback on a follower that does not catch up = %d %s", a.code, a.body)
	}
	if got := fc.State().LastIndex; got != 30 {
		t.Fatalf("the follower's index moved to %d", got)
	}
}
