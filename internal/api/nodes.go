package api

import (
	"context"
	"maps"
	"net/http"
	"slices"

	"github.com/policyrollout/reconciler/internal/api/apiv1"
	"github.com/policyrollout/reconciler/internal/cluster"
	"github.com/policyrollout/reconciler/internal/errs"
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

// nodeResource is a node as GET /v1/nodes/{id} and /v1/status show it,
// with what only this node knows: who leads, why a node is held, and its
// own generation and applied index right now.
func (s *nodes) nodeResource(n raftstore.Node, st *raftstore.State, v cluster.View) apiv1.Node {
	res := apiv1.FromNode(n, v.Nodes[n.ID])
	res.Leader, res.HeldReasons = n.ID == s.cluster.Leader(), s.cluster.HeldReasons(n, v)
	if n.ID == s.cluster.NodeID() {
		res.AppliedIndex = st.LastIndex
		res.Generation = 0
		if cur := s.gens.Current(); cur != nil {
			res.Generation = cur.Generation
		}
	}
	res.LoadFailures = loadFailures(st, n.ID, res.Generation)
	return res
}

func (s *nodes) nodeResources(st *raftstore.State, v cluster.View) []apiv1.Node {
	out := make([]apiv1.Node, 0, len(st.Nodes))
	for _, id := range slices.Sorted(maps.Keys(st.Nodes)) {
		out = append(out, s.nodeResource(st.Nodes[id], st, v))
	}
	return out
}

// listNodes answers GET /v1/nodes, by id.
func (s *nodes) listNodes(w http.ResponseWriter, r *http.Request) {
	st := s.cluster.State()
	s.writeValue(w, r, apiv1.NodeList{Nodes: s.nodeResources(st, s.cluster.View())})
}

// getNode answers GET /v1/nodes/{id}.
func (s *nodes) getNode(w http.ResponseWriter, r *http.Request, id string) {
	st := s.cluster.State()
	n, ok := st.Nodes[id]
	if !ok {
		s.fail(w, r, errorf(errs.NotFound, "node %q is not registered", id))
		return
	}
	s.writeValue(w, r, s.nodeResource(n, st, s.cluster.View()))
}
