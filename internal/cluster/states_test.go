package cluster_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/cluster"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// TestChangeStateOnTheLeader: the leader replicates a changeState per
// node and answers which nodes changed; a follower checks the request,
// then answers NOT_LEADER without changing anything, for the API to
// forward it (OnLeader) and wait for the leader's index.
func TestChangeStateOnTheLeader(t *testing.T) {
	p := newPair(t, "", "")
	ctx := context.Background()
	p.leaderStore.state.Nodes["E"] = raftstore.Node{ID: "E", State: raftstore.NodeActive, Group: "edge", Subgroup: "eu"}
	if _, err := p.follower.ChangeState(ctx, cluster.ChangeStateRequest{State: raftstore.NodePassive, Group: "default"}); !errors.Is(err, raftstore.ErrNotLeader) {
		t.Fatalf("on the follower = %v, want NOT_LEADER", err)
	}
	if got := p.leaderStore.State().Nodes["L"].State; got == raftstore.NodePassive {
		t.Fatal("the follower changed L itself")
	}
	res, err := p.leader.ChangeState(ctx, cluster.ChangeStateRequest{State: raftstore.NodePassive, Group: "default"})
	if err != nil || len(res.Changed) != 2 || res.Changed[0].ID != "F" || res.Changed[1].ID != "L" {
		t.Fatalf("group scope = %+v %v", res, err)
	}
	if got := p.leaderStore.State().Nodes["L"].State; got != raftstore.NodePassive {
		t.Fatalf("L is %s", got)
	}
	res, err = p.leader.ChangeState(ctx, cluster.ChangeStateRequest{State: raftstore.NodePassive, Group: "default", Subgroup: "default"})
	if err != nil || len(res.Changed) != 0 || strings.Join(res.Unchanged, ",") != "F,L" {
		t.Fatalf("unchanged = %+v %v", res, err)
	}
	_, err = p.leader.ChangeState(ctx, cluster.ChangeStateRequest{State: raftstore.NodeTest, Group: "edge", Subgroup: "us"})
	if !errors.Is(err, raftstore.ErrUnknownNode) {
		t.Fatalf("empty scope = %v", err)
	}
	_, err = p.follower.ChangeState(ctx, cluster.ChangeStateRequest{State: "DONE", Name: "E"})
	if !errors.Is(err, cluster.ErrBadRequest) {
		t.Fatalf("unknown state on the follower = %v, want a bad request before NOT_LEADER", err)
	}
}

// TestRequiredSkipsSafePassiveAndTerminated: the leader waits for ACTIVE
// and TEST nodes only, and not for a node whose last heartbeat said it
// stopped.
func TestRequiredSkipsSafePassiveAndTerminated(t *testing.T) {
	p := newPair(t, "", "")
	p.leader.ResetLeadership() // not settled: every registered node counts
	st := p.leaderStore.State()
	for id, s := range map[string]raftstore.NodeState{"A": raftstore.NodeActive, "T": raftstore.NodeTest,
		"S": raftstore.NodeSafe, "P": raftstore.NodePassive} {
		st.Nodes[id] = raftstore.Node{ID: id, State: s}
	}
	if got := p.leader.Required(st); strings.Join(got, ",") != "A,F,L,T" {
		t.Fatalf("required = %v", got)
	}
	status := cluster.NodeStatus{State: raftstore.NodeTerminated}
	if _, err := p.follower.Heartbeat(context.Background(), cluster.Heartbeat{ID: "F", Status: &status}); err != nil {
		t.Fatal(err)
	}
	if got := p.leader.Required(st); strings.Join(got, ",") != "A,L,T" {
		t.Fatalf("required after F's last heartbeat = %v", got)
	}
}
