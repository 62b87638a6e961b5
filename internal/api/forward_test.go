package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/policyrollout/reconciler/internal/cluster"
	"github.com/policyrollout/reconciler/internal/errs"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// TestLeaderReportsItsIndexToTheForwardingNode: the leader's answer to a
// forwarded write carries the raft index its state reached, for the
// forwarding node to wait for (cluster.OnLeader); the follower copies the
// leader's status and body to its client, never that header, and the
// leader does not add it to a client's own request.
func TestLeaderReportsItsIndexToTheForwardingNode(t *testing.T) {
	leaderState := clusterState()
	leaderState.LastIndex = 40
	leader := newTestEnv(t, Config{Cluster: &fakeCluster{state: leaderState}, Rollback: &rollbackFunc{
		fn: func(req RollbackRequest) (RollbackResult, error) {
			if req.Generation == 6 {
				return RollbackResult{}, errorf(errs.FailedPrecondition, "pushed the revert, then could not promote it")
			}
			return RollbackResult{Target: 5, Commit: "c9", Generation: 9, State: raftstore.GenerationActive}, nil
		}}})
	var reported atomic.Value // the answer is sent once the handler returns
	raft := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		leader.srv.ServeHTTP(w, r)
		reported.Store(w.Header().Get(cluster.AppliedIndexHeader))
	}))
	t.Cleanup(raft.Close)
	st := clusterState()
	n1 := st.Nodes["n1"]
	n1.HTTPAddr = strings.TrimPrefix(raft.URL, "http://")
	st.Nodes["n1"] = n1
	follower := newTestEnv(t, Config{Cluster: &fakeCluster{state: st}, Rollback: &rollbackFunc{fn: notLeader}})
	a := follower.do(http.MethodPost, "/v1/generations:rollback", strings.NewReader(`{"generation":5}`), nil)
	if a.code != 200 || !strings.Contains(string(a.body), `"generation":9`) {
		t.Fatalf("forwarded rollback = %d %s", a.code, a.body)
	}
	if got, _ := reported.Load().(string); got != "40" {
		t.Errorf("the leader reported index %q to the forwarding node, want 40", got)
	}
	if a.header.Get(cluster.AppliedIndexHeader) != "" {
		t.Error("the leader's index leaked to the client")
	}
	// A write that fails on the leader may have written part of itself:
	// the forwarding node waits for that too.
	reported.Store("")
	if a := follower.do(http.MethodPost, "/v1/generations:rollback", strings.NewReader(`{"generation":6}`), nil); a.code != http.StatusBadRequest {
		t.Fatalf("forwarded failing rollback = %d %s", a.code, a.body)
	}
	if got, _ := reported.Load().(string); got != "40" {
		t.Errorf("the leader reported index %q with its error, want 40", got)
	}
	if a := leader.do(http.MethodPost, "/v1/generations:rollback", strings.NewReader(`{"generation":5}`), nil); a.code != 200 ||
		a.header.Get(cluster.AppliedIndexHeader) != "" {
		t.Errorf("a client's own write on the leader = %d, index header %q", a.code, a.header.Get(cluster.AppliedIndexHeader))
	}
}
