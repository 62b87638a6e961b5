package nodes_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/policyrollout/reconciler/test/harness"
)

// readBackRounds is how many writes each read-back test makes: one
// write's entry often reaches the follower before the leader answers, so
// a single round would pass by luck; many in a row do not.
const readBackRounds = 30

// TestChangeStateReadsBackOnTheFollower: a changeState sent to a
// follower is forwarded to the leader, and the follower answers only once
// it has applied it itself, so a GET on the same follower right after the
// answer shows the new state, every time.
func TestChangeStateReadsBackOnTheFollower(t *testing.T) {
	t.Parallel()
	c := harness.StartCluster(t, harness.ClusterOptions{Size: 3, Repo: harness.NewRepo(t, harness.RepoOptions{}), Race: true})
	leader := c.Leader(harness.LeaderTimeout)
	via := c.Others(leader)[0]
	c.CheckChangeStateReadsBack(via, c.Others(leader, via)[0], readBackRounds)
}

// TestJoinAndLeaveReadBackOnTheFollower: a join and a leave sent to a
// follower (forwarded by the cluster layer, not the API's leaderOnly)
// are visible on that follower when it answers: the new node is listed,
// the node that left is gone, every round.
func TestJoinAndLeaveReadBackOnTheFollower(t *testing.T) {
	t.Parallel()
	c := harness.StartCluster(t, harness.ClusterOptions{Size: 3, Repo: harness.NewRepo(t, harness.RepoOptions{}), Race: true})
	via := c.Others(c.Leader(harness.LeaderTimeout))[0]
	join := `{"id":"x1","raftAddr":"` + harness.RaftAnswerer(t) + `","httpAddr":"127.0.0.1:9","voter":false}`
	ctx := context.Background()
	for i := range readBackRounds / 3 {
		if err := c.Client.Call(ctx, http.MethodPost, via.Base()+"/v1/cluster:join", join, 200, nil); err != nil {
			t.Fatalf("round %d: join through %s: %v", i, via.ID, err)
		}
		if code, body, err := c.Client.Get(via.Base() + "/v1/nodes/x1"); err != nil || code != 200 {
			t.Fatalf("round %d: %s answered the join but then GET x1 = %d %s %v", i, via.ID, code, body, err)
		}
		if err := c.Client.Call(ctx, http.MethodPost, via.Base()+"/v1/cluster:leave", `{"id":"x1"}`, 200, nil); err != nil {
			t.Fatalf("round %d: leave through %s: %v", i, via.ID, err)
		}
		if code, body, err := c.Client.Get(via.Base() + "/v1/nodes/x1"); err != nil || code != 404 {
			t.Fatalf("round %d: %s answered the leave but then GET x1 = %d %s %v", i, via.ID, code, body, err)
		}
	}
}
