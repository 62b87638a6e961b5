package api

import (
	"context"
	"sync/atomic"

	"github.com/policyrollout/reconciler/internal/cluster"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// operations serves the long-running operations of experiment writes
// (AIP-151): get, list, wait, cancel and delete. An operation is read
// from the replicated state, or from the leader when this node has not
// applied it yet.
type operations struct {
	*core
	// cluster is nil without a cluster: the routes then answer 404.
	cluster     operationsCluster
	experiments Experiments
	// waiters counts the :wait calls open (operations.go).
	waiters atomic.Int32
}

// operationsCluster is the cluster as the operations read it: the
// replicated state, and the leader's for what this node has not applied.
type operationsCluster interface {
	State() *raftstore.State
	ForwardRead(ctx context.Context, call cluster.Call) (cluster.Answer, bool, error)
}

func newOperations(c *core, cfg Config) *operations {
	return &operations{core: c, cluster: cfg.Cluster, experiments: cfg.Experiments}
}
