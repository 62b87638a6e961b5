package e2e

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/test/harness"
)

// Environment variables of the package.
const (
	EnvBench = "RECONCILER_E2E_BENCH"
	EnvLogs  = "RECONCILER_E2E_LOGS"
)

// startCluster starts three nodes (test/harness) following repo with
// git.poll and git.timeout, and waits until all of them serve tree 0.
func startCluster(t testing.TB, repo *harness.Repo, poll, timeout string) *harness.Cluster {
	t.Helper()
	c := harness.StartCluster(t, harness.ClusterOptions{
		Size:       3,
		Repo:       repo,
		Configure:  func(cfg *harness.Config) { cfg.Poll, cfg.Timeout = poll, timeout },
		TailLines:  60,
		AlwaysLogs: os.Getenv(EnvLogs) != "",
	})
	c.WaitServing(0, nil, time.Minute)
	return c
}

// trigger asks node n to reconcile now (a follower forwards).
func trigger(t testing.TB, c *harness.Cluster, n *harness.Node) {
	t.Helper()
	if err := c.Client.Reconcile(n); err != nil {
		t.Fatalf("reconcile via %s: %v", n.ID, err)
	}
}

// pullError returns the PullError message n shows on the policy web.
func pullError(s harness.Status) string {
	msg, _ := s.Condition(harness.Policy, "PullError")
	return msg
}

// generations reads n's generations, grouped by commit.
func generations(c *harness.Cluster, n *harness.Node) (map[string][]harness.Generation, error) {
	list, err := c.Client.Generations(n)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", n.ID, err)
	}
	byCommit := map[string][]harness.Generation{}
	for _, g := range list {
		byCommit[g.Commit] = append(byCommit[g.Commit], g)
	}
	return byCommit, nil
}
