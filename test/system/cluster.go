package system

import (
	"os"
	"strconv"
	"sync"
	"testing"

	"github.com/policyrollout/reconciler/test/harness"
)

// Environment variables that change what the package does.
const (
	// EnvBench enables the TestBench* measurements.
	EnvBench = "RECONCILER_SYSTEM_BENCH"
	// EnvRace builds the daemon with the race detector.
	EnvRace = "RECONCILER_SYSTEM_RACE"
	// EnvLogs prints the tail of every node's log (that many lines) even
	// when the test passed.
	EnvLogs = "RECONCILER_SYSTEM_LOGS"
)

// Cluster is a test/harness cluster following its own policy repository,
// plus every generation the tests have read from it, so that the
// invariants can still check a generation the cluster has pruned from its
// history (it keeps the last 50).
type Cluster struct {
	*harness.Cluster
	// CertDir, when set, holds the cluster CA and every node's
	// certificate: the nodes run with [tls] (NewTLSCluster).
	CertDir string

	seen sync.Map // generation number → the last harness.Generation read of it
}

// NewCluster prepares n nodes following a new policy repository (tree 0)
// without starting them.
func NewCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	return &Cluster{Cluster: harness.NewCluster(t, clusterOptions(t, n))}
}

func clusterOptions(t testing.TB, n int) harness.ClusterOptions {
	opts := harness.ClusterOptions{Size: n, Repo: harness.NewRepo(t, harness.RepoOptions{}),
		TailLines: logTail(), AlwaysLogs: os.Getenv(EnvLogs) != ""}
	if os.Getenv(EnvRace) != "" {
		opts.Bin = harness.RaceBinary(t)
	}
	return opts
}

// StartCluster starts n nodes and waits until they serve tree 0 together
// and the leader counts every one of them reachable.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	return start(NewCluster(t, n))
}

func start(c *Cluster) *Cluster {
	c.T.Helper()
	c.StartAll()
	c.WaitServing(0, c.Nodes, harness.ReadyTimeout)
	c.WaitReachable(c.Nodes)
	return c
}

// logTail is how many lines of each node's log teardown prints:
// RECONCILER_SYSTEM_LOGS=N (any N > 0), else 60.
func logTail() int {
	if n, err := strconv.Atoi(os.Getenv(EnvLogs)); err == nil && n > 0 {
		return n
	}
	return 60
}
