package cluster_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/cluster"
	"github.com/policyrollout/reconciler/internal/raftstore"
	"github.com/policyrollout/reconciler/test/harness"
)

// armedPair is a pair whose follower reaches the leader through a server
// that arms the follower to apply what the leader applied, once the
// leader has answered.
func armedPair(t *testing.T, leaderIndex, followerIndex uint64) *pair {
	t.Helper()
	p := newPair(t, "", "")
	p.leaderStore.state.LastIndex = leaderIndex
	p.followerStore.state.LastIndex = followerIndex
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.srv.Config.Handler.ServeHTTP(w, r)
		p.followerStore.arm(p.leaderStore.State().LastIndex)
	}))
	t.Cleanup(front.Close)
	n := p.followerStore.state.Nodes["L"]
	n.HTTPAddr = strings.TrimPrefix(front.URL, "http://")
	p.followerStore.state.Nodes["L"] = n
	return p
}

// TestForwardedWritesWaitForTheFollowerToApplyThem: both ways to the
// leader (OnLeader for the API's writes, the cluster's own forwarding for
// join and leave) return only once the follower has applied the index
// the leader's answer reports, so the node a client wrote through shows
// the write when it answers. Raft delivers the entry to the follower
// after the leader answered; here at the second look after the answer.
func TestForwardedWritesWaitForTheFollowerToApplyThem(t *testing.T) {
	ctx := context.Background()
	notLeader := func(context.Context) error { return raftstore.ErrNotLeader }
	caughtUp := func(p *pair, what string) {
		t.Helper()
		want := p.leaderStore.State().LastIndex
		if got := p.followerStore.State().LastIndex; got < want {
			t.Errorf("%s returned at index %d, before the leader's write at %d", what, got, want)
		}
	}

	p := armedPair(t, 40, 30)
	call := cluster.Call{Method: http.MethodPost, Path: "/v1/nodes:changeState", Caller: true,
		Body: []byte(`{"state":"TEST","name":"F"}`)}
	a, err := p.follower.OnLeader(ctx, 0, notLeader, call)
	if err != nil || a == nil || a.Err() != nil || a.AppliedIndex != 41 {
		t.Fatalf("forwarded changeState = %+v %v", a, err)
	}
	caughtUp(p, "OnLeader")
	if n := p.leaderStore.commitsSent.Load(); n != 1 {
		t.Errorf("the leader sent its commit index %d times, want once, with its answer", n)
	}
	// The same change again writes nothing: no raft entry to send it.
	if a, err := p.follower.OnLeader(ctx, 0, notLeader, call); err != nil || a.Err() != nil || a.AppliedIndex != 41 {
		t.Fatalf("repeated changeState = %+v %v", a, err)
	}
	if n := p.leaderStore.commitsSent.Load(); n != 1 {
		t.Errorf("a write that changed nothing sent the commit index (%d in all)", n)
	}

	p = armedPair(t, 50, 30)
	if _, err := p.follower.Join(ctx, cluster.JoinRequest{ID: "N", RaftAddr: harness.RaftAnswerer(t), HTTPAddr: "127.0.0.1:2"}); err != nil {
		t.Fatalf("forwarded join: %v", err)
	}
	caughtUp(p, "Join")

	p = armedPair(t, 60, 30)
	if err := p.follower.Leave(ctx, cluster.LeaveRequest{ID: "F"}); err != nil {
		t.Fatalf("forwarded leave: %v", err)
	}
	caughtUp(p, "Leave")
}

// TestForwardedWriteWaitIsBounded: a follower that never reaches the
// index the leader reported (cut off from the log, or an index far
// ahead) still returns the leader's answer, after cluster.MaxCatchUp.
func TestForwardedWriteWaitIsBounded(t *testing.T) {
	p := newPair(t, "", "")
	p.leaderStore.state.LastIndex = 1 << 62
	p.followerStore.state.LastIndex = 30
	call := cluster.Call{Method: http.MethodPost, Path: "/v1/nodes:changeState", Caller: true,
		Body: []byte(`{"state":"TEST","name":"F"}`)}
	a, err := p.follower.OnLeader(context.Background(), 0, func(context.Context) error { return raftstore.ErrNotLeader }, call)
	if err != nil || a == nil || a.Err() != nil || a.AppliedIndex <= 1<<62 {
		t.Fatalf("forwarded changeState = %+v %v", a, err)
	}
	if got := p.followerStore.State().LastIndex; got != 30 {
		t.Errorf("the follower's index moved to %d", got)
	}
}
