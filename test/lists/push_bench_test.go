package lists_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/test/harness"
)

// TestBenchListPush measures push→Active of one-line changes to the
// 1,000,000-entry list on three real nodes (issue 23's target: p99 ≤ 2 s),
// and prints each phase the nodes logged (fetch, read, validate, stage,
// compile) and the chunk bytes each stage replicated:
//
//	RECONCILER_LISTS_BENCH=1 go test -count=1 -v -run TestBenchListPush ./test/lists/
//
// An older build logs fewer phases (it has no fetch and validation timings).
//
// "push" is the moment the git server has the commit (the harness's push
// of a 16 MB file is the user's, not the product's), "active" the moment
// every node answers the new line's address with DENY.
func TestBenchListPush(t *testing.T) {
	if os.Getenv("RECONCILER_LISTS_BENCH") == "" {
		t.Skip("set RECONCILER_LISTS_BENCH=1")
	}
	big := millionList(1_000_000)
	repo := harness.NewRepo(t, harness.RepoOptions{Files: map[string]string{
		"edge/policy.toml":         edgePolicy,
		"_lists/blocklist.netset":  big,
		"_lists/retired-hosts.txt": retiredHosts,
	}})
	// RECONCILER_LISTS_BENCH_BIN runs another build (an older one, for a
	// before/after from one sitting).
	c := harness.NewCluster(t, harness.ClusterOptions{Size: 3, Repo: repo, Bin: os.Getenv("RECONCILER_LISTS_BENCH_BIN")})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for _, n := range c.Nodes {
		c.Start(n)
	}
	waitDecision(ctx, t, c, from("203.0.113.9", "a.example"), "DENY", 5*time.Minute)
	for _, n := range c.Nodes {
		c.WaitReady(n)
	}
	const pushes = 12
	var took, pushTook []time.Duration
	var added strings.Builder
	for i := range pushes {
		fmt.Fprintf(&added, "198.51.100.%d/32\n", i+1)
		began := time.Now()
		repo.Push(map[string]string{"_lists/blocklist.netset": big + added.String()}, fmt.Sprintf("block one more (%d)", i))
		pushed := time.Now()
		c.Trigger()
		waitDecision(ctx, t, c, from(fmt.Sprintf("198.51.100.%d", i+1), "a.example"), "DENY", 2*time.Minute)
		took = append(took, time.Since(pushed))
		pushTook = append(pushTook, pushed.Sub(began))
	}
	t.Logf("one-line change to the 1M list, push -> DENY on 3 nodes: %s (target p99 2s)", harness.Percentiles(took))
	t.Logf("the harness's git push of the 16 MB file itself: %s", harness.Percentiles(pushTook))
	for _, n := range c.Nodes {
		for _, l := range n.LogLines(`"fetched a new live commit"`, `"commit validated"`, `"generation staged"`,
			`"compiled generation"`) {
			t.Logf("%s: %s", n.ID, l)
		}
	}
}

// waitDecision waits until every node answers body with want.
func waitDecision(ctx context.Context, t *testing.T, c *harness.Cluster, body, want string, timeout time.Duration) {
	t.Helper()
	harness.WaitFor(t, timeout, want+" on every node", func() error {
		for _, n := range c.Nodes {
			d, err := c.Client.Evaluate(ctx, n, "edge", body)
			if err != nil {
				return err
			}
			if d.Decision != want {
				return fmt.Errorf("%s: %s", n.ID, d.Decision)
			}
		}
		return nil
	})
}
