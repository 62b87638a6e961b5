package nodes_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/policyrollout/reconciler/internal/api/apiv1"
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
	target := c.Others(leader, via)[0]
	states := []string{"TEST", "SAFE", "ACTIVE"}
	ctx := context.Background()
	for i := range readBackRounds {
		want := states[i%len(states)]
		var changed apiv1.StateChangeList
		body := `{"state":"` + want + `","name":"` + target.ID + `"}`
		if err := c.Client.Call(ctx, http.MethodPost, via.Base()+"/v1/nodes:changeState", body, 200, &changed); err != nil {
			t.Fatalf("round %d: changeState through %s: %v", i, via.ID, err)
		}
		if len(changed.Changed) != 1 || changed.Changed[0].To != want {
			t.Fatalf("round %d: changed %+v, want %s to %s", i, changed, target.ID, want)
		}
		var n apiv1.Node
		if err := c.Client.GetJSON(via.Base()+"/v1/nodes/"+target.ID, &n); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		if n.State != want {
			t.Fatalf("round %d: %s answered the changeState to %s but then shows %s %s", i, via.ID, want, target.ID, n.State)
		}
	}
}
