package api

import (
	"context"

	"github.com/policyrollout/reconciler/internal/cluster"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// nodes serves the node resources and what changes a node: its state
// (ONAP's PDP states), the health checks, the raft configuration
// (peers, leadership transfer, removal of a dead voter), and this node's
// own health and readiness probes.
type nodes struct {
	*core
	// decisionMode is the state the decision path follows (decisions).
	decisionMode
	gens Generations
	// cluster and raft are nil without a cluster: the routes then answer
	// 404 and /readyz follows the generation only.
	cluster nodesCluster
	raft    RaftAdmin
}

// decisionMode is the node state the decisions follow.
type decisionMode interface {
	mode() raftstore.NodeState
}

// nodesCluster is the cluster as the node resources see it: the
// registered nodes, their heartbeats, and the leader's state changes and
// health checks.
type nodesCluster interface {
	stateReader
	View() cluster.View
	NodeID() string
	Leader() string
	HeldReasons(n raftstore.Node, v cluster.View) []string
	ChangeState(ctx context.Context, req cluster.ChangeStateRequest) (cluster.ChangeStateResponse, error)
	HealthCheck(ctx context.Context, req cluster.HealthCheckRequest) (cluster.HealthCheckResponse, error)
}

func newNodes(c *core, cfg Config, mode decisionMode) *nodes {
	n := &nodes{core: c, decisionMode: mode, gens: cfg.Generations, cluster: cfg.Cluster}
	n.raft, _ = cfg.Cluster.(RaftAdmin)
	return n
}
