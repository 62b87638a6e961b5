package nodes_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/api/apiv1"
	"github.com/policyrollout/reconciler/test/harness"
)

// BenchmarkChangeStateReadBack times a changeState and the GET of the
// changed node right after it, sent to the leader and to a follower, and
// reports how many of those reads still showed the old state (stale/op)
// and the changeState's own latency (write-ms/op): what the follower's
// wait for the leader's index costs and buys.
//
//	go test -run '^$' -bench ChangeStateReadBack -benchtime 200x ./test/nodes/
func BenchmarkChangeStateReadBack(b *testing.B) {
	c := harness.StartCluster(b, harness.ClusterOptions{Size: 3, Repo: harness.NewRepo(b, harness.RepoOptions{})})
	leader := c.Leader(harness.LeaderTimeout)
	follower := c.Others(leader)[0]
	target := c.Others(leader, follower)[0]
	states := []string{"TEST", "ACTIVE"}
	ctx := context.Background()
	for _, via := range []struct {
		name string
		n    *harness.Node
	}{{"leader", leader}, {"follower", follower}} {
		b.Run(via.name, func(b *testing.B) {
			stale, i := 0, 0
			var write time.Duration
			for b.Loop() {
				want := states[i%len(states)]
				i++
				body := `{"state":"` + want + `","name":"` + target.ID + `"}`
				start := time.Now()
				if err := c.Client.Call(ctx, http.MethodPost, via.n.Base()+"/v1/nodes:changeState", body, http.StatusOK, nil); err != nil {
					b.Fatal(err)
				}
				write += time.Since(start)
				var n apiv1.Node
				if err := c.Client.GetJSON(via.n.Base()+"/v1/nodes/"+target.ID, &n); err != nil {
					b.Fatal(err)
				}
				if n.State != want {
					stale++
				}
			}
			b.ReportMetric(float64(stale)/float64(i), "stale/op")
			b.ReportMetric(float64(write.Microseconds())/1000/float64(i), "write-ms/op")
		})
	}
}
