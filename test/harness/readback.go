package harness

import (
	"context"
	"net/http"

	"github.com/policyrollout/reconciler/internal/api/apiv1"
)

// CheckChangeStateReadsBack sets target's state through via rounds times
// (TEST, SAFE, ACTIVE, TEST, …) and fails the test unless via shows the
// new state in GET /v1/nodes/{target} right after each answer: a write
// answered by a node is visible on that node (docs/cluster.md). One write
// often reaches a follower before the leader answers, so a single round
// could pass by luck; many in a row do not.
func (c *Cluster) CheckChangeStateReadsBack(via, target *Node, rounds int) {
	c.T.Helper()
	states := []string{"TEST", "SAFE", "ACTIVE"}
	ctx := context.Background()
	for i := range rounds {
		want := states[i%len(states)]
		var changed apiv1.StateChangeList
		body := `{"state":"` + want + `","name":"` + target.ID + `"}`
		if err := c.Client.Call(ctx, http.MethodPost, via.Base()+"/v1/nodes:changeState", body, http.StatusOK, &changed); err != nil {
			c.T.Fatalf("round %d: changeState through %s: %v", i, via.ID, err)
		}
		if len(changed.Changed) != 1 || changed.Changed[0].To != want {
			c.T.Fatalf("round %d: changed %+v, want %s to %s", i, changed, target.ID, want)
		}
		var n apiv1.Node
		if err := c.Client.GetJSON(via.Base()+"/v1/nodes/"+target.ID, &n); err != nil {
			c.T.Fatalf("round %d: %v", i, err)
		}
		if n.State != want {
			c.T.Fatalf("round %d: %s answered the changeState to %s but then shows %s %s", i, via.ID, want, target.ID, n.State)
		}
	}
}
