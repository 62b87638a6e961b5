package e2e

import (
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/test/harness"
)

// benchPushes is how many pushes each measurement makes.
const benchPushes = 30

// TestBenchMergeToActive measures merge-to-active: from `git push`
// returning to the new generation being served by all three nodes, over
// benchPushes pushes, with the leader polling every second and with an
// explicit trigger (POST /v1/cluster:reconcile right after the push, the
// poll set to one minute so that it is the trigger that acts). It prints
// p50/p99 and asserts nothing about timings. It also reports what an idle
// poll costs the leader (reconciler_git_fetch_duration_seconds).
func TestBenchMergeToActive(t *testing.T) {
	if os.Getenv(EnvBench) == "" {
		t.Skip("measurement: set " + EnvBench + "=1")
	}
	for _, mode := range []struct {
		name    string
		poll    string
		trigger bool
	}{
		{"poll 1s", "@every 1s", false},
		{"trigger", "@every 1m", true},
	} {
		t.Run(mode.name, func(t *testing.T) {
			repo := harness.NewRepo(t, harness.RepoOptions{Token: gitToken})
			c := startCluster(t, repo, mode.poll, "30s")
			var took []time.Duration
			for k := 1; k <= benchPushes; k++ {
				if !mode.trigger {
					// A random phase against the poll schedule: pushing right
					// after the previous activation would lock onto it.
					time.Sleep(time.Duration(rand.Int64N(int64(time.Second))))
				}
				repo.Write(k)
				start := time.Now()
				if mode.trigger {
					trigger(t, c, c.Nodes[k%len(c.Nodes)])
				}
				for {
					if _, err := c.ServingTree(k, c.Nodes); err == nil {
						break
					}
					if time.Since(start) > time.Minute {
						t.Fatalf("push %d not active after a minute", k)
					}
					time.Sleep(time.Millisecond)
				}
				took = append(took, time.Since(start))
			}
			t.Logf("merge-to-active, %s, %d pushes: %s", mode.name, benchPushes, harness.Percentiles(took))
			t.Logf("all, in push order: %v", rounded(took))
			for _, n := range c.Nodes {
				for _, l := range n.Warnings() {
					t.Logf("%s: %s", n.ID, l)
				}
			}
			if !mode.trigger {
				idleFetch(t, c)
			}
		})
	}
}

// idleFetch reports the leader's fetch time over 20 s of idle polls.
func idleFetch(t *testing.T, c *harness.Cluster) {
	leader := c.Leader(harness.LeaderTimeout)
	sum0, _ := c.Client.Metric(leader, "reconciler_git_fetch_duration_seconds_sum")
	n0, _ := c.Client.Metric(leader, "reconciler_git_fetch_duration_seconds_count")
	time.Sleep(20 * time.Second)
	sum1, _ := c.Client.Metric(leader, "reconciler_git_fetch_duration_seconds_sum")
	n1, _ := c.Client.Metric(leader, "reconciler_git_fetch_duration_seconds_count")
	if n1 > n0 {
		t.Logf("idle polls: %d fetches, %.2f ms each on average (ref listing over HTTP with the token, nothing fetched)",
			int(n1-n0), (sum1-sum0)/(n1-n0)*1000)
	}
}

func rounded(d []time.Duration) []time.Duration {
	out := make([]time.Duration, len(d))
	for i, x := range d {
		out[i] = x.Round(time.Millisecond)
	}
	return out
}
